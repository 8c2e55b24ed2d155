#!/bin/bash
# Build (or reuse) the Debian bookworm guest image for the `qemu` testbed.
#
#   build-guest-image.sh [--print-key] [--force]
#
# Output: ${HPCVIRT_WORKDIR:-<repository>/.hpcvirt}/guest/<key>/
#   vmlinuz, initrd.img   kernel + initramfs extracted from the image (-kernel/-initrd)
#   rootfs.raw            ext4 root filesystem (virtio disk /dev/vda, no partition table)
#   ssh/                  host key + user key GENERATED HERE (never committed)
#   packages.txt          requested package=version list (the cache key input)
#   dpkg.txt              every package actually installed in the guest
#   build.json            build metadata (time, sizes, key)
#   suites.txt            the builds of the pinned suites in the guest (key, directory)
#   The guest also gets the placement benchmark, compiled here with the host's
#   MPI compiler wrappers (same package versions as in the guest):
#   /usr/local/bin/hpcvirt-advect-openmpi, /usr/local/bin/hpcvirt-advect-mpich
#   and the host's builds of the pinned suites that the guests' testbed files
#   name (python -m hpcvirt.build --image: NPB, IMB, OSU, MILC for Open MPI;
#   the same binaries the host runs) under /opt/hpcvirt/suites/<suite>-<mpi>/,
#   each with its build.json.
#   The applications' per-rank wrappers and inputs are copied to the paths
#   they have in the repository, under /opt/hpcvirt (workflow/scripts/...,
#   workflow/inputs/...): commands in the guests run from /opt/hpcvirt, so a
#   testbed entry names them as it does on the host.
#   .complete             written last; its presence means the cache entry is usable
#   Between guests (mpirun's and mpiexec's ssh from the first guest to the
#   other) ssh uses the curve25519 key exchange instead of OpenSSH 9's default
#   post-quantum hybrid, and one multiplexed connection per guest pair that
#   stays open until the guests stop (ControlMaster/ControlPersist): under
#   TCG emulation the default exchange cost about 2.9 s per connection, the
#   curve25519 one 1.8 s, and a launch over an open connection 2.3 s instead
#   of 4.1-4.7 s for `mpirun -np 2 --host g0,g1 hostname` (MPI's own traffic
#   does not go through ssh: only the start of the ranks is faster).
# The last line printed on stdout is the output directory.
#
# <key> is the first 16 hex digits of sha256(packages.txt + build parameters
# + this script, the benchmark's source and its build script + the build keys
# of the suites).
# Packages that are installed on the build host are pinned to the host's
# version (so guest and host run the same MPI/NetPIPE builds); the others
# (the kernel) are pinned to the candidate version of the host's package
# lists at key time (stale lists pin a version the archive may have replaced:
# the build then fails and says to run apt-get update).
# Recommends are not installed.  SOURCE_DATE_EPOCH is fixed.
set -euo pipefail

FORMAT=5                        # bump when the image layout/customisation changes
SUITE=bookworm
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-1704067200}   # 2024-01-01T00:00:00Z
ROOTFS_SIZE=${HPCVIRT_GUEST_ROOTFS_SIZE:-3G}
MIRRORS=(
  "deb http://deb.debian.org/debian $SUITE main"
  "deb http://deb.debian.org/debian $SUITE-updates main"
  "deb http://deb.debian.org/debian-security $SUITE-security main"
)
# Requested packages (dependencies are resolved by apt).
PACKAGES=(
  linux-image-cloud-amd64 openssh-server openmpi-bin mpich
  netpipe-openmpi netpipe-mpich2 qperf iproute2 libgfortran5
  systemd-sysv udev kmod initramfs-tools netbase procps
  lammps quantum-espresso quantum-espresso-data openfoam openfoam-examples
)
# The applications' wrappers and inputs the guests get (relative to the repository).
APP_FILES=(workflow/scripts/milc-run workflow/scripts/qe-pw workflow/scripts/openfoam-dambreak workflow/inputs)

print_key=0; force=0
for a in "$@"; do
  case $a in
    --print-key) print_key=1 ;;
    --force) force=1 ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "build-guest-image.sh: unknown argument $a" >&2; exit 2 ;;
  esac
done

die() { echo "build-guest-image.sh: $*" >&2; exit 1; }

