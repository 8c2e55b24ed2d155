"""The tiny study through ``workflow/profiles/slurm`` on the two-node cluster
(testbed ``local-slurm-2n``: ``local-slurm.sh start --nodes 2 --cpus-per-node
2``), with job accounting (slurmdbd + MariaDB, ``--accounting``).

One cluster and one campaign serve the whole module, in this order (each
test is one step of the same campaign, as a user would meet them):

1. the study starts, and its allocation is cancelled (scancel) after the
   first measurement finished;
2. the same command again; node 2 dies (its slurmd, then everything on
   it, killed) while a measurement runs ranks on both nodes; the node is
   restarted with the script;
3. the same command again completes: only the measurements missing after
   each interruption ran, the finished raw outputs are the same files
   (inode, mtime, content);
4. what the study measured: ping-pong over shared memory, TCP loopback and
   across the nodes for Open MPI (srun --mpi=pmix) and MPICH (--mpi=pmi2),
   raw TCP, the TCP streams and the placement benchmark; the rows say on which
   node every rank ran, and the nodes' interface counters grew by at least
   what NetPIPE sent across them;
5. the executor's default status path (``sacct``) against the accounting
   database, which holds the cancelled, node-failed and completed allocations.

The module-scoped cluster is always stopped; nothing of it may be left
(processes, namespaces, bridge).  Every Snakemake run has a time limit.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path

import pandas as pd
import pytest
import yaml

import test_slurm_2n as t2n
import test_workflow as tw
from hpcvirt import matrix
from hpcvirt.config import load_study

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
SNAKEMAKE = str(BIN / "snakemake")
TESTBED = "local-slurm-2n"
GROUP = f"{TESTBED}.n2"
CAMPAIGN = "two-nodes-tiny"
NODES = t2n.NODES
# the README's command: the tiny study with the overlay for the two-node cluster (what it offers;
# the placement benchmark's 4 ranks in blocks of 2 and 1 per node)
OVERLAYS = ["config/tiny.yaml", "config/two-nodes.yaml"]
ARGS = [f"data/results/{CAMPAIGN}/{TESTBED}/tidy.csv", "--configfile", *OVERLAYS, "--config", f"campaign={CAMPAIGN}"]
PROFILE = ["--workflow-profile", "workflow/profiles/slurm"]
HAVE_ACCOUNTING = all(shutil.which(t) for t in ("slurmdbd", "sacctmgr", "sacct", "mariadbd", "mariadb-install-db",
                                                 "mariadb"))

pytestmark = [
    pytest.mark.slurm,
    pytest.mark.e2e,
    *t2n.pytestmark[1:],        # Slurm and the tools installed, root, no other multi-node cluster
    pytest.mark.skipif(t2n.ETC_CONF.exists() or t2n.ETC_CONF.is_symlink(),
                       reason=f"{t2n.ETC_CONF} is taken; jobs of the Snakemake Slurm executor only find that path"),
]


class State:
    """The module's cluster, working copy and what each step left."""

    def __init__(self, workdir: Path, env: dict, work: Path):
        self.workdir, self.env, self.work = workdir, env, work
        self.smk_env = dict(env, PATH=f"{BIN}:{env['PATH']}")
        self.raws: list[Path] = []
        self.finished: dict[Path, tuple] = {}        # raw output -> (inode, mtime, sha256) after its run ended
        self.steps: dict[str, float] = {}            # step -> seconds
        self.counters_before: dict | None = None
        self.interrupted: list[str] = []             # steps that interrupted the study as meant
        self.node_failed_state = "NODE_FAIL"         # how the allocation whose node died ended

    def identity(self, p: Path) -> tuple:
        st = p.stat()
        return st.st_ino, st.st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest()

    def done(self) -> dict[Path, tuple]:
        return {p: self.identity(p) for p in self.raws if p.exists()}

    def squeue(self, *args) -> str:
        return t2n.run(["squeue", "-h", *args], self.env, timeout=30).stdout

    def start(self, *extra) -> subprocess.Popen:
        return subprocess.Popen(["timeout", "-k", "15", "900", SNAKEMAKE, *PROFILE, *ARGS, *extra], cwd=self.work,
                                env=self.smk_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True)

    def wait_for(self, proc: subprocess.Popen, what, timeout: float = 600) -> None:
        deadline = time.monotonic() + timeout
        while not what():
            assert proc.poll() is None, f"snakemake ended early:\n{proc.stdout.read()[-4000:]}"
            assert time.monotonic() < deadline, "timed out waiting"
            time.sleep(0.3)

    def unchanged(self, log: str) -> None:
        """Every raw output seen finished before is the same file, and was not scheduled again."""
        for p, ident in self.finished.items():
            assert self.identity(p) == ident, f"{p} was measured again or touched"
            assert f"Missing output files: {p.relative_to(self.work)}" not in log, f"{p} was scheduled again"


