"""The README's Slurm command, exactly as written, in a fresh copy: it starts
the project's cluster, measures the one-host study through Slurm, builds the
paper for the testbed it has (the parts it lacks are listed in the paper),
and stops the cluster.  What it measured is what the plan asks for, with the
metrics the benchmarks declare: Slurm changes how jobs are run, not what."""

from __future__ import annotations

import re
import shlex
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

import test_slurm_workflow as tsw
from hpcvirt import matrix
from hpcvirt.benchmarks import REGISTRY
from hpcvirt.tidy import COLUMNS
from test_workflow import APP_BENCHMARKS, fresh_copy

ROOT = Path(__file__).resolve().parents[1]


def readme_command() -> list[str]:
    text = (ROOT / "README.md").read_text()
    m = re.search(r"^(workflow/scripts/slurm-study\.sh .+)$", text, re.M)
    assert m, "README.md has no slurm-study.sh command line"
    return shlex.split(m.group(1))


@pytest.mark.e2e
@pytest.mark.slurm
@pytest.mark.suites             # the one-host study runs the pinned suites: make test runs it once they are built
@tsw.needs_cluster
def test_readme_slurm_command_builds_the_paper(tmp_path):
    work = fresh_copy(tmp_path / "repo")
    argv = readme_command()
    env = tsw.base_env(HPCVIRT_WORKDIR=str(tmp_path / "state"), HPCVIRT_STUDY_TIMEOUT="1500")
    t0 = time.monotonic()
    cp = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, timeout=1800)
    slurm_s = time.monotonic() - t0
    log = cp.stdout + cp.stderr
    assert cp.returncode == 0, log[-6000:]
    assert (work / "paper/main.pdf").stat().st_size > 10_000
    parts = (work / "logs/paper/parts.log").read_text()
    # a one-host campaign: the bridge/VM and placement parts are left out, and listed
    assert "omitted results-placement" in parts and "omitted results-datapaths" in parts, parts
    text = subprocess.run(["pdftotext", str(work / "paper/main.pdf"), "-"], capture_output=True, text=True).stdout
    assert "Not in this campaign" in text
    subs = tsw.submissions(log)
    assert sum("group_local-slurm.n1_measure" in p for _, p in subs) == 1, subs
    # what the README says: the allocation, parse, aggregate; the figures and the paper are local rules
    assert len(subs) == 3, subs
    print(f"README Slurm command: {len(subs)} sbatch submissions")
    # the cluster was stopped again: no live daemon is left (an exited daemon may stay a zombie
    # for a moment until the machine's init reaps it; it runs nothing and holds no port)
    ps = subprocess.run(["ps", "-eo", "stat=,comm="], capture_output=True, text=True).stdout.splitlines()
    live = [line for line in ps if not line.lstrip().startswith("Z")]
    assert not [line for line in live if line.split()[-1] in ("slurmctld", "slurmd", "munged")], ps

    # Slurm changes how the jobs run, not what they measure: every measurement the plan asks for has its
    # rows, in the tidy table's columns, with the metrics (and units) its benchmark declares; the parsers,
    # which check each output against what its configuration expects (sizes, ranks, iterations), rejected
    # nothing; every value is positive (but energies and retransmissions)
    campaign = next(a.split("=", 1)[1] for a in argv if a.startswith("campaign="))
    study = tsw.study_of(work, campaign, "local-slurm", tsw.ONE_HOST_PATHS)
    via_slurm = pd.read_csv(work / f"data/results/{campaign}/local-slurm/tidy.csv")
    assert list(via_slurm.columns) == list(COLUMNS)
    assert set(via_slurm["raw_path"]) == set(matrix.all_raw_paths(study))
    keys = via_slurm[["benchmark", "metric", "unit"]].values
    undeclared = via_slurm[[not REGISTRY.by_rows(b).declares(m, u) for b, m, u in keys]]
    assert undeclared.empty, undeclared[["benchmark", "metric", "unit"]].drop_duplicates().to_string()
    apps = via_slurm["benchmark"].isin(APP_BENCHMARKS)
    assert set(via_slurm.loc[apps, "benchmark"]) == set(APP_BENCHMARKS)     # the applications ran through Slurm
    # (IMB prints MB/s with two decimals: a message of a few bytes that takes milliseconds on a loaded
    # machine reads 0.00, as printed)
    imb_bw = (via_slurm["benchmark"] == "imb") & (via_slurm["metric"] == "bandwidth")
    positive = (via_slurm["unit"] != "Ry") & (via_slurm["metric"] != "retransmits") & ~imb_bw
    assert (via_slurm.loc[positive, "value"] > 0).all()
    assert (via_slurm.loc[imb_bw, "value"] >= 0).all() and (via_slurm.loc[imb_bw, "value"] > 0).any()
    assert pd.read_csv(work / f"data/results/{campaign}/local-slurm/rejected.csv").empty
    print(f"README Slurm command (cluster start, study, paper, stop) {slurm_s:.0f} s")

    # inside the one allocation the measurements ran in the study's interleaved order
    started = {}
    for raw in matrix.all_raw_paths(study):
        prov = yaml.safe_load((work / raw).with_suffix(".json").read_text())
        started[raw] = prov["status"]["started_at"] if "status" in prov else prov["started_at"]
    assert sorted(started, key=started.get) == matrix.all_raw_paths(study)