# --- resolve the pinned package list -------------------------------------
spec=""
for p in "${PACKAGES[@]}"; do
  v=$(dpkg-query -W -f='${db:Status-Status} ${Version}' "$p" 2>/dev/null \
      | awk '$1=="installed"{print $2}') || true
  if [ -z "$v" ]; then
    v=$(apt-cache policy "$p" 2>/dev/null | awk '/Candidate:/{print $2}')
    [ -n "$v" ] && [ "$v" != "(none)" ] \
      || die "package $p is neither installed on the host nor known to apt (run apt-get update)"
  fi
  spec+="$p=$v"$'\n'
done
spec=$(printf '%s' "$spec" | LC_ALL=C sort)
params="format=$FORMAT suite=$SUITE sde=$SOURCE_DATE_EPOCH size=$ROOTFS_SIZE variant=apt no-recommends"
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
src_sum=$( { cat "$here/build-guest-image.sh" "$here/../src/advect.c" "$here/build-advect.sh"
             (cd "$repo" && find "${APP_FILES[@]}" -type f | LC_ALL=C sort | xargs sha256sum); } \
           | sha256sum | cut -c1-64)
# The pinned suites the guests' testbed files name (python -m hpcvirt.build --image): their build keys
# ("<suite> <mpi> <suite>-<mpi>-<key>") enter the image key; they are built
# (or reused) only when the image is.
build_suites() {
  HPCVIRT_ROOT=$(cd "$here/../.." && pwd) PYTHONPATH="$here/../lib${PYTHONPATH:+:$PYTHONPATH}" \
    "${HPCVIRT_PYTHON:-python3}" -m hpcvirt.build "$@"
}
suite_keys=$(build_suites --image --keys) || die "the pinned suites' sources or compilers are not available"
key=$(printf '%s\n%s\n%s\n%s\n%s\n' "$spec" "$params" "${MIRRORS[*]}" "$src_sum" "$suite_keys" | sha256sum | cut -c1-16)

if [ "$print_key" = 1 ]; then echo "$key"; exit 0; fi

WORKDIR=${HPCVIRT_WORKDIR:-$(cd "$(dirname "$0")/../.." && pwd)/.hpcvirt}
out="$WORKDIR/guest/$key"
if [ -f "$out/.complete" ] && [ "$force" = 0 ]; then
  echo "build-guest-image.sh: cached image $out" >&2
  echo "$out"; exit 0
fi

[ "$(id -u)" = 0 ] || die "must run as root (mmdebstrap root mode, mke2fs -d)"
suites=$(build_suites --image --jobs 2) || die "building the pinned suites failed"   # "<suite> <mpi> <dir>" lines
[ "$(printf '%s\n' "$suites" | awk '{n=split($3, p, "/"); print $1, $2, p[n]}')" = "$suite_keys" ] \
  || die "the pinned suites' build keys changed while building the image"
for t in mmdebstrap mke2fs ssh-keygen sha256sum mpicc.openmpi mpicc.mpich; do
  command -v "$t" >/dev/null || die "missing tool: $t"
done

start=$(date +%s)
tmp="$WORKDIR/guest/.build-$key.$$"
# the image holds the guests' private keys (ssh/, and inside rootfs.raw): the build
# directory, and so the image's, is the owner's only (0700), rootfs.raw is created 0600
rm -rf "$tmp"; (umask 077 && mkdir -p "$tmp/ssh")
trap 'rm -rf "$tmp"' EXIT
printf '%s\n' "$spec" > "$tmp/packages.txt"
printf '%s\n' "$params" > "$tmp/params.txt"
printf '%s\n' "$suite_keys" > "$tmp/suites.txt"
suite_hooks=()
while read -r s m d; do
  [ -n "$s" ] && suite_hooks+=("--customize-hook=mkdir -p \"\$1/opt/hpcvirt/suites\"; cp -a $d \"\$1/opt/hpcvirt/suites/$s-$m\"")
done <<< "$suites"

# --- keys generated at build time (never committed) ------------------------
ssh-keygen -q -t ed25519 -N '' -C "hpcvirt-guest-host-$key" -f "$tmp/ssh/ssh_host_ed25519_key"
ssh-keygen -q -t ed25519 -N '' -C "hpcvirt-user-$key" -f "$tmp/ssh/id_ed25519"

# --- guest files --------------------------------------------------------------
files="$tmp/files"; mkdir -p "$files"
for mpi in openmpi mpich; do
  "$here/build-advect.sh" "$mpi" "$files/hpcvirt-advect-$mpi" >&2
