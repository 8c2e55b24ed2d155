"""Tests of ``workflow/scripts/local-slurm.sh start --nodes 2``: a real
two-node Slurm cluster on one machine, each node a network namespace on a
Linux bridge, and MPI jobs across the two nodes started by srun.

The cluster lives in a pytest temporary state directory; it installs the
/etc/slurm/slurm.conf symlink (for jobs of the Snakemake Slurm executor) only
when that path is free.  The names of the network
objects are fixed (one multi-node cluster per machine), so the tests are
skipped while another one is running.  The study through the Snakemake
Slurm profile on this cluster (both MPIs across the nodes, a cancelled
allocation, a node that dies, accounting) is tests/test_slurm_2n_workflow.py.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "workflow" / "scripts" / "local-slurm.sh"
ETC_CONF = Path("/etc/slurm/slurm.conf")
NODES = ["hvslurm-n1", "hvslurm-n2"]
BRIDGE = "hvslurmbr"
SUBNET = "198.18.4.0/24"
OMPI_ROOT = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
# Open MPI: TCP between the nodes only (ob1; UCX would take both namespaces for one host)
OMPI_NET = {"OMPI_MCA_pml": "ob1", "OMPI_MCA_btl": "self,tcp", "OMPI_MCA_btl_tcp_if_include": SUBNET}
# MPICH (ch4:ucx): UCX over TCP on the node's bridge interface only
MPICH_NET = {"UCX_TLS": "tcp,self", "UCX_NET_DEVICES": "eth0"}

_missing = [
    tool
    for tool in ("slurmctld", "slurmd", "munged", "sbatch", "srun", "sinfo", "ip", "nsenter", "unshare")
    if shutil.which(tool) is None
]

pytestmark = [
    pytest.mark.slurm,
    pytest.mark.skipif(
        bool(_missing),
        reason="missing: " + ", ".join(_missing) + " (Debian packages slurm-wlm munge iproute2 util-linux)",
    ),
    pytest.mark.skipif(
        hasattr(os, "geteuid") and os.geteuid() != 0,
        reason="the cluster's daemons and network namespaces need root",
    ),
    pytest.mark.skipif(
        Path(f"/sys/class/net/{BRIDGE}").exists(),
        reason=f"bridge {BRIDGE} exists: another multi-node local cluster is running",
    ),
]


def run(cmd, env, timeout=60, check=False, cwd=None):
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, cwd=cwd)
    if check and proc.returncode != 0:
        raise AssertionError(f"{cmd} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


def script_env(workdir: Path, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env.setdefault("HPCVIRT_SLURM_ETC_LINK", "0")
    env.update(HPCVIRT_WORKDIR=str(workdir),
               SLURM_CONF=str(workdir / "slurm" / "slurm.conf"), **extra)
    return env


def script(env, *args, timeout=120):
    return run(["bash", str(SCRIPT), *args], env, timeout=timeout)


def counters() -> dict[str, tuple[int, int]]:
    """(rx_bytes, tx_bytes) of each node's eth0, read from its namespace."""
    out = {}
    for ns in NODES:
        text = run(["ip", "-n", ns, "-j", "-s", "link", "show", "eth0"], None, check=True).stdout
        stats = json.loads(text)[0]["stats64"]
        out[ns] = (stats["rx"]["bytes"], stats["tx"]["bytes"])
    return out


