"""qemu testbed: pure helpers everywhere; real guests (``vm`` marker) only
as root with qemu, mmdebstrap and iproute2 installed.  The first real test
builds the guest image if it is not cached yet (~1-2 min)."""

from __future__ import annotations

import os
import secrets
import shlex
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from hpcvirt import qemu
from hpcvirt.config import load_testbed
from hpcvirt.testbeds import kind
from hpcvirt.measure import STRAYS
from hpcvirt.netns import TestbedError, list_netns
from hpcvirt.qemu import (BootTimeout, Cluster, GuestDied, QemuCluster, cleanup,
                          guest_addresses, guest_mac, kernel_cmdline, names, qemu_argv)

REPO = Path(__file__).resolve().parents[1]
# The qemu kind's MPI launchers come from its testbed file; the default study
# runs Open MPI in the guests, these tests run MPICH there too (the flags a
# testbed file would give it).
VM = load_testbed(REPO / "config/testbeds/vm.yaml")
VM["mpi"]["mpich"] = {
    "launcher": ["mpiexec.mpich", "-launcher", "ssh", "-bind-to", "none", "-hosts", "{host_counts}", "-n", "{ranks}"],
    "paths": {"net": {"env": {"UCX_TLS": "tcp,self", "MPIR_CVAR_NOLOCAL": "1"}}},
}


def mpi_argv(cluster, mpi: str, rank_guests=None) -> list[str]:
    """argv running one rank per entry of ``rank_guests`` (default: one per guest), launched in guest 0."""
    return kind(VM, cluster).mpi_launcher(mpi, rank_guests or cluster.guests, "net")


def _run_mpi(cluster, mpi: str, program: list[str], timeout: float):
    argv = mpi_argv(cluster, mpi)
    return cluster.run(0, argv[-1] + " " + shlex.join(program), timeout=timeout)


# ------------------------------------------------------------- pure helpers
def test_names():
    n = names("ab12", 2)
    assert n["ns"] == "hv-ab12-vm"
    assert n["taps"] == ["hvab12t0", "hvab12t1"]
    assert n["guests"] == ["g0", "g1"]
    assert all(len(x) <= 15 for x in [n["bridge"], *names("zzzzzzzz", 99)["taps"]])
    assert n["run_dir"].name == "qemu-ab12"
    with pytest.raises(ValueError):
        names("Bad-Tag")


def test_guest_addresses():
    net, addrs, br = guest_addresses("198.18.1.0/24", 2)
    assert addrs == ["198.18.1.1", "198.18.1.2"] and br == "198.18.1.254"
    for bad in ("10.0.2.0/24", "172.16.0.0/24", "198.17.0.0/24"):
        with pytest.raises(ValueError):
            guest_addresses(bad, 2)


def test_guest_mac_deterministic_and_local():
    assert guest_mac("ab", 1) == guest_mac("ab", 1)
    assert guest_mac("ab", 0) != guest_mac("ab", 1)
    first = int(guest_mac("zz", 3).split(":")[0], 16)
    assert first & 0b10 and not first & 0b1          # locally administered, unicast


def test_kernel_cmdline():
    s = kernel_cmdline("g1", "198.18.1.2", 24, {"g0": "198.18.1.1", "g1": "198.18.1.2"})
    assert "console=ttyS0" in s and "root=/dev/vda" in s
    assert "hpcvirt.ip=198.18.1.2/24" in s and "hpcvirt.hostname=g1" in s
    assert "hpcvirt.hosts=g0:198.18.1.1,g1:198.18.1.2" in s


