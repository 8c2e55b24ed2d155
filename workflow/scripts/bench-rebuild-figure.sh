#!/usr/bin/env bash
# Benchmark: wall time of rebuilding one figure (or, with FIGURE=paper, the
# whole paper: figures, generated LaTeX and main.pdf) from the committed
# archive in a fresh clone (no measurement).  Prints each run and the median.
# usage: workflow/scripts/bench-rebuild-figure.sh [FIGURE|paper] [RUNS]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
figure=${1:-pingpong}
runs=${2:-5}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
git clone -q "$root" "$tmp/clone"
cd "$tmp/clone"
ln -s "$root/.venv" .venv   # the pinned environment of the checkout under test
export PATH="$PWD/.venv/bin:$PATH"
times=()
for i in $(seq 1 "$runs"); do
  if [ "$figure" = paper ]; then
    target=paper/main.pdf
    rm -rf paper/figures paper/generated paper/main.pdf paper/build
  else
    target="paper/figures/$figure.pdf"
    rm -f "$target"
  fi
  start=$(date +%s.%N)
  snakemake --workflow-profile workflow/profiles/default "$target" >"$tmp/run-$i.log" 2>&1 \
    || { echo "run $i failed, see log:"; tail -20 "$tmp/run-$i.log"; exit 1; }
  end=$(date +%s.%N)
  t=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.3f", b - a }')
  grep -q "rule measure" "$tmp/run-$i.log" && { echo "run $i measured something: not a rebuild from the archive"; exit 1; }
  times+=("$t")
  printf 'run %d: %.2f s\n' "$i" "$t"
done
printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; printf "median of %d runs: %.2f s (min %.2f, max %.2f)\n", NR, m, a[1], a[NR]}'
