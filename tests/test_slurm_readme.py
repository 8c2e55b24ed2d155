"""The README's Slurm command, exactly as written, in a fresh copy: it starts
the project's cluster, measures the one-host study through Slurm, builds the
paper for the testbed it has (the parts it lacks are listed in the paper),
and stops the cluster.  The same study through the local executor then
measures the same things: Slurm changes how jobs are run, not what."""

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
from hpcvirt.tidy import COLUMNS
from test_workflow import APP_BENCHMARKS, fresh_copy, suites_only

ROOT = Path(__file__).resolve().parents[1]


def readme_command() -> list[str]:
    text = (ROOT / "README.md").read_text()
    m = re.search(r"^(workflow/scripts/slurm-study\.sh .+)$", text, re.M)
    assert m, "README.md has no slurm-study.sh command line"
    return shlex.split(m.group(1))


@pytest.mark.e2e
@pytest.mark.slurm
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

    # the same study's suites through the local executor on the bare host: the same columns, and for
    # the suites the same benchmarks, paths, metrics and sizes (the applications take the same path
    # through the executors; tests/test_workflow.py measures them locally); every value positive
    # (but energies and retransmissions)
    cfg = [a for a in argv[argv.index("--configfile") + 1:argv.index("--config")]]
    t0 = time.monotonic()
    res = tsw.smk(work, *tsw.LOCAL_PROFILE, "data/results/via-local/local/tidy.csv", "--configfile", *cfg,
                  suites_only(work), "--config", "campaign=via-local", "testbeds=[local]", env=env,
                  timeout=1500)
    local_s = time.monotonic() - t0
    assert res.returncode == 0, (res.stdout + res.stderr)[-6000:]
    print(f"README Slurm command (cluster start, study, paper, stop) {slurm_s:.0f} s; "
          f"the study through the local executor {local_s:.0f} s")
    campaign = next(a.split("=", 1)[1] for a in argv if a.startswith("campaign="))
    via_slurm = pd.read_csv(work / f"data/results/{campaign}/local-slurm/tidy.csv")
    via_local = pd.read_csv(work / "data/results/via-local/local/tidy.csv")
    assert list(via_slurm.columns) == list(via_local.columns) == list(COLUMNS)
    apps = via_slurm["benchmark"].isin(APP_BENCHMARKS)
    assert set(via_slurm.loc[apps, "benchmark"]) == set(APP_BENCHMARKS)     # the applications ran through Slurm
    assert not via_local["benchmark"].isin(APP_BENCHMARKS).any()
    assert tsw.row_keys(via_slurm[~apps]) == tsw.row_keys(via_local)
    positive = (via_slurm["unit"] != "Ry") & (via_slurm["metric"] != "retransmits")
    assert (via_slurm.loc[positive, "value"] > 0).all()
    assert pd.read_csv(work / f"data/results/{campaign}/local-slurm/rejected.csv").empty

    # inside the one allocation the measurements ran in the study's interleaved order
    study = tsw.study_of(work, campaign, "local-slurm", tsw.ONE_HOST_PATHS)
    started = {}
    for raw in matrix.all_raw_paths(study):
        prov = yaml.safe_load((work / raw).with_suffix(".json").read_text())
        started[raw] = prov["status"]["started_at"] if "status" in prov else prov["started_at"]
    assert sorted(started, key=started.get) == matrix.all_raw_paths(study)
