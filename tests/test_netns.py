"""netns-bridge testbed and process placement.

Unit tests of the pure functions run everywhere; the ``vm``-marked tests
build real namespaces and need root and iproute2 (and Open MPI / MPICH /
NetPIPE / qperf for the benchmark ones)."""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from fractions import Fraction
from pathlib import Path

import pytest

from hpcvirt import netns
from hpcvirt.config import load_testbed
from hpcvirt.netns import (NetnsBridge, Testbed, TestbedInterrupted, cleanup, host_addresses, list_netns, names,
                           validate_tag)
from hpcvirt.placement import chain_crossing, chain_messages, placement_label, plane_hosts, run_length
from hpcvirt.testbeds import kind

ROOT = Path(__file__).resolve().parents[1]
# The MPI launchers and flags of the netns-bridge kind come from its testbed file.
BRIDGE = load_testbed(ROOT / "config/testbeds/bridge.yaml")


def launcher(bed, mpi: str, rank_hosts=None, path: str | None = "net") -> list[str]:
    """argv prefix running one rank per entry of ``rank_hosts`` (default: one per host)."""
    return kind(BRIDGE, bed).mpi_launcher(mpi, rank_hosts or bed.hosts, path)

H = ["a", "b"]


# ------------------------------------------------------------- placement
def test_plane_placements():
    assert plane_hosts(H, 4, 4) == ["a", "a", "a", "a"]
    assert plane_hosts(H, 4, 9) == ["a", "a", "a", "a"]
    assert plane_hosts(H, 4, 2) == ["a", "a", "b", "b"]
    assert plane_hosts(H, 4, 1) == ["a", "b", "a", "b"]
    assert plane_hosts(H, 8, 2) == ["a", "a", "b", "b", "a", "a", "b", "b"]
    assert plane_hosts(["a", "b", "c"], 6, 2) == ["a", "a", "b", "b", "c", "c"]
    assert plane_hosts(["a"], 3, 1) == ["a", "a", "a"]
    assert [placement_label(4, b) for b in (4, 8, 2, 1)] == ["intra-node", "intra-node", "mixed", "inter-node"]


@pytest.mark.parametrize("args", [
    ([], 2, 1),
    (["a", "a"], 2, 1),
    (H, 0, 1),
    (H, 2, 0),
    (H, 2, True),
])
def test_plane_rejects(args):
    with pytest.raises(ValueError):
        plane_hosts(*args)


@pytest.mark.parametrize("ranks,block,share", [
    (4, 4, Fraction(0)),
    (4, 2, Fraction(1, 3)),
    (4, 1, Fraction(1)),
    # Nanos et al.: 16 ranks on two hosts -> 6 %, 46 %, 100 % over the network
    (16, 8, Fraction(1, 15)),
    (16, 2, Fraction(7, 15)),
    (16, 1, Fraction(1)),
    (1, 1, Fraction(0)),
])
def test_chain_crossing(ranks, block, share):
    hosts = plane_hosts(H, ranks, block)
    assert chain_crossing(hosts) == share
    sent, crossing = chain_messages(hosts, 10)
    assert sent == 2 * (ranks - 1) * 10
    assert Fraction(crossing, sent) == share if sent else crossing == 0


def test_run_length_and_host_placeholders(monkeypatch):
    assert run_length(["a", "a", "b", "a"]) == [("a", 2), ("b", 1), ("a", 1)]
    bed = Testbed(kind="netns-bridge", tag="x", hosts=["a", "b"], addresses=["198.18.0.1", "198.18.0.2"],
                  subnet="198.18.0.0/24", mtu=1500)
    s = " ".join(launcher(bed, "mpich", ["a", "b", "b", "a"]))
    assert "-hosts a:1,b:2,a:1 -n 4" in s
    s = " ".join(launcher(bed, "openmpi", ["a", "b"]))
    assert "-np 2 --host a,b --mca rmaps seq" in s


# ------------------------------------------------------------- names
@pytest.mark.parametrize("tag", ["a", "abc123", "zzzzzzzz"])
def test_valid_tags(tag):
    assert validate_tag(tag) == tag


