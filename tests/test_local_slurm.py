"""Tests of workflow/scripts/local-slurm.sh: a real one-node Slurm cluster.

The cluster under test lives in its own state directory (a pytest temporary
directory), so a cluster already started from the project directory is left
alone.  The /etc/slurm/slurm.conf symlink (needed by srun inside jobs of the
Snakemake Slurm executor) is only installed when that path is free.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "workflow" / "scripts" / "local-slurm.sh"
PROFILE = ROOT / "workflow" / "profiles" / "slurm"
ETC_CONF = Path("/etc/slurm/slurm.conf")

_missing = [
    tool
    for tool in ("slurmctld", "slurmd", "munged", "sbatch", "srun", "sinfo")
    if shutil.which(tool) is None
]

pytestmark = [
    pytest.mark.slurm,
    pytest.mark.skipif(
        bool(_missing),
        reason="Slurm/munge not installed (missing: "
        + ", ".join(_missing)
        + "; Debian packages slurm-wlm munge)",
    ),
    pytest.mark.skipif(
        hasattr(os, "geteuid") and os.geteuid() != 0,
        reason="the local Slurm cluster runs its daemons as root",
    ),
]

OMPI_ROOT = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


def run(cmd, env, timeout=60, check=False, cwd=None):
    """Run a command with a hard timeout; return the CompletedProcess."""
    proc = subprocess.run(
        cmd,
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if check and proc.returncode != 0:
        raise AssertionError(
            f"{cmd} exited {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
        )
    return proc


def script_env(workdir: Path, etc_link: bool, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env["HPCVIRT_WORKDIR"] = str(workdir)
    env["HPCVIRT_SLURM_ETC_LINK"] = "1" if etc_link else "0"
    env.update(extra)
    return env


class Cluster:
    def __init__(self, workdir: Path, etc_link: bool):
        self.workdir = workdir
        self.etc_link = etc_link
        self.script_env = script_env(workdir, etc_link)
        self.conf = workdir / "slurm" / "slurm.conf"
        # environment for Slurm clients (sbatch, srun, ...)
        self.env = dict(self.script_env, SLURM_CONF=str(self.conf))

    def script(self, *args, timeout=90, env=None):
        return run(["bash", str(SCRIPT), *args], env or self.script_env, timeout=timeout)

    def conf_value(self, key: str) -> str:
        m = re.search(rf"^{key}=(\S+)", self.conf.read_text(), re.M)
        assert m, f"{key} not in {self.conf}"
        return m.group(1)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("hpcvirt")
    etc_link = not (ETC_CONF.exists() or ETC_CONF.is_symlink())
    c = Cluster(workdir, etc_link)
    try:
        start = c.script("start", timeout=120)
        assert start.returncode == 0, f"start failed:\n{start.stderr}"
        yield c
    finally:
        stop = c.script("stop", timeout=120)
        assert stop.returncode == 0, stop.stderr


def test_start_is_idempotent(cluster):
    before = cluster.script("status", timeout=30)
    assert before.returncode == 0, before.stdout + before.stderr
    again = cluster.script("start", timeout=60)
    assert again.returncode == 0, again.stderr
    assert "already running" in again.stderr
    after = cluster.script("status", timeout=30)
    pids = lambda text: re.findall(r"running \(pid (\d+)", text)  # noqa: E731
    assert len(pids(before.stdout)) == 3
    assert pids(after.stdout) == pids(before.stdout)


def test_env_prints_slurm_conf(cluster):
    out = cluster.script("env", timeout=30)
    assert out.returncode == 0
    assert f"export SLURM_CONF={cluster.conf}" in out.stdout


def test_node_idle_in_default_partition(cluster):
    out = run(["sinfo", "-h", "-o", "%P %t %D"], cluster.env, timeout=30, check=True)
    assert out.stdout.split() == ["local*", "idle", "1"]


def test_the_dry_run_reads_the_partitions_time_limit(cluster, monkeypatch):
    """What K of group-components a site's partition allows: its time limit as sinfo reports it."""
    from hpcvirt import slurm

    monkeypatch.setenv("SLURM_CONF", str(cluster.conf))
    assert slurm.partition_limit("local") == slurm.partition_limit(None) == math.inf      # MaxTime=INFINITE
    assert slurm.partition_limit("nosuch") is None
    tb = {"name": "s", "executor": "slurm", "nodes": 1, "slurm": {"partition": "local", "runtime_min": 20}}
    update = ["scontrol", "update", "PartitionName=local"]
    run([*update, "MaxTime=90"], cluster.env, check=True)
    try:
        assert slurm.partition_limit("local") == 90
        note = slurm.allocation_note({"s": tb}, ["data/raw/c/s/x/rep-1.out"] * 3)
        assert note == ["s: 3 measurements under Slurm, 20 min each (slurm.runtime_min), 1.0 h in all; "
                        "group-components s.n1=K puts K of them in one allocation of -t K x 20 min (the "
                        "partition's time limit, 90 min (sinfo), allows K up to 4; without an entry each is an "
                        "allocation of its own)"]
        tb["slurm"]["runtime_min"] = 120
        below = slurm.allocation_note({"s": tb}, ["data/raw/c/s/x/rep-1.out"])[0]
        assert ("the partition's time limit, 90 min (sinfo), is below one measurement's: "
                "lower slurm.runtime_min") in below
    finally:
        run([*update, "MaxTime=INFINITE"], cluster.env, check=True)