def content(done: dict[Path, tuple]) -> dict[Path, tuple]:
    """(inode, sha256) of raw outputs: what a finished output keeps while its job is still ending."""
    return {p: (ino, sha) for p, (ino, _, sha) in done.items()}


def measure_count(log: str) -> int:
    m = re.search(r"^measure\s+(\d+)$", log, re.M)
    assert m, log[-4000:]
    return int(m.group(1))


def finish(proc: subprocess.Popen, timeout: float = 300) -> str:
    try:
        out, _ = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
    return out


@pytest.fixture(scope="module")
def st(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("hv2nwf")
    env = t2n.script_env(workdir, HPCVIRT_SLURM_ETC_LINK="1")
    start_args = ["start", "--nodes", "2", "--cpus-per-node", "2"] + (["--accounting"] if HAVE_ACCOUNTING else [])
    try:
        t0 = time.monotonic()
        start = t2n.script(env, *start_args, timeout=180)
        assert start.returncode == 0, f"start failed:\n{start.stderr}"
        work = tw.fresh_copy(tmp_path_factory.mktemp("hv2nwf-repo") / "repo")
        state = State(workdir, env, work)
        state.start_args = start_args
        state.steps["cluster start"] = time.monotonic() - t0
        with open(work / "config/config.yaml") as fh:
            cfg = yaml.safe_load(fh)
        for extra in OVERLAYS:
            _merge(cfg, yaml.safe_load((work / extra).read_text()))
        cfg.update(campaign=CAMPAIGN)
        study, _ = load_study(cfg, config_path=work / "config/config.yaml", testbed_dir=work / "config/testbeds")
        state.study = study
        state.raws = [work / p for p in matrix.all_raw_paths(study)]
        yield state
    finally:
        stop = t2n.script(env, "stop", timeout=180)
        assert stop.returncode == 0, stop.stderr
        assert t2n.leftovers(workdir) == []
        if "state" in locals():
            print("step durations:", {k: round(v, 1) for k, v in state.steps.items()})


def _merge(dst: dict, src: dict) -> None:
    for k, v in src.items():
        if isinstance(v, dict) and isinstance(dst.get(k), dict):
            _merge(dst[k], v)
        else:
            dst[k] = v


def test_the_study_on_two_nodes_is_what_the_testbed_offers(st):
    """Ping-pong 2 MPIs x 3 paths, qperf's 2 tests, 2 placements, the TCP streams: 11 measurements."""
    names = sorted(str(p.relative_to(st.work / "data/raw" / CAMPAIGN / TESTBED)) for p in st.raws)
    assert len(names) == 11, names
    assert sum(n.startswith("netpipe/") for n in names) == 6
    assert sum(n.startswith("advect/") for n in names) == 2


def test_a_cancelled_allocation_keeps_what_it_finished(st):
    st.counters_before = t2n.counters()
    t0 = time.monotonic()
    proc = st.start()
    try:
        st.wait_for(proc, lambda: len(st.done()) >= 1)
        jobs = st.squeue("-t", "R", "-o", "%i %j").split("\n")
        running = [line.split()[0] for line in jobs if line.strip()]
        assert len(running) == 1, jobs
        before = content(st.done())
        t2n.run(["scancel", running[0]], st.env, check=True)
        out = finish(proc)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    st.steps["run 1 (cancelled)"] = time.monotonic() - t0
    (st.work / "run1-cancelled.log").write_text(out)
    assert proc.returncode not in (0, 124, 137), out[-4000:]
    assert measure_count(out) == len(st.raws)
    assert f"Error in group {GROUP}" in out, out[-4000:]
    assert f".snakemake/slurm_logs/group_{GROUP}_measure/{running[0]}.log" in out, out[-4000:]
    assert re.search(rf"\*\*\* JOB {running[0]} ON \S+ CANCELLED AT ", out), out[-4000:]
    # (Snakemake itself touches an output when its job ends: mtimes are compared from here on)
    after = st.done()
    assert set(before) <= set(after) and 0 < len(after) < len(st.raws)
    assert {p: v for p, v in content(after).items() if p in before} == before
    st.finished = after
    st.interrupted.append("cancel")


def test_a_node_that_dies_mid_job_is_survived(st):
    """Same command: only the missing measurements are scheduled.  While a
    measurement runs ranks on both nodes, node 2 dies: its slurmd is
    killed, then everything else on it (the job step and its rank).  The
    allocation fails (the measurement fails at once; Slurm would declare
    NODE_FAIL within SlurmdTimeout); the script's start brings the node back."""
    assert st.finished, "needs the cancelled run before it"
    t0 = time.monotonic()
    proc = st.start()
    try:
        # a job step on both nodes: a measurement across them
        st.wait_for(proc, lambda: re.search(r"^\d+\.\d+ hvslurm-n\[1-2\]$", st.squeue("-s", "-o", "%i %N"), re.M))
        jobid = st.squeue("-t", "R", "-o", "%i").split()
        assert len(jobid) == 1, jobid
        before = content(st.done())
        pid = int((st.workdir / "slurm/run" / f"slurmd-{NODES[1]}.pid").read_text())
        os.kill(pid, signal.SIGKILL)
        for other in t2n.run(["ip", "netns", "pids", NODES[1]], None, check=True).stdout.split():
            try:
                os.kill(int(other), signal.SIGKILL)
            except ProcessLookupError:      # ended between the listing and now (e.g. with its slurmd)
                pass
        out = finish(proc, timeout=400)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    st.steps["run 2 (node killed)"] = time.monotonic() - t0
    (st.work / "run2-node-failed.log").write_text(out)
    assert proc.returncode not in (0, 124, 137), out[-4000:]
    assert measure_count(out) == len(st.raws) - len(st.finished)
    assert f"Error in group {GROUP}" in out, out[-4000:]
    # Slurm declared the node failure (its notice is in the allocation's log, which Snakemake shows),
    # or, had a measurement's launch on node 2 failed first, its output names the node
    state = st.squeue("-t", "all", "-j", jobid[0], "-o", "%T").strip()
    st.node_failed_state = state
    if state == "NODE_FAIL":
        assert re.search(rf"\*\*\* JOB {jobid[0]} ON \S+ CANCELLED AT \S+ DUE TO NODE FAILURE", out), out[-4000:]
    else:
        assert state == "FAILED" and NODES[1] in out, (state, out[-4000:])
    st.unchanged(out)
    after = st.done()
    assert set(before) <= set(after) and len(after) < len(st.raws)
    assert {p: v for p, v in content(after).items() if p in before} == before
    st.finished = after

    # the node comes back with the same command that started the cluster
    t0 = time.monotonic()
    again = t2n.script(st.env, *st.start_args, timeout=120)
    assert again.returncode == 0, again.stderr
    nodes = t2n.run(["sinfo", "-h", "-N", "-o", "%N %t"], st.env, check=True).stdout.split("\n")
    assert sorted(filter(None, nodes)) == [f"{n} idle" for n in NODES]
    # only the new slurmd runs on node 2
    slurmd2 = (st.workdir / "slurm/run" / f"slurmd-{NODES[1]}.pid").read_text().strip()
    deadline = time.monotonic() + 60
    while True:
        pids = t2n.run(["ip", "netns", "pids", NODES[1]], None, check=True).stdout.split()
        if pids == [slurmd2]:
            break
        assert time.monotonic() < deadline, f"left on {NODES[1]}: {pids} (slurmd {slurmd2})"
        time.sleep(0.5)
    st.steps["node restart"] = time.monotonic() - t0
    st.interrupted.append("node")


def test_the_rerun_completes_with_only_the_missing_measurements(st):
    t0 = time.monotonic()
    proc = st.start()
    out = finish(proc, timeout=900)
    st.steps["run 3 (completes)"] = time.monotonic() - t0
    (st.work / "run3.log").write_text(out)
    assert proc.returncode == 0, out[-6000:]
    assert measure_count(out) == len(st.raws) - len(st.finished)
    assert len(re.findall(r"submitted with SLURM jobid \d+", out)) == 2, out[-4000:]   # the allocation, parse
    st.unchanged(out)
    assert all(p.exists() for p in st.raws)
    raw_dir = st.work / "data/raw" / CAMPAIGN / TESTBED
    assert not list(raw_dir.rglob(".*.partial")) and not list(raw_dir.rglob(".*.ranks"))
    assert st.interrupted == ["cancel", "node"], "the earlier steps did not interrupt the study"


def _netpipe_bytes(raw: Path) -> int:
    rows = re.findall(r"^\s*\d+:\s+(\d+) bytes\s+(\d+) times", raw.read_text(), re.M)
    assert rows, raw
    return sum(int(size) * int(times) for size, times in rows)


def test_the_rows_say_where_every_rank_ran_and_the_traffic_crossed_the_bridge(st):
    res = st.work / "data/results" / CAMPAIGN / TESTBED
    tidy = pd.read_csv(res / "tidy.csv")
    assert pd.read_csv(res / "rejected.csv").empty
    counters_after = t2n.counters()
    assert set(tidy["benchmark"]) == {"netpipe", "qperf", "iperf3", "advect"}
    net = {"hvslurm-n1,hvslurm-n2"}
    one = {"hvslurm-n1,hvslurm-n1"}
    pp = tidy[tidy["benchmark"] == "netpipe"]
    hosts = pp.groupby(["mpi", "interconnect"])["rank_hosts"].agg(set).to_dict()
    assert hosts == {("openmpi", "tcp"): net, ("mpich", "tcp"): net,
                     ("openmpi", "shm"): one, ("mpich", "shm"): one,
                     ("openmpi", "tcp-loopback"): one, ("mpich", "tcp-loopback"): one}, hosts
    assert (pp.loc[pp["interconnect"] == "tcp", "nodes"] == 2).all()
    # srun's plane distribution: blocks of 2 and of 1 consecutive ranks per node
    adv = tidy[tidy["benchmark"] == "advect"]
    assert adv.groupby("placement")["rank_hosts"].agg(set).to_dict() == {
        "mixed": {"hvslurm-n1,hvslurm-n1,hvslurm-n2,hvslurm-n2"},
        "inter-node": {"hvslurm-n1,hvslurm-n2,hvslurm-n1,hvslurm-n2"}}
    share = adv[adv["metric"] == "network_share"].set_index("placement")["value"]
    assert share.to_dict() == pytest.approx({"mixed": 1 / 3, "inter-node": 1.0})
    assert adv["verified"].all()
    assert tidy.loc[tidy["mpi"] == "none", "rank_hosts"].isna().all()     # qperf, iperf3: no MPI ranks
    assert (tidy.loc[(tidy["unit"] != "Ry") & (tidy["metric"] != "retransmits"), "value"] > 0).all()
    assert (tidy.loc[tidy["metric"] == "retransmits", "value"] >= 0).all()      # retransmissions may be none
    for mpi, plugin in (("openmpi", "pmix"), ("mpich", "pmi2")):
        prov = json.loads(next((st.work / "data/raw" / CAMPAIGN / TESTBED / "netpipe").glob(f"{mpi}-net_*/rep-1.json"))
                          .read_text())
        assert prov["command"]["argv"][:6] == ["srun", f"--mpi={plugin}", "-N", "2", "-n", "2"], prov["command"]

    # the nodes' eth0 carried at least what NetPIPE sent across them, both ways (both MPIs;
    # Slurm's own messages and the placement's halos come on top)
    sent = sum(_netpipe_bytes(p) for p in st.raws if "/netpipe/" in str(p) and "-net_" in str(p))
    grown = {n: (counters_after[n][0] - st.counters_before[n][0], counters_after[n][1] - st.counters_before[n][1])
             for n in NODES}
    print(f"NetPIPE sent >= {sent} B across the nodes (each way); eth0 (rx, tx) grew by {grown}")
    for node, (rx, tx) in grown.items():
        assert rx >= sent and tx >= sent, f"{node}: eth0 grew by rx {rx}, tx {tx} < {sent}"

    # what the executor adds: the last run's wall time against its measurements' own run times
    # (it submitted two jobs, the allocation and parse)
    last = [p for p in st.raws if p not in st.finished]
    run_s = sum(_seconds(r["finished_at"]) - _seconds(r["started_at"])
                for r in (json.loads(p.with_suffix(".json").read_text()) for p in last))
    print(f"the completing run: {st.steps['run 3 (completes)']:.1f} s for {len(last)} measurements that ran "
          f"{run_s:.1f} s; steps: " + ", ".join(f"{k} {v:.1f} s" for k, v in st.steps.items()))


def _seconds(stamp: str) -> float:
    return datetime.fromisoformat(stamp).timestamp()


@pytest.mark.skipif(not HAVE_ACCOUNTING, reason="needs slurmdbd and mariadb-server (install-deps.sh slurm)")
def test_job_status_through_sacct_and_the_accounting_database(st, tmp_path):
    """The executor's default status command, sacct, answered by slurmdbd:
    the parse job again, with status polling through sacct only (a spy on
    PATH logs every sacct and squeue call and runs the real one)."""
    assert (st.work / f"data/results/{CAMPAIGN}/{TESTBED}/tidy.csv").exists(), "needs the completed study"
    spy = tmp_path / "spy"
    spy.mkdir()
    calls = tmp_path / "calls.log"
    for tool in ("sacct", "squeue"):
        real = shutil.which(tool)
        (spy / tool).write_text(f'#!/bin/sh\nprintf "%s\\n" "{tool} $*" >> {calls}\nexec {real} "$@"\n')
        (spy / tool).chmod(0o755)
    env = dict(st.smk_env, PATH=f"{spy}:{st.smk_env['PATH']}")
    t0 = time.monotonic()
    res = subprocess.run(["timeout", "-k", "15", "300", SNAKEMAKE, *PROFILE, *ARGS[:1], "--forcerun", "parse",
                          "--slurm-status-command", "sacct", *ARGS[1:]], cwd=st.work, env=env,
                         capture_output=True, text=True, timeout=330)
    st.steps["parse through sacct"] = time.monotonic() - t0
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-4000:]
    jobids = re.findall(r"submitted with SLURM jobid (\d+)", out)
    assert len(jobids) == 1, out[-4000:]
    log = calls.read_text().splitlines()
    status = [c for c in log if c.startswith("sacct -X") and "--name" in c]
    assert status, log
    assert not [c for c in log if c.startswith("squeue")], log
    # the accounting database holds every allocation of the module's campaign, as it ended
    since = (datetime.now() - timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M:%S")
    acct = t2n.run(["sacct", "-X", "-n", "-P", "--starttime", since, "-o", "JobID,JobName,State"],
                   st.env, check=True).stdout
    states = {}
    for line in acct.splitlines():
        jobid, _, state = line.split("|")
        states[jobid] = state.split()[0]
    assert states[jobids[0]] == "COMPLETED", acct
    groups = [s for j, s in states.items() if j != jobids[0]]
    assert {"CANCELLED", st.node_failed_state, "COMPLETED"} <= set(groups), acct
    # the database and slurmdbd: MariaDB has no TCP port; slurmdbd listens in its own namespace only
    ss = t2n.run(["ss", "-Hltnup"], None, check=True).stdout
    assert "mariadbd" not in ss and "slurmdbd" not in ss, ss
    ss_db = t2n.run(["nsenter", "--net=/run/netns/hvslurm-db", "ss", "-Hltnup"], None, check=True).stdout
    assert "slurmdbd" in ss_db and "mariadbd" not in ss_db, ss_db
    assert (st.workdir / "slurm/db/slurm_acct_db").is_dir()