done
cat > "$files/hpcvirt-net" <<'EOF'
#!/bin/sh
# Configure the guest from the kernel command line:
#   hpcvirt.ip=ADDR/PREFIX  hpcvirt.hostname=NAME  hpcvirt.hosts=NAME:ADDR,NAME:ADDR
set -e
for w in $(cat /proc/cmdline); do
  case "$w" in
    hpcvirt.ip=*) ip_addr=${w#hpcvirt.ip=} ;;
    hpcvirt.hostname=*) hn=${w#hpcvirt.hostname=} ;;
    hpcvirt.hosts=*) hosts=${w#hpcvirt.hosts=} ;;
    hpcvirt.mtu=*) mtu=${w#hpcvirt.mtu=} ;;
  esac
done
ip link set lo up
[ -n "$hn" ] && hostname "$hn" && echo "$hn" > /etc/hostname
{ echo "127.0.0.1 localhost"
  if [ -n "$hosts" ]; then
    echo "$hosts" | tr ',' '\n' | while IFS=: read -r n a; do echo "$a $n"; done
  fi
} > /etc/hosts
dev=""
for i in $(seq 100); do
  for d in /sys/class/net/*; do [ -e "$d/device" ] && dev=${d##*/} && break; done
  [ -n "$dev" ] && break; sleep 0.1
done
if [ -n "$ip_addr" ] && [ -n "$dev" ]; then
  [ -n "$mtu" ] && ip link set "$dev" mtu "$mtu"
  ip addr add "$ip_addr" dev "$dev"
  ip link set "$dev" up