@pytest.mark.parametrize("tag", ["", "ABC", "toolong12", "a-b", "a b", "ä", None, "../x"])
def test_invalid_tags(tag):
    with pytest.raises(ValueError):
        validate_tag(tag)


def test_names_fit_ifnamsiz():
    n = names("zzzzzzzz", 99)
    assert n["switch_ns"] == "hv-zzzzzzzz-sw"
    assert n["host_ns"][1] == "hv-zzzzzzzz-h1"
    for ifname in [n["bridge"], *n["switch_ports"], n["host_iface"]]:
        assert len(ifname) <= 15
    with pytest.raises(ValueError):
        names("a", 0)
    with pytest.raises(ValueError):
        names("a", 100)


def test_host_addresses():
    net, addrs = host_addresses("198.18.0.0/24", 2)
    assert addrs == ["198.18.0.1", "198.18.0.2"]
    assert host_addresses("198.19.255.0/29", 3)[1][-1] == "198.19.255.3"
    for bad in ("10.0.0.0/24", "198.20.0.0/24", "198.18.0.0/14", "192.168.1.0/24"):
        with pytest.raises(ValueError):
            host_addresses(bad, 2)
    with pytest.raises(ValueError):
        host_addresses("198.18.0.0/30", 2)      # 2 usable, need hosts + 1


FAKE = Testbed(kind="netns-bridge", tag="x", hosts=["hv-x-h0", "hv-x-h1"], addresses=["198.18.0.1", "198.18.0.2"],
               subnet="198.18.0.0/24", mtu=1500)


def test_launcher_openmpi_from_testbed_file(monkeypatch):
    monkeypatch.setenv("HPCVIRT_NETNS_RSH", "/ag")
    a = launcher(FAKE, "openmpi")
    assert a[:4] == ["ip", "netns", "exec", "hv-x-h0"]
    assert "mpirun" in a and "OMPI_ALLOW_RUN_AS_ROOT=1" in a
    s = " ".join(a)
    assert "--bind-to none" in s and "--mca plm_rsh_agent /ag" in s
    assert "--host hv-x-h0,hv-x-h1" in s and "--mca btl self,tcp" in s
    assert "--mca btl_tcp_if_include 198.18.0.0/24" in s
    assert "rank0-stdout" not in s            # every rank's output is kept
    # no path: the MPI picks its transports (shared memory inside a host)
    assert "btl self,tcp" not in " ".join(launcher(FAKE, "openmpi", ["hv-x-h0"], path=None))


def test_launcher_mpich_from_testbed_file(monkeypatch):
    monkeypatch.setenv("HPCVIRT_NETNS_RSH", "/ag")
    a = launcher(FAKE, "mpich", ["hv-x-h0", "hv-x-h0", "hv-x-h1"])
    s = " ".join(a)
    assert a[:4] == ["ip", "netns", "exec", "hv-x-h0"]
    assert "-launcher ssh -launcher-exec /ag" in s and "-iface eth0" in s
    assert "-hosts hv-x-h0:2,hv-x-h1:1 -n 3" in s and "UCX_TLS=tcp,self" in s
    with pytest.raises(KeyError):
        launcher(FAKE, "mpich", path="ib")


def test_agent_is_executable_and_refuses_foreign_hosts():
    agent = netns.agent_path()
    assert agent.is_file() and os.access(agent, os.X_OK)
    for host in ("localhost", "198.18.0.1", "hv-nosuch-h0"):
        cp = subprocess.run([str(agent), "-x", host, "true"], capture_output=True,
                            text=True, timeout=10)
        assert cp.returncode == 255, (host, cp)
        assert "netns-rsh" in cp.stderr


def test_signals_raise_restores_handlers():
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(TestbedInterrupted) as ei:
        with netns.signals_raise():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(1)
    assert ei.value.signum == signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) is before


