#!/usr/bin/env bash
# Build the offline "hybrid model" image: a Debian bookworm root filesystem
# holding the SAME MPI userland and benchmarks as this host (exact Debian
# versions read from the host's dpkg database) and the pinned suites,
# installed into the image's own Spack tree (/opt/spack) by the project's
# Spack from the committed lock (python -m hpcvirt.image), packed as a
# SquashFS image.
#
# Usage: containers/offline/build.sh OUTPUT.sqfs
#
# Writes OUTPUT.sqfs, OUTPUT.sqfs.manifest (dpkg -W of the image),
# OUTPUT.sqfs.suites.json (the Spack builds in the image: hashes, prefixes,
# the lock's sha256) and OUTPUT.sqfs.sha256, and prints "sha256:<hex>  OUTPUT.sqfs" as its last line.
#
# Environment (all optional):
#   SOURCE_DATE_EPOCH  fixed timestamp for every file and the filesystem
#                      (default 1747699200 = 2025-05-20T00:00:00Z)
#   DEBIAN_SNAPSHOT    e.g. 20250520T000000Z: resolve from snapshot.debian.org
#                      instead of the regular mirrors (frozen dependency set)
#   DEBIAN_MIRROR      default http://deb.debian.org/debian
#   DEBIAN_SECURITY    default http://deb.debian.org/debian-security
#   HPCVIRT_WORKDIR    scratch directory (default: <repo>/.hpcvirt/build)
#   SQUASHFS_COMP      mksquashfs compressor (default gzip)
#
# Needs (Debian): mmdebstrap, squashfs-tools, patchelf; the project's Python
# (PYTHON, default python3: the one with the pinned packages); run as root
# (mmdebstrap root mode; Spack installs in a private mount namespace).
# Optional on the host (copied into the image when present): libpmix-bin,
# ucx-utils.
set -euo pipefail

if [[ $# -ne 1 ]]; then
    echo "usage: $0 OUTPUT.sqfs" >&2
    exit 2
fi
out=$(realpath -m -- "$1")

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)

export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-1747699200}"
export LC_ALL=C.UTF-8 TZ=UTC
umask 022

suite=bookworm
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
security="${DEBIAN_SECURITY:-http://deb.debian.org/debian-security}"
if [[ -n "${DEBIAN_SNAPSHOT:-}" ]]; then
    mirror="http://snapshot.debian.org/archive/debian/${DEBIAN_SNAPSHOT}"
    security="http://snapshot.debian.org/archive/debian-security/${DEBIAN_SNAPSHOT}"
    opts="[check-valid-until=no]"
else
    opts=""
fi
sources=(
    "deb $opts $mirror $suite main"
    "deb $opts $mirror $suite-updates main"
    "deb $opts $security $suite-security main"
)

# The MPI userland and benchmarks, pinned to the host's exact versions so the
# hybrid model (host mpirun/srun outside, the image's libmpi per rank) sees
# one Open MPI, one PMIx and one UCX on both sides.
packages=(
    openmpi-bin openmpi-common libopenmpi3 libpmix2 libucx0
    mpich libmpich12
    netpipe-openmpi netpipe-mpich2
    qperf
    libgfortran5
)
# The pinned suites are installed by Spack after mmdebstrap (below);
# libgfortran5 is NPB's Fortran runtime.
# Probe tools (pmix_info, ucx_info) go in when the host has them, so the
# preflight reads versions the same way on both sides; otherwise it falls
# back to dpkg-query, which gives the same answer.
optional=(libpmix-bin ucx-utils)
for p in "${optional[@]}"; do
    if [[ "$(dpkg-query -W -f '${db:Status-Status}' "$p" 2>/dev/null || true)" == installed ]]; then
        packages+=("$p")
    fi
done
include=()
for p in "${packages[@]}"; do
    v=$(dpkg-query -W -f '${Version}' "$p" 2>/dev/null || true)
    st=$(dpkg-query -W -f '${db:Status-Status}' "$p" 2>/dev/null || true)
    if [[ -z "$v" || "$st" != installed ]]; then
        echo "error: host package $p is not installed; install it first" \
             "(apt-get install $p) so the image can match the host" >&2
        exit 1
    fi
    include+=("$p=$v")
