"""The study through Slurm: the workflow's jobs as sbatch allocations.

* What a real cluster would receive (testbed example-site): the exact sbatch
  command line, recorded by a stand-in ``sbatch`` that submits nothing.
The real clusters are elsewhere: the README's command through the project's
one-node cluster (workflow/scripts/local-slurm.sh), compared with the local
executor, in tests/test_slurm_readme.py; a cancelled allocation, a node that
dies mid-job and the re-run that measures only what is missing, on the
two-node cluster, in tests/test_slurm_2n_workflow.py.  This module keeps the
helpers they share.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import test_workflow as tw
from hpcvirt import matrix
from hpcvirt.config import load_study

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
    # the jobs after the measurements go to the site's partition and account too, not to the profile's
    # default partition (the local cluster's "local")
    full = smk(work, *SLURM_PROFILE, "-n", *args, env=env, timeout=300)
    for rule in ("parse", "aggregate"):
        res = re.search(rf"^rule {rule}:\n(?:    .*\n)*?    resources: (.*)$", full.stdout + full.stderr, re.M)
        assert res and "slurm_partition=compute" in res.group(1) and "slurm_account=myproject" in res.group(1), \
            (rule, full.stdout[-3000:])

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


def submissions(log: str) -> list[tuple[str, str]]:
    """(job id, Slurm log) of every sbatch submission Snakemake's Slurm executor reported."""
    return re.findall(r"submitted with SLURM jobid (\d+) \(log: ([^)]+)\)", log)


def row_keys(tidy) -> set:
    """What a tidy table measured, without the values: benchmark, MPI, path, metric, size."""
    keys = tidy[["benchmark", "mpi", "interconnect", "metric", "msg_bytes"]].fillna({"msg_bytes": -1})  # NPB: no size
    return set(map(tuple, keys.drop_duplicates().values))