def test_qemu_argv_uses_overlay_and_accel(tmp_path):
    kw = dict(vcpus=2, memory_mb=1024, kernel=tmp_path / "k", initrd=tmp_path / "i",
              disk=tmp_path / "g0.qcow2", append="console=ttyS0", tap="hvxt0",
              mac="52:54:00:00:00:01", serial_log=tmp_path / "s", pidfile=tmp_path / "p")
    a = qemu_argv(accel="tcg", **kw)
    s = " ".join(a)
    assert "-accel tcg" in s and "-kernel" in s and "-initrd" in s and "-no-reboot" in s
    assert f"file={tmp_path / 'g0.qcow2'},if=virtio,format=qcow2" in s
    assert "rootfs.raw" not in s                    # never the base image
    assert "tap,id=n0,ifname=hvxt0,script=no" in s and "virtio-net-pci" in s
    assert f"file:{tmp_path / 's'}" in s
    assert "-accel kvm -cpu host" in " ".join(qemu_argv(accel="kvm", **kw))
    with pytest.raises(ValueError):
        qemu_argv(accel="hvf", **kw)


def _fake_cluster(tmp_path) -> Cluster:
    return Cluster(kind="qemu", tag="x", guests=["g0", "g1"],
                   addresses=["198.18.1.1", "198.18.1.2"], subnet="198.18.1.0/24",
                   accel="tcg", ns="hv-x-vm", key=tmp_path / "id", known_hosts=tmp_path / "kh",
                   run_dir=tmp_path, serial_logs=[tmp_path / "g0.serial", tmp_path / "g1.serial"])


def test_cluster_exec_prefix_and_mpi_argv(tmp_path):
    c = _fake_cluster(tmp_path)
    p = c.exec_prefix("g1")
    assert p[:5] == ["ip", "netns", "exec", "hv-x-vm", "ssh"]
    assert p[-1] == "root@198.18.1.2" and "StrictHostKeyChecking=yes" in p
    assert c.argv(0, ["echo", "a b"])[-1] == "echo 'a b'"
    s = mpi_argv(c, "openmpi")[-1]
    assert "--host g0,g1" in s and "--bind-to none" in s and "btl_tcp_if_include 198.18.1.0/24" in s
    s = mpi_argv(c, "mpich", ["g0", "g0", "g1", "g1"])[-1]
    assert "-hosts g0:2,g1:2 -n 4" in s
    with pytest.raises(KeyError):
        c.exec_prefix("g7")


def test_ranks_in_guests_bind_themselves_when_the_testbed_asks(tmp_path):
    """vm.bind_ranks: each rank starts under taskset on its local rank's vCPU (between the launcher's options
    and the rank-0 output wrapper); without the key the ranks are left to the guest's scheduler."""
    c = _fake_cluster(tmp_path)
    bound = kind(VM, c).mpi_launcher("openmpi", ["g0", "g1"], "net")[-1]
    assert VM["vm"]["bind_ranks"] is True and "--bind-to none" in bound
    assert "exec taskset -c $((l % $(nproc)))" in bound and bound.rstrip().endswith("bind-local-rank")
    unbound = kind({**VM, "vm": {**VM["vm"], "bind_ranks": False}}, c).mpi_launcher("openmpi", ["g0", "g1"], "net")
    assert "taskset" not in unbound[-1]


def test_check_alive_names_dead_guest(tmp_path):
    c = _fake_cluster(tmp_path)
    (tmp_path / "g1.serial").write_text("line\n" * 50 + "Kernel panic - the end\n")
    alive = subprocess.Popen(["sleep", "30"])
    dead = subprocess.Popen(["sh", "-c", "exit 3"])
    dead.wait(timeout=10)
    c.procs = [alive, dead]
    try:
        with pytest.raises(GuestDied, match=r"guest g1 .*status 3.*\n(.|\n)*Kernel panic - the end"):
            c.check_alive()
    finally:
        alive.kill()
        alive.wait(timeout=10)


