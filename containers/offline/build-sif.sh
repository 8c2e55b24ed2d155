#!/usr/bin/env bash
# Build the offline image as a SIF for Apptainer: `apptainer build` from the
# root filesystem of the offline SquashFS image (containers/offline/build.sh),
# so both runtimes run the same mmdebstrap tree.
#
# Usage: containers/offline/build-sif.sh OFFLINE.sqfs OUTPUT.sif
#
# Writes OUTPUT.sif, OUTPUT.sif.sha256 ("sha256:<hex>  OUTPUT.sif") and
# OUTPUT.sif.suites.json (the SquashFS image's record of the Spack builds it
# carries) and prints the digest line last.  Apptainer is $APPTAINER, else the site's on PATH,
# else the one `workflow/scripts/install-deps.sh apptainer` built.
# `apptainer build` runs without --userns first and with it only when that
# fails (root without a setuid starter needs it); the log says which and why.
# Needs: squashfs-tools (unsquashfs).
set -euo pipefail
if [[ $# -ne 2 ]]; then
    echo "usage: $0 OFFLINE.sqfs OUTPUT.sif" >&2
    exit 2
fi
sqfs=$(realpath -- "$1")
out=$(realpath -m -- "$2")
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-1747699200}"
export LC_ALL=C.UTF-8 TZ=UTC
umask 022

[[ -f "$sqfs" ]] || { echo "error: no offline image $sqfs (build it first: snakemake .hpcvirt/images/offline.sqfs)" >&2; exit 1; }
command -v unsquashfs >/dev/null || { echo "error: unsquashfs not found (apt-get install squashfs-tools)" >&2; exit 1; }
apptainer=${APPTAINER:-$(PYTHONPATH="$repo/workflow/lib" "${PYTHON:-python3}" -m hpcvirt.apptainer exe)}
echo ">> $("$apptainer" --version) ($apptainer)" >&2

work="${HPCVIRT_WORKDIR:-$repo/.hpcvirt/build}"
mkdir -p "$work" "$(dirname "$out")"
tmp=$(mktemp -d "$work/sif.XXXXXX")
cleanup() { rm -rf --one-file-system "$tmp"; }
trap cleanup EXIT

start=$(date +%s)
echo ">> unsquashfs $sqfs" >&2
unsquashfs -no-progress -quiet -d "$tmp/rootfs" "$sqfs" >&2
# Apptainer's own mount points and environment files, made the same way every time
mkdir -p "$tmp/rootfs/.singularity.d"
partial="$tmp/$(basename "$out")"
echo ">> apptainer build $partial" >&2
if ! "$apptainer" build --force "$partial" "$tmp/rootfs/" > "$tmp/build.log" 2>&1; then
    echo ">> apptainer build without --userns failed: $(grep -v '^\s*$' "$tmp/build.log" | tail -1)" >&2
    echo ">> retrying with --userns" >&2
    "$apptainer" build --userns --force "$partial" "$tmp/rootfs/" >&2
else
    cat "$tmp/build.log" >&2
fi
mv -f "$partial" "$out"
cp "$sqfs.suites.json" "$out.suites.json"
end=$(date +%s)
sum=$(sha256sum "$out" | cut -d' ' -f1)
printf 'sha256:%s  %s\n' "$sum" "$(basename "$out")" > "$out.sha256"
echo ">> built in $((end - start)) s, $(stat -c %s "$out") bytes" >&2
printf 'sha256:%s  %s\n' "$sum" "$out"
