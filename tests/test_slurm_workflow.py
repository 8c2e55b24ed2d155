"""The study through Slurm: the workflow's jobs as sbatch allocations.

* What a real cluster would receive (testbed example-site): the exact sbatch
  command line, recorded by a stand-in ``sbatch`` that submits nothing.
* The tiny study through the project's local one-node Slurm cluster
  (workflow/scripts/local-slurm.sh), compared with the local executor.
* A measurement allocation cancelled with scancel while it runs: reported,
  and a re-run completes the study without redoing finished measurements.

Everything runs in a fresh copy of the repository with its own cluster state
directory; the cluster is always stopped, every subprocess has a time limit.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

import test_workflow as tw
from hpcvirt import matrix
from hpcvirt.config import load_study
from hpcvirt.tidy import COLUMNS

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
SNAKEMAKE = str(BIN / "snakemake")
SLURM_PROFILE = ["--workflow-profile", "workflow/profiles/slurm"]
LOCAL_PROFILE = ["--workflow-profile", "workflow/profiles/default"]
ETC_CONF = Path("/etc/slurm/slurm.conf")
# The Slurm testbed runs the one-host paths; the study's net path needs a
# testbed with two hosts (the overlay users take: config/one-host.yaml).
ONE_HOST_PATHS = yaml.safe_load((ROOT / "config/one-host.yaml").read_text())

pytestmark = pytest.mark.slurm

_missing = [t for t in ("slurmctld", "slurmd", "munged", "sbatch", "srun", "squeue", "scancel") if shutil.which(t) is None]
_cluster_marks = [
    pytest.mark.skipif(bool(_missing), reason=f"Slurm/munge not installed (missing: {', '.join(_missing)}; "
                       "Debian packages slurm-wlm munge)"),
    pytest.mark.skipif(os.geteuid() != 0, reason="the local Slurm cluster runs its daemons as root"),
    pytest.mark.skipif(ETC_CONF.exists() and not ETC_CONF.is_symlink(),
                       reason=f"{ETC_CONF} belongs to a site Slurm installation; the local cluster needs that path"),
]


def needs_cluster(test):
    for mark in _cluster_marks:
        test = mark(test)
    return test


def run(argv, cwd, env, timeout, check=False):
    res = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    if check and res.returncode != 0:
        raise AssertionError(f"{shlex.join(map(str, argv))} failed:\n{res.stdout[-4000:]}\n{res.stderr[-4000:]}")
    return res


def base_env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env["PATH"] = f"{BIN}:{env['PATH']}"
    # the pinned suites are built once for all copies of the repository (hpcvirt.build)
    env.setdefault("HPCVIRT_BUILD_CACHE", str(ROOT / ".hpcvirt" / "suites"))
    env.update(extra)
    return env


def smk(work: Path, *args, env: dict, timeout: int):
    """snakemake under timeout(1): it ignores SIGTERM while jobs run."""
    return run(["timeout", "-k", "15", str(timeout), SNAKEMAKE, *args], work, env, timeout + 30)


def study_of(work: Path, campaign: str, testbed: str, overlay: dict | None = None) -> dict:
    with open(work / "config/config.yaml") as fh:
        cfg = yaml.safe_load(fh)
    for extra in (yaml.safe_load((work / "config/tiny.yaml").read_text()), overlay or {}):
        _merge(cfg, extra)
    cfg.update(campaign=campaign, testbeds=[testbed])
    study, _ = load_study(cfg, config_path=work / "config/config.yaml", testbed_dir=work / "config/testbeds")
    return study


def _merge(dst: dict, src: dict) -> None:
    for k, v in src.items():
        if isinstance(v, dict) and isinstance(dst.get(k), dict):
            _merge(dst[k], v)
        else:
            dst[k] = v


# --------------------------------------------------------------------------
# What a real cluster receives (no Slurm needed: sbatch is a stand-in)
# --------------------------------------------------------------------------

FAKE_SBATCH = """#!/bin/sh
printf '%s\\n' "sbatch $*" >> "$FAKE_SLURM_LOG"
echo "stand-in sbatch: recorded, not submitted" >&2
exit 1
"""
FAKE_OTHER = """#!/bin/sh
printf '%s\\n' "$(basename "$0") $*" >> "$FAKE_SLURM_LOG.other"
{extra}
exit 0
"""


def test_example_site_sbatch_resources(tmp_path):
    """The sbatch call of the example site's measurements: partition, account,
    qos, constraint, summed runtime, nodes and tasks from the testbed file, all
    measurements in one allocation."""
    work = tw.fresh_copy(tmp_path / "repo")
    fake = tmp_path / "fakebin"
    fake.mkdir()
    (fake / "sbatch").write_text(FAKE_SBATCH)
    for tool in ("squeue", "sacct", "sinfo", "scontrol", "sshare", "srun", "scancel"):
        (fake / tool).write_text(FAKE_OTHER.format(extra=""))
    # the account the example site's file names is "registered"
    (fake / "sacctmgr").write_text(FAKE_OTHER.format(extra="echo myproject"))
    for f in fake.iterdir():
        f.chmod(0o755)
    log = tmp_path / "sbatch.log"
    env = base_env(PATH=f"{fake}:{BIN}:{os.environ['PATH']}", FAKE_SLURM_LOG=str(log))
    campaign = "site-sbatch"
    args = ["--configfile", "config/tiny.yaml", "--config", f"campaign={campaign}", "testbeds=[example-site]"]

    # dry-run: one group job (one allocation) holds every measurement
    dry = smk(work, *SLURM_PROFILE, "-n", "--until", "measure", *args, env=env, timeout=300)
    listing = dry.stdout + dry.stderr
    assert dry.returncode == 0, listing
    study = study_of(work, campaign, "example-site")
    n = len(matrix.all_raw_paths(study))
    # 1 repetition: NetPIPE and IMB 2 MPIs x 3 paths each, 2 qperf tests, 3 placements, osu_latency and NPB EP
    # on 2 paths each (the site's Spack builds), the communication profile of CG on 2 paths, and OpenFOAM's
    # damBreak, LAMMPS, MILC and pw.x each at 1 and 2 ranks on one node and 2 ranks across the two, and
    # the four TCP streams over a node's loopback
    assert n == 36
    assert listing.count("Group job example-site.n2 ") == 1, listing
    assert re.search(rf"^measure\s+{n}$", listing, re.M), listing

    # the real submission path, stopped at sbatch
    res = smk(work, *SLURM_PROFILE, "--until", "measure", *args, env=env, timeout=300)
    out = res.stdout + res.stderr
    assert res.returncode != 0
    assert "Error in group example-site.n2" in out, out
    calls = log.read_text().splitlines()
    assert len(calls) == 1, calls
    call = calls[0]
    tb = yaml.safe_load((work / "config/testbeds/example-site.yaml").read_text())
    expected = [
        f"-p {tb['slurm']['partition']}",
        f"-A {tb['slurm']['account']}",
        f"-t {n * tb['slurm']['runtime_min']}",  # minutes, summed over the allocation's measurements
        f"-C {tb['slurm']['constraint']}",
        f"--qos={tb['slurm']['qos']}",
        "--nodes=2",
        "--ntasks-per-node=4",  # the intra-node placement puts all 4 ranks on one node
        "--cpus-per-task=1",
        "--exclusive",
        "--mem 1000",
    ]
    for opt in expected:
        assert f" {opt} " in call, f"{opt!r} missing in\n{call}"
    assert "group_example-site.n2_measure" in call
    assert call.count("measure:campaign=") == n
    assert not (work / "data/raw" / campaign).exists() or not any((work / "data/raw" / campaign).rglob("*.out"))


# --------------------------------------------------------------------------
# Through the local one-node Slurm cluster
# --------------------------------------------------------------------------


class LocalCluster:
    def __init__(self, work: Path):
        self.work = work
        self.script = work / "workflow/scripts/local-slurm.sh"
        self.env = base_env(HPCVIRT_WORKDIR=str(work / ".hpcvirt"))
        self.slurm_env = dict(self.env, SLURM_CONF=str(work / ".hpcvirt/slurm/slurm.conf"))

    def ctl(self, *args, timeout=120):
        return run(["bash", str(self.script), *args], self.work, self.env, timeout)

    def squeue(self, *args):
        return run(["squeue", "-h", *args], self.work, self.slurm_env, 30).stdout


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    if ETC_CONF.is_symlink():
        pytest.skip(f"{ETC_CONF} points to another local cluster ({os.readlink(ETC_CONF)}); stop that one first")
    work = tw.fresh_copy(tmp_path_factory.mktemp("slurm") / "repo")
    c = LocalCluster(work)
    try:
        start = c.ctl("start")
        assert start.returncode == 0, start.stderr
        yield c
    finally:
        stop = c.ctl("stop")
        assert stop.returncode == 0, stop.stderr


def overlay(work: Path) -> str:
    path = work / "one-host-paths.yaml"
    path.write_text(yaml.safe_dump(ONE_HOST_PATHS))
    return str(path)


def submissions(log: str) -> list[str]:
    return re.findall(r"submitted with SLURM jobid (\d+) \(log: ([^)]+)\)", log)


def row_keys(tidy: pd.DataFrame) -> set:
    keys = tidy[["benchmark", "mpi", "interconnect", "metric", "msg_bytes"]].fillna({"msg_bytes": -1})  # NPB: no size
    return set(map(tuple, keys.drop_duplicates().values))


@pytest.mark.e2e
@needs_cluster
def test_tiny_study_through_slurm_matches_local_executor(cluster):
    work = cluster.work
    cfg = ["--configfile", "config/tiny.yaml", overlay(work)]
    target = "data/results/{c}/{t}/tidy.csv"

    t0 = time.monotonic()
    res = smk(work, *SLURM_PROFILE, target.format(c="via-slurm", t="local-slurm"), *cfg,
              "--config", "campaign=via-slurm", "testbeds=[local-slurm]", env=cluster.env, timeout=1500)
    slurm_s = time.monotonic() - t0
    log = res.stdout + res.stderr
    assert res.returncode == 0, log[-6000:]
    subs = submissions(log)
    # the 6 measurements share one allocation; parse is a job of its own
    assert len(subs) == 2, subs
    assert sum("group_local-slurm.n1_measure" in p for _, p in subs) == 1, subs
    for jobid, _ in subs:
        assert cluster.squeue("-t", "all", "-j", jobid, "-o", "%T").strip() == "COMPLETED"

    t0 = time.monotonic()
    res = smk(work, *LOCAL_PROFILE, target.format(c="via-local", t="local"), *cfg,
              "--config", "campaign=via-local", "testbeds=[local]", env=cluster.env, timeout=1500)
    local_s = time.monotonic() - t0
    assert res.returncode == 0, (res.stdout + res.stderr)[-6000:]
    print(f"tiny study measured and parsed: via Slurm {slurm_s:.0f} s, local executor {local_s:.0f} s")

    via_slurm = pd.read_csv(work / target.format(c="via-slurm", t="local-slurm"))
    via_local = pd.read_csv(work / target.format(c="via-local", t="local"))
    assert list(via_slurm.columns) == list(via_local.columns) == list(COLUMNS)
    assert row_keys(via_slurm) == row_keys(via_local)
    assert (via_slurm.loc[via_slurm["unit"] != "Ry", "value"] > 0).all()      # energies are negative
    assert pd.read_csv(work / "data/results/via-slurm/local-slurm/rejected.csv").empty

    # inside the allocation the measurements ran in the study's interleaved order
    study = study_of(work, "via-slurm", "local-slurm", ONE_HOST_PATHS)
    started = {}
    for raw in matrix.all_raw_paths(study):
        prov = yaml.safe_load((work / raw).with_suffix(".json").read_text())
        started[raw] = prov["status"]["started_at"] if "status" in prov else prov["started_at"]
    assert sorted(started, key=started.get) == matrix.all_raw_paths(study)


@pytest.mark.e2e
@needs_cluster
def test_cancelled_allocation_is_reported_and_resumed(cluster):
    """scancel while a measurement runs: the workflow names the cancelled job
    and its Slurm log; a re-run completes the study without redoing the
    measurements that had finished."""
    work = cluster.work
    campaign = "cancel"
    cfg = ["--configfile", "config/tiny.yaml", overlay(work)]
    args = [f"data/results/{campaign}/local-slurm/tidy.csv", *cfg,
            "--config", f"campaign={campaign}", "testbeds=[local-slurm]", "repetitions=2"]
    study = study_of(work, campaign, "local-slurm", dict(ONE_HOST_PATHS, repetitions=2))
    raws = [work / p for p in matrix.all_raw_paths(study)]

    proc = subprocess.Popen(["timeout", "-k", "15", "900", SNAKEMAKE, *SLURM_PROFILE, *args], cwd=work,
                            env=cluster.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        # wait until the allocation has finished at least one measurement
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and not any(p.exists() for p in raws):
            assert proc.poll() is None, proc.stdout.read()
            time.sleep(0.5)
        running = cluster.squeue("-t", "R", "-o", "%i")
        jobids = running.split()
        assert len(jobids) == 1, running
        done_before = {p: p.stat().st_mtime_ns for p in raws if p.exists()}
        assert 0 < len(done_before) < len(raws)
        run(["scancel", jobids[0]], work, cluster.slurm_env, 30, check=True)
        out, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
    (work / f"{campaign}-cancelled.log").write_text(out)
    slurm_lines = "\n".join(ln for ln in out.splitlines() if "SLURM" in ln or "slurm_logs" in ln)
    assert proc.returncode not in (0, 124, 137), out[-4000:]
    # a group job is reported as the group's error with its Slurm log, whose
    # tail (show-failed-logs) holds Slurm's cancellation notice; a single job
    # would read "SLURM-job 'N' failed, SLURM status is: 'CANCELLED'"
    assert "Error in group local-slurm.n1" in out, slurm_lines
    assert f".snakemake/slurm_logs/group_local-slurm.n1_measure/{jobids[0]}.log" in out, slurm_lines
    assert re.search(rf"\*\*\* JOB {jobids[0]} ON \S+ CANCELLED AT ", out), slurm_lines
    # what had finished inside the cancelled allocation is kept
    done_after = {p: p.stat().st_mtime_ns for p in raws if p.exists()}
    assert set(done_before) <= set(done_after)
    assert len(done_after) < len(raws)

    res = smk(work, *SLURM_PROFILE, *args, env=cluster.env, timeout=900)
    log = res.stdout + res.stderr
    assert res.returncode == 0, log[-6000:]
    for p, mtime in done_after.items():
        assert p.stat().st_mtime_ns == mtime, f"{p} was measured again"
        assert f"Missing output files: {p.relative_to(work)}" not in log, f"{p} was scheduled again"
    assert all(p.exists() for p in raws)
    # the re-run measured exactly the missing ones
    n_measure = re.search(r"^measure\s+(\d+)$", log, re.M)
    assert n_measure and int(n_measure.group(1)) == len(raws) - len(done_after), log[-4000:]
    tidy = pd.read_csv(work / f"data/results/{campaign}/local-slurm/tidy.csv")
    assert set(tidy["rep"]) == {1, 2}
