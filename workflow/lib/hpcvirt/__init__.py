"""hpcvirt: parsers, statistics, provenance and launch building for the
native-vs-virtualized HPC study.  Imports without Snakemake."""

__version__ = "0.1.0"