def test_daemons_listen_on_loopback_only(cluster):
    if shutil.which("ss") is None:
        pytest.skip("ss (iproute2) not installed")
    pids = {
        name: (cluster.workdir / "slurm" / "run" / f"{name}.pid").read_text().strip()
        for name in ("slurmctld", "slurmd")
    }
    out = run(["ss", "-Hltnp"], cluster.env, timeout=30, check=True).stdout
    for name, pid in pids.items():
        lines = [ln for ln in out.splitlines() if f"pid={pid}," in ln]
        assert lines, f"{name} (pid {pid}) listens nowhere?\n{out}"
        for ln in lines:
            local = ln.split()[3]
            assert local.startswith("127."), f"{name} listens on {local}"


def test_sbatch_wrap_job_completes(cluster, tmp_path):
    out_file = tmp_path / "job.out"
    sub = run(
        [
            "sbatch",
            "--parsable",
            "--wait",
            "-t",
            "2",
            "-o",
            str(out_file),
            "--wrap",
            "echo hello from job $SLURM_JOB_ID on $(hostname)",
        ],
        cluster.env,
        timeout=120,
    )
    assert sub.returncode == 0, sub.stderr
    jobid = sub.stdout.strip().split(";")[0]
    assert f"hello from job {jobid}" in out_file.read_text()
    state = run(
        ["squeue", "-h", "-t", "all", "-j", jobid, "-o", "%T"], cluster.env, timeout=30
    )
    assert state.stdout.strip() == "COMPLETED"


def test_srun_pmix_two_rank_openmpi(cluster):
    if shutil.which("NPopenmpi") is None:
        pytest.skip("NPopenmpi missing (Debian package netpipe-openmpi)")
    out = run(
        [
            "srun",
            "--mpi=pmix",
            "-n",
            "2",
            "-t",
            "2",
            "NPopenmpi",
            "-u",
            "64",
            "-p",
            "0",
            "-n",
            "200",
            "-o",
            "/dev/null",
        ],
        dict(cluster.env, **OMPI_ROOT),
        timeout=120,
    )
    text = out.stdout + out.stderr
    assert out.returncode == 0, text
    assert re.search(r"^0: ", text, re.M) and re.search(r"^1: ", text, re.M), text
    assert re.search(r"64 bytes\s+200 times", text), text


def test_daemon_start_failure_is_reported(cluster, tmp_path):
    """A second cluster on the first one's port: slurmctld cannot bind."""
    busy_port = cluster.conf_value("SlurmctldPort")
    env = script_env(
        tmp_path / "second",
        etc_link=False,
        HPCVIRT_SLURM_PORT_BASE=busy_port,
        HPCVIRT_SLURM_START_TIMEOUT="10",
    )
    try:
        out = cluster.script("start", timeout=90, env=env)
        assert out.returncode != 0
        assert "slurmctld did not come up" in out.stderr, out.stderr
        assert "Address already in use" in out.stderr, out.stderr
    finally:
        stop = cluster.script("stop", timeout=60, env=env)
        assert stop.returncode == 0, stop.stderr
    status = cluster.script("status", timeout=30, env=env)
    assert status.returncode != 0
    assert "running" not in status.stdout
    # the first cluster is unaffected
    assert cluster.script("status", timeout=30).returncode == 0


def test_foreign_etc_slurm_conf_is_refused(cluster, tmp_path):
    if not cluster.etc_link:
        pytest.skip(f"{ETC_CONF} was not free; symlink handling not exercised")
    assert ETC_CONF.is_symlink() and Path(os.readlink(ETC_CONF)) == cluster.conf
    env = script_env(tmp_path / "third", etc_link=True)
    out = cluster.script("start", timeout=30, env=env)
    assert out.returncode != 0
    assert "is a symlink to" in out.stderr, out.stderr
    assert Path(os.readlink(ETC_CONF)) == cluster.conf


def test_snakemake_profile_runs_group_job(cluster, tmp_path):
    """The Slurm profile: three grouped jobs in one allocation, one sbatch."""
    if not cluster.etc_link:
        pytest.skip(f"{ETC_CONF} was not free; jobs of the executor need it")
    snakemake = shutil.which("snakemake") or str(ROOT / ".venv" / "bin" / "snakemake")
    if not Path(snakemake).exists():
        pytest.skip("snakemake not installed")
    (tmp_path / "Snakefile").write_text(
        textwrap.dedent(
            """
            rule all:
                input: expand("out/{i}.txt", i=range(3))

            rule small:
                output: "out/{i}.txt"
                group: "smalls"
                shell: "echo $SLURM_JOB_ID > {output}"
            """
        )
    )
    out = run(
        [
            "timeout",
            "-k",
            "10",
            "240",
            snakemake,
            "--workflow-profile",
            str(PROFILE),
            "--group-components",
            "smalls=3",
        ],
        cluster.env,
        cwd=tmp_path,
        timeout=270,
    )
    log = out.stdout + out.stderr
    assert out.returncode == 0, log
    submitted = re.findall(r"submitted with SLURM jobid (\d+)", log)
    assert len(submitted) == 1, log
    ids = {(tmp_path / "out" / f"{i}.txt").read_text().strip() for i in range(3)}
    assert ids == set(submitted)
