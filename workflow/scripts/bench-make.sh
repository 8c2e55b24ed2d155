#!/usr/bin/env bash
# Benchmark: wall time of one make target (quick, all, test, bundle, report)
# in a fresh clone of this checkout's HEAD, venv and suite builds included
# (the Debian packages are whatever the machine has: on a fresh machine,
# run `workflow/scripts/install-deps.sh base slurm vm containers tools` under
# `time` first).  Keeps the clone and its log; prints the wall time and the
# budget the README states for the target.
# usage: workflow/scripts/bench-make.sh [TARGET] [CLONE_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
target=${1:-quick}
dir=${2:-$(mktemp -d)/clone}
declare -A budget=([quick]=600 [all]=3600 [test]=2400 [bundle]=300 [report]=60)
git clone -q "$root" "$dir"
cd "$dir"
echo "bench-make: make $target in $dir (commit $(git rev-parse --short HEAD)); log: $dir/bench-make.log"
start=$(date +%s.%N)
rc=0
make "$target" >"$dir/bench-make.log" 2>&1 || rc=$?
end=$(date +%s.%N)
t=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
echo "bench-make: make $target exit $rc, wall $t s ($(awk -v t="$t" 'BEGIN { printf "%.1f", t / 60 }') min);" \
     "budget ${budget[$target]:-none} s"
exit "$rc"