fi
echo "hpcvirt-net: $dev $ip_addr $hn" > /dev/console 2>/dev/null || true
EOF
cat > "$files/hpcvirt-net.service" <<'EOF'
[Unit]
Description=hpcvirt static network from kernel command line
DefaultDependencies=no
After=systemd-udevd.service local-fs.target
Before=network.target ssh.service
[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/local/sbin/hpcvirt-net
[Install]
WantedBy=multi-user.target
EOF

pin_args=()
while read -r line; do [ -n "$line" ] && pin_args+=("--include=$line"); done <<< "$spec"

mmdebstrap \
  --mode=root --variant=apt --format=directory \
  --aptopt='APT::Install-Recommends "false"' \
  --aptopt='APT::Install-Suggests "false"' \
  --dpkgopt='path-exclude=/usr/share/doc/*' \
  --dpkgopt='path-include=/usr/share/doc/*/copyright' \
  --dpkgopt='path-include=/usr/share/doc/openfoam-examples/examples/multiphase/interFoam/laminar/damBreak/*' \
  --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/locale/*' \
  --essential-hook='mkdir -p "$1/etc/initramfs-tools/conf.d"; echo "MODULES=most" > "$1/etc/initramfs-tools/conf.d/hpcvirt"' \
  "${pin_args[@]}" \
  --customize-hook="install -m 0755 $files/hpcvirt-net \"\$1/usr/local/sbin/hpcvirt-net\"" \
  --customize-hook="install -m 0755 $files/hpcvirt-advect-openmpi $files/hpcvirt-advect-mpich \"\$1/usr/local/bin/\"" \
  "${suite_hooks[@]}" \
  --customize-hook="mkdir -p \"\$1/opt/hpcvirt\"; cd \"$repo\" && cp -a --parents ${APP_FILES[*]} \"\$1/opt/hpcvirt/\"" \
  --customize-hook="install -m 0644 $files/hpcvirt-net.service \"\$1/etc/systemd/system/hpcvirt-net.service\"" \
  --customize-hook='chroot "$1" systemctl enable hpcvirt-net.service' \
  --customize-hook='chroot "$1" systemctl mask systemd-timesyncd.service apt-daily.timer apt-daily-upgrade.timer e2scrub_reap.service e2scrub_all.timer fstrim.timer man-db.timer 2>/dev/null || true' \
  --customize-hook='chroot "$1" systemctl mask modprobe@dm_mod.service modprobe@fuse.service modprobe@loop.service getty-static.service serial-getty@ttyS0.service getty@tty1.service systemd-update-utmp.service systemd-update-utmp-runlevel.service dev-hugepages.mount sys-kernel-debug.mount sys-kernel-tracing.mount 2>/dev/null || true' \
  --customize-hook='echo "/dev/vda / ext4 defaults,noatime 0 1" > "$1/etc/fstab"' \
  --customize-hook='echo hpcvirt-guest > "$1/etc/hostname"' \
  --customize-hook='rm -f "$1"/etc/ssh/ssh_host_*' \
  --customize-hook="install -m 0600 $tmp/ssh/ssh_host_ed25519_key \"\$1/etc/ssh/ssh_host_ed25519_key\"" \
  --customize-hook="install -m 0644 $tmp/ssh/ssh_host_ed25519_key.pub \"\$1/etc/ssh/ssh_host_ed25519_key.pub\"" \
  --customize-hook='printf "HostKey /etc/ssh/ssh_host_ed25519_key\nUseDNS no\nPermitRootLogin prohibit-password\nPasswordAuthentication no\nAcceptEnv OMPI_* MPIR_* UCX_* HYDRA_*\n" > "$1/etc/ssh/sshd_config.d/hpcvirt.conf"' \
  --customize-hook='mkdir -p -m 0700 "$1/root/.ssh"' \
  --customize-hook="install -m 0600 $tmp/ssh/id_ed25519.pub \"\$1/root/.ssh/authorized_keys\"" \
  --customize-hook="install -m 0600 $tmp/ssh/id_ed25519 \"\$1/root/.ssh/id_ed25519\"" \
  --customize-hook='printf "Host *\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n  BatchMode yes\n  KexAlgorithms curve25519-sha256\n  ControlMaster auto\n  ControlPath /run/hpcvirt-ssh-%%C\n  ControlPersist yes\n" > "$1/root/.ssh/config"; chmod 600 "$1/root/.ssh/config"' \
  --customize-hook='printf "OMPI_ALLOW_RUN_AS_ROOT=1\nOMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1\n" >> "$1/etc/environment"' \
  --customize-hook='chroot "$1" passwd -l root >/dev/null' \
  --customize-hook="chroot \"\$1\" dpkg-query -W -f='\${Package}=\${Version}\n' > $tmp/dpkg.txt" \
  --customize-hook="cp -L \"\$1\"/boot/vmlinuz-* $tmp/vmlinuz; cp -L \"\$1\"/boot/initrd.img-* $tmp/initrd.img" \
  --customize-hook='rm -rf "$1"/var/cache/apt/* "$1"/var/lib/apt/lists/* "$1"/var/log/*.log "$1"/etc/machine-id; : > "$1/etc/machine-id"' \
  "$SUITE" "$tmp/root" "${MIRRORS[@]}" >&2 \
  || die "mmdebstrap failed (above); where apt says a pinned version 'was not found', this host's package lists are older than the Debian archive, which has replaced that package since (a security update of the kernel, say): run apt-get update and build again"

# ext4 without mounting anything: mke2fs -d.  Fixed UUID and hash seed.
(umask 077 && E2FSPROGS_FAKE_TIME=$SOURCE_DATE_EPOCH mke2fs -q -F -t ext4 -L hpcvirt-root \
  -U 6c1e2a9e-0d1b-4f7a-9f3e-3a5b4c2d1e00 -E hash_seed=6c1e2a9e-0d1b-4f7a-9f3e-3a5b4c2d1e01,root_owner=0:0 \
  -d "$tmp/root" "$tmp/rootfs.raw" "$ROOTFS_SIZE" >&2)
rm -rf "$tmp/root" "$files"

end=$(date +%s)
cat > "$tmp/build.json" <<EOF
{"key": "$key", "suite": "$SUITE", "format": $FORMAT, "source_date_epoch": $SOURCE_DATE_EPOCH,
 "build_seconds": $((end - start)),
 "rootfs_apparent_bytes": $(stat -c %s "$tmp/rootfs.raw"),
 "rootfs_allocated_bytes": $(( $(stat -c %b "$tmp/rootfs.raw") * $(stat -c %B "$tmp/rootfs.raw") )),
 "kernel": "$(grep '^linux-image-[0-9]' "$tmp/dpkg.txt" | head -n1)"}
EOF
touch "$tmp/.complete"
rm -rf "$out"; mkdir -p "$(dirname "$out")"; mv "$tmp" "$out"; trap - EXIT
echo "build-guest-image.sh: built $out in $((end - start)) s" >&2
echo "$out"
