#!/usr/bin/env bash
# Build the paper with latexmk in its own directory and move the PDF into place.
# usage: build-paper.sh PAPER_DIR OUTPUT_PDF
set -euo pipefail
dir=$1
out=$(realpath -m "$2")
cd "$dir"
if ! latexmk -pdf -interaction=nonstopmode -halt-on-error -file-line-error \
  -output-directory=build main.tex; then
  missing=$(grep -A1 "Undefined control sequence" build/main.log | grep -o '\\hv[A-Za-z]*' | sort -u | tr '\n' ' ')
  if [ -n "$missing" ]; then
    echo "build-paper: the paper uses $missing but the campaign has no data for it" >&2
    echo "build-paper: see data/results/<campaign>/<testbed>/rejected.csv and generated/numbers.tex" >&2
  fi
  echo "build-paper: LaTeX failed, see $dir/build/main.log" >&2
  exit 1
fi
if grep -E "(undefined references|Citation .* undefined|Reference .* undefined)" build/main.log; then
  echo "build-paper: undefined references or citations (see $dir/build/main.log)" >&2
  exit 1
fi
cp build/main.pdf "$out.tmp"
mv "$out.tmp" "$out"