def test_kvm_probe_is_kept_per_image_and_host_boot(tmp_path, monkeypatch):
    from hpcvirt import kvm

    calls = []
    monkeypatch.setattr(kvm, "probe_kvm", lambda image, timeout_s=10: calls.append(image) or (False, "no kvm"))
    monkeypatch.setattr(kvm, "_PROBE_CACHE", {})
    assert kvm.probe_kvm_cached(tmp_path) == (False, "no kvm")
    assert len(calls) == 1
    record = (tmp_path / "kvm-probe.json").read_text()
    assert kvm._boot_id() in record
    # another process (a new round) of the same host boot reuses the record
    monkeypatch.setattr(kvm, "_PROBE_CACHE", {})
    ok, reason = kvm.probe_kvm_cached(tmp_path)
    assert (ok, len(calls)) == (False, 1) and reason.startswith("no kvm (probed at ")
    # after a reboot of the host (another boot id) it probes again
    monkeypatch.setattr(kvm, "_PROBE_CACHE", {})
    monkeypatch.setattr(kvm, "_boot_id", lambda: "another-boot")
    kvm.probe_kvm_cached(tmp_path)
    assert len(calls) == 2


def test_build_script_key_is_stable():
    script = REPO / "workflow" / "scripts" / "build-guest-image.sh"
    if shutil.which("dpkg-query") is None or shutil.which("apt-cache") is None:
        pytest.skip("needs dpkg-query and apt-cache")
    k1 = subprocess.run(["bash", str(script), "--print-key"], capture_output=True, text=True,
                        timeout=60)
    k2 = subprocess.run(["bash", str(script), "--print-key"], capture_output=True, text=True,
                        timeout=60)
    assert k1.returncode == 0, k1.stderr
    assert k1.stdout == k2.stdout and len(k1.stdout.strip()) == 16


