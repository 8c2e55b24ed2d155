#!/bin/sh
# Compile the placement benchmark (workflow/src/advect.c) with one MPI's
# compiler wrapper:   build-advect.sh openmpi|mpich OUTPUT
# Fixed flags (no -march: the same binary runs on the host and in guests).
# The wrapper: $HPCVIRT_MPICC_OPENMPI or $HPCVIRT_MPICC_MPICH when set (a
# site's MPI, e.g. from its module or Spack view: the library its other
# benchmarks use), else Debian's mpicc.openmpi or mpicc.mpich.  The output is written atomically.
set -eu
[ $# -eq 2 ] || { echo "usage: build-advect.sh openmpi|mpich OUTPUT" >&2; exit 2; }
case "$1" in
  openmpi) cc=${HPCVIRT_MPICC_OPENMPI:-mpicc.openmpi} ;;
  mpich) cc=${HPCVIRT_MPICC_MPICH:-mpicc.mpich} ;;
  *) echo "build-advect.sh: unknown MPI '$1' (openmpi or mpich)" >&2; exit 2 ;;
esac
command -v "$cc" >/dev/null || { echo "build-advect.sh: $cc not found (install the MPI's -dev package, or name the site's wrapper in HPCVIRT_MPICC_OPENMPI or HPCVIRT_MPICC_MPICH)" >&2; exit 1; }
src=$(dirname "$0")/../src/advect.c
out=$2
mkdir -p "$(dirname "$out")"
tmp="$out.tmp.$$"
trap 'rm -f "$tmp"' EXIT
"$cc" -O2 -std=c11 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -Werror -o "$tmp" "$src" -lm
mv -f "$tmp" "$out"
trap - EXIT
echo "build-advect.sh: $out ($("$cc" --version | head -n1))"