# ------------------------------------------------------------- real namespaces
def _why_no_netns() -> str | None:
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "iproute2 (ip) not installed"
    cp = subprocess.run(["ip", "netns", "add", "hv-probe-x"], capture_output=True, timeout=10)
    subprocess.run(["ip", "netns", "delete", "hv-probe-x"], capture_output=True, timeout=10)
    if cp.returncode != 0:
        return f"cannot create network namespaces: {cp.stderr.decode().strip()}"
    return None


_NO_NETNS = _why_no_netns()
needs_netns = pytest.mark.skipif(_NO_NETNS is not None, reason=_NO_NETNS or "")


def _needs(*tools):
    missing = [t for t in tools if shutil.which(t) is None]
    return pytest.mark.skipif(bool(missing), reason=f"not installed: {missing}")


def _tag() -> str:
    return "t" + secrets.token_hex(3)


def _leftovers(tag: str) -> list[str]:
    left = [n for n in list_netns() if n.startswith(f"hv-{tag}-")]
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, timeout=10).stdout
    left += [w for w in links.split() if w.startswith(f"hv{tag}")]
    return left


@pytest.fixture
def tag():
    t = _tag()
    yield t
    cleanup(t)


@pytest.mark.vm
@needs_netns
def test_create_and_teardown(tag):
    with NetnsBridge(tag, hosts=3, subnet="198.18.7.0/24", mtu=9000) as tb:
        assert set(list_netns()) >= {f"hv-{tag}-sw", f"hv-{tag}-h0", f"hv-{tag}-h1",
                                     f"hv-{tag}-h2"}
        assert tb.addresses == ["198.18.7.1", "198.18.7.2", "198.18.7.3"]
        out = subprocess.run(tb.exec_prefix(1) + ["ip", "-o", "addr", "show", "eth0"],
                             capture_output=True, text=True, timeout=10).stdout
        assert "198.18.7.2/24" in out
        mtu = subprocess.run(["ip", "-n", tb.switch_ns, "-o", "link", "show", tb.bridge],
                             capture_output=True, text=True, timeout=10).stdout
        assert "mtu 9000" in mtu
        # nothing in the caller's namespace
        root_links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True,
                                    timeout=10).stdout
        assert f"hv{tag}" not in root_links
        # the hosts reach each other over the bridge (bash /dev/tcp, no ping needed)
        srv = subprocess.Popen(tb.exec_prefix(2) + ["NPtcp"]) if shutil.which("NPtcp") else None
        if srv:
            try:
                time.sleep(0.5)
                cp = subprocess.run(tb.exec_prefix(0) + ["NPtcp", "-h", tb.addresses[2],
                                    "-u", "1024", "-o", "/dev/null"],
                                    capture_output=True, text=True, timeout=60)
                assert cp.returncode == 0, cp.stderr
            finally:
                srv.kill()
                srv.wait(timeout=10)
    assert _leftovers(tag) == []


@pytest.mark.vm
@needs_netns
def test_teardown_on_exception(tag):
    with pytest.raises(ZeroDivisionError):
        with NetnsBridge(tag):
            assert _leftovers(tag)
            1 / 0
    assert _leftovers(tag) == []


CHILD = textwrap.dedent("""
    import sys, time, subprocess
    from hpcvirt.netns import NetnsBridge
    with NetnsBridge(sys.argv[1]) as tb:
        p = subprocess.Popen(tb.exec_prefix(1) + ["sleep", "300"])
        print("up", p.pid, flush=True)
        time.sleep(300)
""")


