"""The shipped study restricted to some testbed files: each MPI experiment
asks for exactly the MPIs and paths those testbeds offer it (or is off), so
that a test can load the study with a subset of the testbeds."""

from __future__ import annotations

import copy
from pathlib import Path

import yaml

from hpcvirt.benchmarks import REGISTRY
from hpcvirt.config import load_testbed

ROOT = Path(__file__).resolve().parents[1]
STUDY = yaml.safe_load((ROOT / "config/config.yaml").read_text())


def study_for(testbeds: list[str], tbs: dict[str, dict] | None = None, **experiments) -> dict:
    """A copy of config/config.yaml for ``testbeds`` (their files are read
    unless ``tbs`` gives them); ``experiments`` update experiments afterwards."""
    tbs = tbs or {n: load_testbed(ROOT / f"config/testbeds/{n}.yaml") for n in testbeds}
    study = dict(copy.deepcopy(STUDY), testbeds=list(testbeds))
    for bench in REGISTRY:
        exp = study["experiments"].get(bench.experiment)
        if exp is None:
            continue
        exp["skip_testbeds"] = []    # the testbeds given are the ones to run it on (also as an overlay)
        if exp.get("by_testbed"):    # settings of testbeds not given would name files the test may not have
            exp["by_testbed"] = {t: v for t, v in exp["by_testbed"].items() if t in testbeds}
        if not bench.mpi:       # a client/server benchmark: offered by a testbed with its entry
            exp["enabled"] = exp.get("enabled", True) and any(
                bench.name in tb and tb.get("nodes", 1) >= bench.min_hosts for tb in tbs.values())
            continue
        offer: dict[str, set] = {}
        for tb in tbs.values():
            if tb.get("nodes", 1) < bench.min_hosts:
                continue
            for m, e in tb["mpi"].items():
                if bench.name in e:
                    offer.setdefault(m, set()).update(e["paths"])
        exp["enabled"] = exp.get("enabled", True) and bool(offer)
        exp.pop("by_kind", None)
        if exp["enabled"]:
            exp["mpis"] = [m for m in exp["mpis"] if m in offer] or sorted(offer)
            if "paths" in exp:
                exp["paths"] = sorted({p for m in exp["mpis"] for p in offer[m]})
    for name, update in experiments.items():
        study["experiments"][name].update(update)
    return study