def test_the_image_and_its_keys_are_created_private(tmp_path):
    """The build script's own lines that make the build directory, the keys and rootfs.raw, run under a
    permissive umask: the directory is 0700, every file holding a private key 0600."""
    if shutil.which("mke2fs") is None or shutil.which("ssh-keygen") is None:
        pytest.skip("needs mke2fs and ssh-keygen")
    text = (REPO / "workflow" / "scripts" / "build-guest-image.sh").read_text()
    lines = text.splitlines()
    mkdir = [ln for ln in lines if ln.startswith('rm -rf "$tmp"; ') and "mkdir" in ln]
    keygen = [ln for ln in lines if ln.startswith("ssh-keygen ")]
    start = next(i for i, ln in enumerate(lines) if "mke2fs -q" in ln)
    end = next(i for i in range(start, len(lines)) if not lines[i].endswith("\\"))
    assert len(mkdir) == 1 and len(keygen) == 2
    tmp = tmp_path / "build"
    snippet = "\n".join(["set -eu", "umask 022", *mkdir, *keygen, 'mkdir -p "$tmp/root/root"',
                         'echo secret > "$tmp/root/root/key"', *lines[start:end + 1]])
    res = subprocess.run(["bash", "-c", snippet], env=dict(os.environ, tmp=str(tmp), key="k", SOURCE_DATE_EPOCH="0",
                                                           ROOTFS_SIZE="4M"), capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert oct(tmp.stat().st_mode & 0o777) == "0o700"
    for f in qemu.KEY_FILES:
        assert oct((tmp / f).stat().st_mode & 0o777) == "0o600", f


def test_an_image_built_before_is_made_private(tmp_path, capsys):
    image = tmp_path / "guest"
    (image / "ssh").mkdir(parents=True)
    for f in (*qemu.KEY_FILES, "vmlinuz", "ssh/id_ed25519.pub"):
        (image / f).write_text("x")
        (image / f).chmod(0o644)
    image.chmod(0o755)
    assert qemu.keep_keys_private(image) == [image, *(image / f for f in qemu.KEY_FILES)]
    assert oct(image.stat().st_mode & 0o777) == "0o700"
    assert {f: oct((image / f).stat().st_mode & 0o777) for f in qemu.KEY_FILES} == dict.fromkeys(qemu.KEY_FILES, "0o600")
    assert oct((image / "vmlinuz").stat().st_mode & 0o777) == "0o644"      # holds no key
    assert "made ., rootfs.raw, ssh/id_ed25519, ssh/ssh_host_ed25519_key private" in capsys.readouterr().err
    assert qemu.keep_keys_private(image) == []


# ------------------------------------------------------------- real guests
def _why_no_qemu() -> str | None:
    if os.geteuid() != 0:
        return "qemu testbed needs root (namespaces, taps)"
    missing = [t for t in ("ip", "qemu-system-x86_64", "qemu-img", "ssh", "mmdebstrap", "mke2fs")
               if shutil.which(t) is None]
    if missing:
        return f"not installed: {missing} (apt-get install qemu-system-x86 qemu-utils mmdebstrap)"
    if not os.path.exists("/dev/net/tun"):
        return "no /dev/net/tun"
    return None


_NO_QEMU = _why_no_qemu()
needs_qemu = pytest.mark.skipif(_NO_QEMU is not None, reason=_NO_QEMU or "")


def _tag() -> str:
    return "q" + secrets.token_hex(3)


def _forget(tag: str) -> None:
    """cleanup() plus removal of the run directory (serial logs) of a test run."""
    cleanup(tag)
    shutil.rmtree(names(tag)["run_dir"], ignore_errors=True)


def _pids(match) -> list[int]:
    """PIDs of the processes whose command line (NUL-separated bytes) satisfies ``match``."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                cmd = (d / "cmdline").read_bytes()
            except OSError:
                continue
            if match(cmd):
                out.append(int(d.name))
    return out


def _qemu_pids(run_dir: Path) -> list[int]:
    return _pids(lambda cmd: b"qemu-system" in cmd and str(run_dir).encode() in cmd)


def _ssh_master_pids(run_dir: Path) -> list[int]:
    return _pids(lambda cmd: cmd.startswith(b"ssh\0") and f"ControlPath={run_dir}/".encode() in cmd)


def _leftovers(tag: str) -> list[str]:
    n = names(tag)
    left = [x for x in list_netns() if x == n["ns"]]
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, timeout=10).stdout
    left += [w for w in links.split() if w.startswith(f"hv{tag}")]
    left += [f"qemu pid {p}" for p in _qemu_pids(n["run_dir"])]
    left += [f"ssh master pid {p}" for p in _ssh_master_pids(n["run_dir"])]
    if n["run_dir"].is_dir():
        left += [str(p) for p in n["run_dir"].glob("*.qcow2")]
    return left


@pytest.fixture(scope="module")
def image():
    if _NO_QEMU:
        pytest.skip(_NO_QEMU)
    return qemu.ensure_guest_image()


def _macvtap_missing() -> str:
    from hpcvirt import link
    return link.probe("macvtap")


@pytest.fixture(scope="module")
def cluster(image):
    """Two guests of two vCPUs, booted once for this module's tests (a boot under TCG costs about a
    minute), on the direct path (macvtap, rate 10 Gbit/s) where the kernel has macvtap, else on the
    bridge (the guests' testbed's own path, which the tiny study and the interrupted round take through
    the workflow).  The last of its tests kills a guest; teardown checks that nothing is left, the
    macvtaps' device nodes included."""
    tag = _tag()
    path = {} if _macvtap_missing() else {"subnet": "198.18.9.0/24", "path": "macvtap", "rate": "10gbit"}
    try:
        with QemuCluster(tag, guests=2, vcpus=2, image=image, **path) as c:
            yield c
        assert _leftovers(tag) == [] and not list(names(tag)["run_dir"].glob("*.tapdev"))
    finally:
        _forget(tag)