@pytest.mark.vm
@needs_netns
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL])
def test_teardown_on_signal(tag, sig):
    p = subprocess.Popen([sys.executable, "-c", CHILD, tag], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        word, sleeper = p.stdout.readline().split()
        assert word == "up"
        assert len(_leftovers(tag)) >= 3
        p.send_signal(sig)
        rc = p.wait(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
    assert rc != 0
    if sig == signal.SIGKILL:
        # no handler can run: leftovers remain until cleanup(tag)
        assert _leftovers(tag)
        removed = cleanup(tag)
        assert f"hv-{tag}-sw" in removed
        assert cleanup(tag) == []           # idempotent
    else:
        assert "Traceback" in p.stderr.read() or rc < 0
    assert _leftovers(tag) == []
    # the process started inside the namespace is gone too (or a zombie
    # waiting for its dead parent to be reaped)
    stat = Path(f"/proc/{sleeper}/stat")
    assert not stat.exists() or stat.read_text().rsplit(")", 1)[1].split()[0] == "Z"


def _np_output_ok(path: Path, max_bytes: int) -> list[list[float]]:
    rows = [list(map(float, line.split())) for line in path.read_text().splitlines() if line.strip()]
    assert rows and rows[-1][0] == max_bytes
    return rows


@pytest.mark.vm
@needs_netns
@_needs("mpirun", "NPopenmpi")
def test_netpipe_openmpi_across_bridge(tag, tmp_path):
    with NetnsBridge(tag) as tb:
        out = tmp_path / "np.out"
        cp = subprocess.run(launcher(tb, "openmpi") + [
            "NPopenmpi", "-l", "1", "-u", "4096", "-p", "0", "-o", str(out)],
            capture_output=True, text=True, timeout=240)
        assert cp.returncode == 0, cp.stderr[-2000:]
        rows = _np_output_ok(out, 4096)
        assert rows[0][2] > 0
        # the ranks really ran in two different namespaces
        cp = subprocess.run(launcher(tb, "openmpi") + ["hostname"],
                            capture_output=True, text=True, timeout=60)
        assert sorted(cp.stdout.split()) == tb.hosts
    assert _leftovers(tag) == []


@pytest.mark.vm
@needs_netns
@_needs("mpiexec.mpich", "NPmpich2")
def test_netpipe_mpich_across_bridge(tag, tmp_path):
    with NetnsBridge(tag) as tb:
        out = tmp_path / "np.out"
        cp = subprocess.run(launcher(tb, "mpich") + [
            "NPmpich2", "-l", "1", "-u", "4096", "-p", "0", "-o", str(out)],
            capture_output=True, text=True, timeout=240)
        assert cp.returncode == 0, cp.stderr[-2000:]
        _np_output_ok(out, 4096)
        cp = subprocess.run(launcher(tb, "mpich", plane_hosts(tb.hosts, 4, 2))
                            + ["hostname"], capture_output=True, text=True, timeout=60)
        assert sorted(cp.stdout.split()) == sorted(tb.hosts * 2)
    assert _leftovers(tag) == []


@pytest.mark.vm
@needs_netns
@_needs("qperf")
def test_qperf_across_bridge(tag):
    with NetnsBridge(tag) as tb:
        srv = subprocess.Popen(tb.exec_prefix(1) + ["qperf", "--listen_port", "19766"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            time.sleep(0.5)
            cp = subprocess.run(tb.exec_prefix(0) + [
                "qperf", "-lp", "19766", "-t", "1", "-m", "8", tb.addresses[1], "tcp_lat"],
                capture_output=True, text=True, timeout=60)
            assert cp.returncode == 0, cp.stderr
            assert "latency" in cp.stdout
        finally:
            srv.kill()
            srv.wait(timeout=10)
    assert _leftovers(tag) == []


@pytest.mark.vm
@needs_netns
@_needs("mpirun", "NPopenmpi")
def test_killed_rank_fails_cleanly(tag, tmp_path):
    """SIGKILL the rank in h1 during a NetPIPE sweep: mpirun must fail
    quickly (not hang), and nothing may be left after the testbed exits."""
    with NetnsBridge(tag) as tb:
        p = subprocess.Popen(launcher(tb, "openmpi") + [
            "NPopenmpi", "-l", "1", "-u", "67108864", "-p", "0", "-o", str(tmp_path / "o")],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            victim = None
            deadline = time.monotonic() + 60
            while victim is None and time.monotonic() < deadline:
                for pid in netns.netns_pids(tb.hosts[1]):
                    try:
                        if Path(f"/proc/{pid}/comm").read_text().strip() == "NPopenmpi":
                            victim = pid
                    except OSError:
                        pass
                time.sleep(0.2)
            assert victim, "rank in h1 never started"
            time.sleep(2)
            os.kill(victim, signal.SIGKILL)
            out, err = p.communicate(timeout=60)
        finally:
            if p.poll() is None:
                p.kill()
                p.communicate(timeout=10)
        assert p.returncode != 0
        assert "signal 9" in (out + err) or "Killed" in (out + err) or "exited" in (out + err)
    assert _leftovers(tag) == []


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("su") or not shutil.which("qperf"),
                    reason="needs root (to become another user), su and qperf")
def test_a_client_server_pair_runs_in_a_namespace_of_its_own_without_root():
    """A site's compute node gives no root: a native testbed's client and server (qperf, iperf3) then get
    their private network namespace inside a user namespace (unshare --user --map-root-user --net), run
    here for real as user nobody, with the system's Python (the venv may lie below root's home)."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="hpcvirt-nobody-") as tmp:   # pytest's own is root's only
        os.chmod(tmp, 0o777)
        _client_server_as_nobody(Path(tmp))


def test_a_node_that_refuses_user_namespaces_fails_the_run_with_what_to_do():
    """A site whose kernel refuses unprivileged user namespaces: the raw TCP run fails before it starts, and
    its note says why and what to do.  Made real here: a user namespace (A) caps its descendants at none
    (user.max_user_namespaces 0) after creating one (B) whose user is not root, as on a compute node."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="hpcvirt-userns-") as tmp:
        script = Path(tmp) / "run.py"
        script.write_text(textwrap.dedent(f"""
            import os, sys
            sys.path.insert(0, {str(ROOT / 'workflow/lib')!r})
            from hpcvirt.execute import execute
            from hpcvirt.testbeds import Launch
            assert os.geteuid() != 0
            launch = Launch(argv=["qperf", "-t", "1", "127.0.0.1", "tcp_lat"], server_argv=["qperf"],
                            server_port=19765, isolation="netns", ranks=2, nodes=1, ranks_per_node=2, mpi="none",
                            interconnect="tcp-loopback")
            status = execute(launch, sys.argv[1], timeout=30)
            print(status["exit_code"], status["note"])
        """))
        a, b = Path(tmp) / "a", Path(tmp) / "b"
        inner = f"echo up > {b}; read x < {a}; {sys.executable} {script} {tmp}/out.txt"
        outer = (f"mkfifo {a} {b}; unshare --user --map-user=65534 --map-group=65534 sh -c '{inner}' & "
                 f"read y < {b}; echo 0 > /proc/sys/user/max_user_namespaces; echo go > {a}; wait")
        res = subprocess.run(["unshare", "--user", "--map-root-user", "sh", "-c", outer], capture_output=True,
                             text=True, timeout=60)
    assert res.stdout.startswith("None unshare: unshare failed: "), (res.stdout, res.stderr)
    assert "this node's kernel refuses one (sysctl user.max_user_namespaces must be above 0" in res.stdout
    assert "experiments.<tcp|streams>.skip_testbeds" in res.stdout


def _client_server_as_nobody(tmp_path: Path) -> None:
    script = tmp_path / "run.py"
    script.write_text(textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(ROOT / 'workflow/lib')!r})
        from hpcvirt.execute import execute, runner_argv
        from hpcvirt.testbeds import Launch
        print(runner_argv("s", "o", "st", "netns")[:4])
        launch = Launch(argv=["qperf", "-t", "1", "127.0.0.1", "tcp_lat"], server_argv=["qperf"], server_port=19765,
                        isolation="netns", ranks=2, nodes=1, ranks_per_node=2, mpi="none",
                        interconnect="tcp-loopback")
        print(execute(launch, sys.argv[1], timeout=30)["exit_code"])
    """))
    out = tmp_path / "out.txt"
    res = subprocess.run(["su", "nobody", "-s", "/bin/sh", "-c", f"/usr/bin/python3 {script} {out}"],
                         capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert res.stdout.splitlines() == ["['unshare', '--user', '--map-root-user', '--net']", "0"], res.stderr
    assert "latency" in out.read_text()