def leftovers(workdir: Path) -> list[str]:
    """Everything of a cluster that must be gone after stop."""
    state = str(workdir / "slurm")
    found = []
    for p in Path("/proc").glob("[0-9]*"):
        try:
            comm = (p / "comm").read_text().strip()
            cmdline = (p / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if comm in ("slurmctld", "slurmd", "munged", "mariadbd") and state in cmdline:
            found.append(f"process {p.name} {cmdline}")
        elif comm == "slurmdbd":       # started without arguments: its environment names the cluster
            try:
                environ = (p / "environ").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if state in environ:
                found.append(f"process {p.name} {cmdline}")
        elif comm == "slurmstepd":
            try:
                fds = [os.readlink(f) for f in (p / "fd").iterdir()]
            except OSError:
                continue
            if any(f.startswith(state) for f in fds):
                found.append(f"process {p.name} {cmdline}")
    netns = run(["ip", "netns", "list"], None, check=True).stdout
    found += [f"netns {line.split()[0]}" for line in netns.splitlines() if line.startswith("hvslurm-")]
    links = run(["ip", "-o", "link", "show"], None, check=True).stdout
    found += [f"link {m}" for m in re.findall(r"^\d+: (hvslurm[^:@ ]*)", links, re.M)]
    return found


def netpipe_bytes(text: str) -> int:
    """Bytes one rank sent in the NetPIPE sweep: sum of size x repeats."""
    rows = re.findall(r"^0:\s+\d+:\s+(\d+) bytes\s+(\d+) times", text, re.M)
    assert rows, text
    return sum(int(size) * int(times) for size, times in rows)


def rank_hosts(text: str) -> dict[str, str]:
    return dict(re.findall(r"^\d+: rank (\d+) on (\S+)$", text, re.M))


# ---------------------------------------------------------------- no cluster
@pytest.mark.parametrize(
    "args, needle",
    [
        (["--nodes", "9"], "--nodes must be 1..4"),
        (["--nodes", "two"], "--nodes must be a positive integer"),
        (["--nodes"], "--nodes needs a value"),
        (["--nodes", "2", "--cpus-per-node", "64"], "more than this machine's"),
        (["--nodes", "1", "--cpus-per-node", "1"], "--cpus-per-node is for --nodes 2..4"),
        (["--nodes", "2", "--colour", "blue"], "unknown argument to start: '--colour'"),
        (["--accounting"], "--accounting is for --nodes 2..4"),
    ],
)
def test_bad_start_arguments_are_refused(tmp_path, args, needle):
    env = script_env(tmp_path)
    out = script(env, "start", *args, timeout=30)
    assert out.returncode != 0
    assert needle in out.stderr, out.stderr
    assert leftovers(tmp_path) == []


def test_exec_needs_the_multi_node_cluster(tmp_path):
    out = script(script_env(tmp_path), "exec", "true", timeout=30)
    assert out.returncode != 0
    assert "exec is for the multi-node cluster" in out.stderr, out.stderr


def test_failed_slurmd_is_named_and_nothing_is_left(tmp_path):
    """Node 2's slurmd cannot write its pid file (a directory is in the way),
    so the script could not stop it: start must fail, name that node, and
    remove everything it started (including the slurmd without a pid file)."""
    env = script_env(tmp_path, HPCVIRT_SLURM_START_TIMEOUT="10")
    pid_path = tmp_path / "slurm" / "run" / f"slurmd-{NODES[1]}.pid"
    pid_path.mkdir(parents=True)
    try:
        out = script(env, "start", "--nodes", "2")
        assert out.returncode != 0
        assert f"slurmd of node {NODES[1]} did not come up" in out.stderr, out.stderr
        assert "Unable to open pidfile" in out.stderr, out.stderr
        assert leftovers(tmp_path) == []
    finally:
        pid_path.rmdir()
        script(env, "stop")
    assert leftovers(tmp_path) == []


# ---------------------------------------------------------------- a cluster
@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("hpcvirt2n")
    etc_link = not (ETC_CONF.exists() or ETC_CONF.is_symlink())
    env = script_env(workdir, HPCVIRT_SLURM_ETC_LINK="1" if etc_link else "0")
    hostname = socket.gethostname()
    try:
        start = script(env, "start", "--nodes", "2")
        assert start.returncode == 0, f"start failed:\n{start.stderr}"
        yield workdir, env
    finally:
        stop = script(env, "stop")
        assert stop.returncode == 0, stop.stderr
        assert leftovers(workdir) == []
        assert socket.gethostname() == hostname


def test_start_is_idempotent(cluster):
    _, env = cluster
    pids = lambda text: re.findall(r"running \(pid (\d+)", text)  # noqa: E731
    before = script(env, "status", timeout=30)
    assert before.returncode == 0, before.stdout + before.stderr
    again = script(env, "start", "--nodes", "2", timeout=60)
    assert again.returncode == 0 and "already running (2 nodes" in again.stderr, again.stderr
    after = script(env, "status", timeout=30)
    assert len(pids(before.stdout)) == 4            # munged, slurmctld, 2 x slurmd
    assert pids(after.stdout) == pids(before.stdout)
    other = script(env, "start", timeout=30)          # one node, while two run
    assert other.returncode != 0 and "a cluster with 2 nodes is running" in other.stderr


def test_nodes_idle_each_in_its_namespace(cluster):
    workdir, env = cluster
    out = run(["sinfo", "-h", "-N", "-o", "%N %t %c"], env, check=True).stdout.split("\n")
    assert sorted(filter(None, out)) == [f"{n} idle 1" for n in NODES]
    own_netns = os.readlink("/proc/self/ns/net")
    for node in NODES:
        pid = (workdir / "slurm" / "run" / f"slurmd-{node}.pid").read_text().strip()
        assert os.stat(f"/proc/{pid}/ns/net").st_ino == os.stat(f"/run/netns/{node}").st_ino
        assert os.readlink(f"/proc/{pid}/ns/net") != own_netns
    ctld = (workdir / "slurm" / "run" / "slurmctld.pid").read_text().strip()
    assert os.readlink(f"/proc/{ctld}/ns/net") == own_netns


def test_daemons_listen_on_the_bridge_only(cluster):
    workdir, env = cluster
    if shutil.which("ss") is None:
        pytest.skip("ss (iproute2) not installed")
    run_dir = workdir / "slurm" / "run"
    where = {"slurmctld.pid": [], **{f"slurmd-{n}.pid": ["nsenter", f"--net=/run/netns/{n}"] for n in NODES}}
    for pidfile, prefix in where.items():
        pid = (run_dir / pidfile).read_text().strip()
        out = run([*prefix, "ss", "-Hltnup"], env, check=True).stdout
        lines = [ln for ln in out.splitlines() if f"pid={pid}," in ln]
        assert lines, f"{pidfile}: pid {pid} listens nowhere?\n{out}"
        for ln in lines:
            assert ln.split()[4].startswith("198.18.4."), f"{pidfile}: {ln}"


def test_each_rank_runs_on_its_own_node(cluster):
    _, env = cluster
    out = script(env, "exec", "srun", "-N", "2", "-n", "2", "-l", "-t", "1",
                 "bash", "-c", 'echo "rank $SLURM_PROCID on $(hostname)"', timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    assert rank_hosts(out.stdout) == {"0": NODES[0], "1": NODES[1]}


def test_batch_job_runs_srun_on_the_nodes(cluster, tmp_path):
    _, env = cluster
    out_file = tmp_path / "job.out"
    sub = run(["sbatch", "--parsable", "--wait", "-N", "2", "-n", "2", "-t", "1", "-o", str(out_file),
               "--wrap", 'srun -l bash -c "echo rank \\$SLURM_PROCID on \\$(hostname)"'], env, timeout=90)
    assert sub.returncode == 0, sub.stderr + (out_file.read_text() if out_file.exists() else "")
    assert rank_hosts(out_file.read_text()) == {"0": NODES[0], "1": NODES[1]}


@pytest.mark.parametrize(
    "mpi, binary, extra",
    [("pmix", "NPopenmpi", {**OMPI_ROOT, **OMPI_NET}), ("pmi2", "NPmpich2", MPICH_NET)],
    ids=["openmpi-pmix", "mpich-pmi2"],
)
def test_mpi_pingpong_crosses_the_bridge(cluster, mpi, binary, extra):
    _, env = cluster
    if shutil.which(binary) is None:
        pytest.skip(f"{binary} missing (Debian netpipe-openmpi / netpipe-mpich2)")
    before = counters()
    t0 = time.monotonic()

    def pingpong():
        return script(
            env, "exec", "env", *(f"{k}={v}" for k, v in extra.items()),
            "srun", f"--mpi={mpi}", "-N", "2", "-n", "2", "-l", "-t", "2", "bash", "-c",
            f'echo "rank $SLURM_PROCID on $(hostname)"; exec {binary} -u 1048576 -n 20 -p 0 -o /dev/null',
            timeout=30,     # about 1.5 s, beside work at a low priority too
        )

    # MPICH's NetPIPE hangs now and then in MPI_Finalize after a complete sweep (2 runs of 12 beside two
    # busy processes at nice 17; the study runs it once more then too: config/config.yaml, pingpong): only
    # that hang, with the whole sweep done, is tried again, at most twice
    for attempt in range(3):
        try:
            out = pingpong()
            break
        except subprocess.TimeoutExpired as exc:
            text = "".join(x.decode() if isinstance(x, bytes) else (x or "") for x in (exc.stdout, exc.stderr))
            complete = re.search(r"^0:\s+\d+:\s+1048576 bytes\s+20 times", text, re.M)
            if binary != "NPmpich2" or not complete or attempt == 2:
                raise
            print(f"{binary}: the sweep completed but the run hung in MPI_Finalize; once more")
            run(["scancel", "--full", "--user", "root"], env, check=True)
            deadline = time.monotonic() + 60
            while run(["squeue", "-h"], env).stdout.strip():
                assert time.monotonic() < deadline, "the hung job did not end after scancel"
                time.sleep(1)
    seconds = time.monotonic() - t0
    after = counters()
    text = out.stdout + out.stderr
    assert out.returncode == 0, text
    assert rank_hosts(out.stdout) == {"0": NODES[0], "1": NODES[1]}, text
    assert re.search(r"^0:\s+\d+:\s+1048576 bytes\s+20 times", text, re.M), text
    sent = netpipe_bytes(text)     # each rank sends this much (ping-pong; NetPIPE reports on stderr)
    grown = {n: (after[n][0] - before[n][0], after[n][1] - before[n][1]) for n in NODES}
    print(f"{binary}: {seconds:.1f} s, each rank sent >= {sent} B; eth0 (rx, tx) grew by {grown}")
    for node, (rx, tx) in grown.items():
        assert rx >= sent and tx >= sent, f"{node} eth0 grew by rx {rx}, tx {tx} < {sent}"


def test_node_failure_mid_job_fails_the_job_and_stop_cleans_up(cluster, tmp_path):
    """Runs last: it leaves node 2 without slurmd.  SIGKILL node 2's slurmd
    while a 2-node job runs: the job ends in NODE_FAIL with a message naming
    the node, and stop removes everything (the orphaned slurmstepd too)."""
    workdir, env = cluster
    out_file = tmp_path / "job.out"
    jobid = run(["sbatch", "--parsable", "-N", "2", "-n", "2", "-t", "3", "-o", str(out_file),
                 "--wrap", 'srun -l bash -c "echo rank \\$SLURM_PROCID on \\$(hostname); sleep 300"'],
                env, check=True).stdout.strip()
    deadline = time.monotonic() + 30
    while len(rank_hosts(out_file.read_text() if out_file.exists() else "")) < 2:
        assert time.monotonic() < deadline, "job did not start on both nodes"
        time.sleep(0.2)
    pid = int((workdir / "slurm" / "run" / f"slurmd-{NODES[1]}.pid").read_text())
    os.kill(pid, signal.SIGKILL)
    t0 = time.monotonic()
    state = ""
    while time.monotonic() - t0 < 90:
        state = run(["squeue", "-h", "-t", "all", "-j", jobid, "-o", "%T"], env).stdout.strip()
        if state not in ("RUNNING", "COMPLETING", "PENDING"):
            break
        time.sleep(0.5)
    print(f"job {jobid}: {state} {time.monotonic() - t0:.1f} s after slurmd of {NODES[1]} was killed")
    assert state == "NODE_FAIL", state
    assert f"Node failure on {NODES[1]}" in out_file.read_text(), out_file.read_text()
    nodes = run(["sinfo", "-h", "-N", "-o", "%N %t"], env, check=True).stdout
    assert re.search(rf"^{NODES[1]} down", nodes, re.M), nodes
    stop = script(env, "stop")
    assert stop.returncode == 0, stop.stderr
    assert leftovers(workdir) == []