@pytest.mark.vm
@needs_qemu
def test_guests_answer_and_accel_recorded(cluster):
    assert cluster.accel in ("kvm", "tcg")
    assert cluster.info["accel"] == cluster.accel and cluster.info["accel_reason"]
    assert set(cluster.info["boot_to_ssh_s"]) == {"g0", "g1"}
    for i, g in enumerate(cluster.guests):
        out = cluster.run(i, "hostname; ip -o -4 addr show", timeout=60).stdout
        assert out.split()[0] == g and cluster.addresses[i] in out
    # guest 0 reaches guest 1 by name over ssh (what mpirun needs), over one connection that stays open
    # (build-guest-image.sh: the ranks of later launches start without a new key exchange)
    assert cluster.run(0, "ssh g1 hostname", timeout=60).stdout.strip() == "g1"
    assert cluster.run(0, "ssh -O check g1", timeout=60, check=False).returncode == 0
    assert cluster.run(0, "ssh g1 hostname", timeout=60).stdout.strip() == "g1"
    # the base image is untouched: guests write to their overlays
    assert all((cluster.run_dir / f"{g}.qcow2").exists() for g in cluster.guests)


@pytest.mark.vm
@needs_qemu
def test_commands_share_one_ssh_connection_per_guest(cluster):
    """Every command reaches its guest over the guest's master connection
    (no new key exchange per measurement), and the masters live in the
    namespace, so that teardown ends them (the cluster fixture checks that
    nothing is left)."""
    assert cluster.info["ssh_master"] == cluster.guests and cluster.control_path
    for i, addr in enumerate(cluster.addresses):
        sock = cluster.control_path.replace("%h", addr)
        check = subprocess.run([*cluster.exec_prefix(i)[:-1], "-O", "check", cluster.exec_prefix(i)[-1]],
                               capture_output=True, text=True, timeout=30)
        assert check.returncode == 0, check.stderr
        assert Path(sock).is_socket()
    # the guest sees the same connection (one sshd session, the same client port) for two commands
    ports = {cluster.run(0, "echo $SSH_CLIENT", timeout=60).stdout.split()[1] for _ in range(2)}
    assert len(ports) == 1
    masters = subprocess.run(["ip", "netns", "pids", cluster.ns], capture_output=True, text=True,
                             timeout=10).stdout.split()
    cmdlines = [Path(f"/proc/{p}/cmdline").read_bytes().replace(b"\0", b" ") for p in masters
                if Path(f"/proc/{p}/cmdline").exists()]
    assert sum(b"ControlMaster=yes" in c for c in cmdlines) == len(cluster.guests)


@pytest.mark.vm
@needs_qemu
@pytest.mark.parametrize("mpi,exe", [("openmpi", "NPopenmpi"), ("mpich", "NPmpich2")])
def test_netpipe_across_guests(cluster, mpi, exe):
    """A NetPIPE sweep across the two guests, under each MPI.  MPICH 4.0's
    NetPIPE over UCX's TCP transport sometimes hangs in MPI_Finalize after a
    complete sweep (one rank spinning, the other in the launcher's barrier; under
    TCG on a 2-core host about 1 run in 12).  The study runs such an experiment
    again after killing what the hung run left (``retries_after_timeout``); this
    test does the same, and only for that hang: a run killed before its sweep
    was complete fails the test, and so do three hangs in a row."""
    argv = [exe, "-l", "1", "-u", "8192", "-p", "0", "-o", "/root/np.out"]
    for attempt in range(3):
        cluster.run(0, "rm -f /root/np.out", timeout=30)
        try:
            _run_mpi(cluster, mpi, argv, timeout=120)
            break
        except TestbedError as exc:
            rows = [r.split() for r in cluster.run(0, "cat /root/np.out 2>/dev/null || true",
                                                   timeout=30).stdout.splitlines()]
            if not (rows and float(rows[-1][0]) == 8192) or attempt == 2:
                raise AssertionError(f"attempt {attempt + 1}: {exc}; the sweep's last rows: {rows[-2:]}") from exc
            cluster.kill_strays(STRAYS + (exe,))
    rows = [r.split() for r in cluster.run(0, "cat /root/np.out", timeout=30).stdout.splitlines()]
    assert rows and float(rows[-1][0]) == 8192 and float(rows[0][2]) > 0
    hosts = _run_mpi(cluster, mpi, ["hostname"], timeout=120).stdout.split()
    assert sorted(hosts) == ["g0", "g1"]


