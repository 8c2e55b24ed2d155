"""The README's Slurm command, exactly as written, in a fresh copy: it starts
the project's cluster, measures the one-host study through Slurm, builds the
paper for the testbed it has (the parts it lacks are listed in the paper),
and stops the cluster."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest

import test_slurm_workflow as tsw
from test_workflow import fresh_copy

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
    cp = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, timeout=1800)
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
    assert len(subs) == 20, subs      # what the README says
    print(f"README Slurm command: {len(subs)} sbatch submissions")
    # the cluster was stopped again
    assert "slurmctld" not in subprocess.run(["ps", "-eo", "comm"], capture_output=True, text=True).stdout
