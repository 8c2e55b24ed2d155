"""Benchmark output parsers.  Each returns a list of tidy.Measurement or
raises tidy.ParseError naming the file."""