@pytest.mark.vm
@needs_qemu
def test_qperf_between_guests(cluster):
    cluster.run(1, "nohup qperf --listen_port 19769 >/dev/null 2>&1 &", timeout=30)
    time.sleep(1)
    out = cluster.run(0, "qperf -lp 19769 -t 1 -m 8 g1 tcp_lat", timeout=120).stdout
    assert "latency" in out
    cluster.run(1, "pkill -x qperf || true", timeout=30)


@pytest.mark.vm
@needs_qemu
def test_a_killed_command_leaves_its_process_in_the_guest_until_kill_strays(cluster):
    """Killing the ssh client (a run killed at its time limit) does not end the command in the
    guest; before a retry, kill_strays removes such processes by name in every guest."""
    argv = cluster.argv(1, "exec sleep 917")      # a stand-in for a benchmark hung in MPI_Finalize
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while cluster.run(1, "pgrep -x sleep || true", timeout=30).stdout.strip() == "":
        assert time.monotonic() < deadline and p.poll() is None
        time.sleep(0.5)
    p.kill()
    p.wait()
    time.sleep(1)
    assert cluster.run(1, "pgrep -f 'slee[p] 917' || true", timeout=30).stdout.strip()      # still there
    cluster.kill_strays(("mpirun", "sleep"))
    assert cluster.run(1, "pgrep -f 'slee[p] 917' || true", timeout=30).stdout.strip() == ""
    with pytest.raises(ValueError, match="not process names"):
        cluster.kill_strays(("x; reboot",))


@pytest.mark.vm
@needs_qemu
def test_nic_interrupts_go_to_vcpu0_and_ranks_bind_to_one_vcpu_each(cluster):
    """Guests of two vCPUs: the NIC's queue interrupts are delivered to vCPU 0 from boot on, and with the
    testbed's launcher (vm.bind_ranks) each rank runs on one vCPU, a guest's first rank on vCPU 0."""
    c = cluster
    assert c.info["nic_irqs_on_cpu0"] == {"g0": 2, "g1": 2}
    for i in range(2):
        lists = c.run(i, "for i in $(awk -F: '/virtio[0-9]+-(input|output)\\./ { print $1 }' "
                         "/proc/interrupts); do cat /proc/irq/$i/smp_affinity_list; done",
                      timeout=60).stdout.split()
        assert lists == ["0", "0"]
    argv = kind(VM, c).mpi_launcher("openmpi", ["g0", "g0", "g1", "g1"], "net")
    out = c.run(0, argv[-1] + " sh -c 'echo $(hostname) $OMPI_COMM_WORLD_LOCAL_RANK "
                              "$(grep Cpus_allowed_list /proc/self/status | cut -f2)'", timeout=120).stdout
    seen = sorted(tuple(line.split()) for line in out.splitlines() if line.startswith("g"))
    assert seen == [("g0", "0", "0"), ("g0", "1", "1"), ("g1", "0", "0"), ("g1", "1", "1")], out


@pytest.mark.vm
@needs_qemu
def test_guests_on_the_direct_path_macvtap(cluster):
    """network.path macvtap: no bridge in the namespace; each guest's NIC is a macvtap of one lower device,
    and MPI's bytes between the guests cross both macvtaps (their counters), the rate limit at each guest's
    egress (the fixture checks that nothing is left, the macvtaps' device nodes included)."""
    sys.path.insert(0, str(Path(__file__).parent))
    from test_link import _bytes        # (rx, tx) bytes of an interface in a namespace

    if _macvtap_missing():
        pytest.skip(f"this kernel has no macvtap: {_macvtap_missing()}")
    c = cluster
    n = names(c.tag)
    assert c.info["link"] == "macvtap, rate 10gbit"
    show = lambda *a: subprocess.run(["ip", "-n", c.ns, *a], capture_output=True, text=True,  # noqa: E731
                                     timeout=10, check=True).stdout
    assert show("link", "show", "type", "bridge").strip() == ""          # no software switch
    for tap in n["taps"]:
        assert "macvtap mode bridge" in show("-d", "link", "show", "dev", tap)
        qd = subprocess.run(["tc", "-n", c.ns, "qdisc", "show", "dev", tap], capture_output=True,
                            text=True, timeout=10).stdout
        assert "qdisc tbf" in qd and "rate 10Gbit" in qd, qd
    assert len(list(c.run_dir.glob("*.tapdev"))) == 2
    before = {t: _bytes(c.ns, t) for t in n["taps"]}
    _run_mpi(c, "openmpi", ["NPopenmpi", "-l", "1", "-u", str(2**20), "-p", "0", "-o", "/root/np.out"],
             timeout=300)
    rows = [r.split() for r in c.run(0, "cat /root/np.out", timeout=30).stdout.splitlines() if r.strip()]
    assert rows and int(float(rows[-1][0])) == 2**20
    sent = sum(int(float(r[0])) for r in rows)
    moved = {t: sum(_bytes(c.ns, t)) - sum(before[t]) for t in n["taps"]}
    assert all(m >= 2 * sent for m in moved.values()), (moved, sent)   # each way through each macvtap