done

for tool in mmdebstrap mksquashfs sha256sum; do
    command -v "$tool" >/dev/null || { echo "error: $tool not found" >&2; exit 1; }
done

work="${HPCVIRT_WORKDIR:-$repo/.hpcvirt/build}"
mkdir -p "$work" "$(dirname "$out")"
rootfs=$(mktemp -d "$work/rootfs.XXXXXX")
cleanup() { rm -rf --one-file-system "$rootfs"; }
trap cleanup EXIT
rmdir "$rootfs"   # mmdebstrap wants to create the target itself

start=$(date +%s)
echo ">> mmdebstrap $suite (SOURCE_DATE_EPOCH=$SOURCE_DATE_EPOCH)" >&2
echo ">> pins: ${include[*]}" >&2
mmdebstrap \
    --mode=root --variant=essential --format=directory \
    --skip=output/dev \
    --aptopt='APT::Install-Recommends "false"' \
    --aptopt='APT::Install-Suggests "false"' \
    --aptopt='Acquire::Languages "none"' \
    --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/info/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --include="${include[*]}" \
    --customize-hook='printf "hpcvirt\n" > "$1/etc/hostname"' \
    --customize-hook='printf "127.0.0.1 localhost\n::1 localhost\n" > "$1/etc/hosts"' \
    --customize-hook=': > "$1/etc/resolv.conf"' \
    --customize-hook='chroot "$1" dpkg-query -W -f "\${Package}\t\${Version}\n" > "$1/etc/hpcvirt-manifest.tsv"' \
    "$suite" "$rootfs" "${sources[@]}" >&2

# Pins must have held: every pinned package in the image at the host's version.
for spec in "${include[@]}"; do
    p=${spec%%=*}; v=${spec#*=}
    got=$(awk -F'\t' -v p="$p" '$1==p {print $2}' "$rootfs/etc/hpcvirt-manifest.tsv")
    if [[ "$got" != "$v" ]]; then
        echo "error: $p is $got in the image but $v on the host" >&2
        exit 1
    fi
done
cp "$rootfs/etc/hpcvirt-manifest.tsv" "$out.manifest"

# The suites: Spack installs the lock's roots that the container testbeds
# name into the image's /opt/spack (same DAG hashes as the lock, checked) and
# stages them at /opt/hpcvirt/suites/<suite>-<mpi>.
echo ">> the suites, by Spack from spack-envs/laptop/spack.lock" >&2
PYTHONPATH="$repo/workflow/lib" HPCVIRT_ROOT="$repo" "${PYTHON:-python3}" -m hpcvirt.image install "$rootfs" >&2
cp "$rootfs/opt/hpcvirt/suites.json" "$out.suites.json"

echo ">> mksquashfs -> $out" >&2
rm -f "$out"
# -noappend: never extend an old image; -all-root/-no-xattrs: no host
# ownership or labels leak in; -mkfs-time/-all-time: fixed timestamps;
# directory entries are always written sorted by mksquashfs.  The explicit
# time flags replace SOURCE_DATE_EPOCH, which mksquashfs refuses to combine
# with them.
env -u SOURCE_DATE_EPOCH mksquashfs "$rootfs" "$out" \
    -noappend -no-progress -quiet \
    -comp "${SQUASHFS_COMP:-gzip}" \
    -all-root -no-xattrs \
    -mkfs-time "$SOURCE_DATE_EPOCH" -all-time "$SOURCE_DATE_EPOCH" \
    -reproducible >&2

end=$(date +%s)
sum=$(sha256sum "$out" | cut -d' ' -f1)
printf 'sha256:%s  %s\n' "$sum" "$(basename "$out")" > "$out.sha256"
echo ">> built in $((end - start)) s, $(stat -c %s "$out") bytes" >&2
printf 'sha256:%s  %s\n' "$sum" "$out"