@pytest.mark.vm
@needs_qemu
def test_killed_guest_fails_cleanly(cluster):
    """SIGKILL guest 1's qemu while NetPIPE runs: the job must stop with
    GuestDied naming g1 (not hang on TCP timeouts); the fixture's teardown
    then finds nothing left.  (Last of the fixture's tests: it ends a guest.)"""
    c = cluster
    pid1 = c.procs[1].pid
    err = {}

    def killer():
        time.sleep(8)
        err["killed"] = pid1
        os.kill(pid1, signal.SIGKILL)

    threading.Thread(target=killer, daemon=True).start()
    with pytest.raises(GuestDied) as ei:
        _run_mpi(c, "openmpi", ["NPopenmpi", "-l", "1", "-u", "4194304", "-p", "0", "-o", "/root/np.out"],
                 timeout=300)
    assert err.get("killed")
    msg = str(ei.value)
    assert "guest g1" in msg and "serial log" in msg and str(err["killed"]) in msg


@pytest.mark.vm
@needs_qemu
def test_boot_timeout_is_clear_and_clean(image):
    tag = _tag()
    try:
        with pytest.raises(BootTimeout, match=r"guest g0 .*did not answer ssh within 2 s"):
            with QemuCluster(tag, guests=1, image=image, boot_timeout_s=2):
                pass
        assert _leftovers(tag) == []
    finally:
        _forget(tag)


CHILD = textwrap.dedent("""
    import sys
    from hpcvirt.qemu import QemuCluster
    with QemuCluster(sys.argv[1], guests=2, image=sys.argv[2], boot_timeout_s=600) as c:
        pass
""")


@pytest.mark.vm
@needs_qemu
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_during_boot_tears_down(image, sig):
    tag = _tag()
    run_dir = names(tag)["run_dir"]
    p = subprocess.Popen([sys.executable, "-c", CHILD, tag, str(image)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while len(_qemu_pids(run_dir)) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert len(_qemu_pids(run_dir)) == 2, "guests never started"
        p.send_signal(sig)
        _, err = p.communicate(timeout=60)
        assert p.returncode != 0
        assert "TestbedInterrupted" in err
        assert _leftovers(tag) == []
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate(timeout=10)
        _forget(tag)


@pytest.mark.vm
@needs_qemu
def test_cleanup_after_sigkill(image):
    tag = _tag()
    run_dir = names(tag)["run_dir"]
    p = subprocess.Popen([sys.executable, "-c", CHILD, tag, str(image)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while len(_qemu_pids(run_dir)) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        p.kill()
        p.wait(timeout=30)
        assert _leftovers(tag), "a SIGKILLed run should leave its guests behind"
        removed = cleanup(tag)
        assert names(tag)["ns"] in removed
        assert _leftovers(tag) == []
        assert cleanup(tag) == []
    finally:
        if p.poll() is None:
            p.kill()
        _forget(tag)
