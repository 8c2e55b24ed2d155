#!/usr/bin/env python3
"""Benchmark: what running the study through Slurm costs, on the project's
two-node cluster.

In a fresh clone of this checkout's HEAD it starts the two-node cluster
(``workflow/scripts/local-slurm.sh start --nodes 2 --cpus-per-node 2``, its
state in a scratch directory), runs the tiny study on it through the Slurm
profile (``--configfile config/tiny.yaml config/two-nodes.yaml``: testbed
``local-slurm-2n``), stops the cluster, and then runs the same experiments
through the local executor on ``bridge`` (two network namespaces on a bridge,
the same kind of hosts the two Slurm nodes are, one rank per host).  It
reports for each run:

* the wall time of the whole Snakemake command (DAG, submissions, the
  measurements, parsing) and the number of measurements;
* the sum of the measurements' own run times (their provenance records'
  ``started_at`` .. ``finished_at``);
* the per-job overhead: the median gap between one measurement's end and the
  next one's start (with Slurm: inside the one allocation, each job a job step
  run by the executor plugin), and the time from the command's start to the
  first measurement (with Slurm: DAG, sbatch, scheduling, the allocation's
  start-up) and from the last measurement to the tidy table (with Slurm: the
  parse job's own submission);
* the sbatch submissions.

The two testbeds differ in what they offer (the placement benchmark's blocks
per node), so the totals are compared per measurement.  Noise on a 2-core
machine is large: run it on a quiet machine and repeat it.

usage: workflow/scripts/bench-slurm-2n.py [--keep]     (as root; with the project's venv python)
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# first of all: not this script's folder, whose numbers.py (a workflow script) would shadow the
# standard library's numbers module (statistics and numpy import it)
sys.path = [str(ROOT / "workflow/lib")] + [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).parent]

import argparse  # noqa: E402
import datetime as dt  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import pandas as pd  # noqa: E402

from hpcvirt.benchmarks import REGISTRY  # noqa: E402

SNAKEMAKE = str(ROOT / ".venv/bin/snakemake")


def _ts(s: str) -> float:
    return dt.datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()


def timeline(clone: Path, campaign: str, testbed: str) -> list[tuple[float, float]]:
    """(start, end) of every measurement of the campaign on the testbed, in start order."""
    spans = []
    for rec in sorted((clone / "data/raw" / campaign / testbed).rglob("rep-*.json")):
        prov = json.loads(rec.read_text())
        st = prov.get("status", prov)
        spans.append((_ts(st["started_at"]), _ts(st["finished_at"])))
    return sorted(spans)


def run_study(clone: Path, env: dict, profile: str, campaign: str, testbed: str, overlays: list[str]) -> dict:
    target = f"data/results/{campaign}/{testbed}/tidy.csv"
    argv = ["timeout", "-k", "15", "1800", SNAKEMAKE, "--workflow-profile", profile, target,
            "--configfile", "config/tiny.yaml", "config/two-nodes.yaml", *overlays,
            "--config", f"campaign={campaign}", f"testbeds=[{testbed}]"]
    print(f"bench-slurm-2n: {' '.join(argv[4:])}", flush=True)
    t0 = time.time()
    cp = subprocess.run(argv, cwd=clone, env=env, capture_output=True, text=True)
    t1 = time.time()
    log = cp.stdout + cp.stderr
    (clone / f"{campaign}.log").write_text(log)
    if cp.returncode != 0:
        raise SystemExit(f"bench-slurm-2n: the study failed (log: {clone / f'{campaign}.log'}):\n{log[-3000:]}")
    spans = timeline(clone, campaign, testbed)
    tidy = (clone / target).stat().st_mtime
    gaps = [b[0] - a[1] for a, b in zip(spans, spans[1:])]
    return {
        "testbed": testbed, "measurements": len(spans), "wall_s": round(t1 - t0, 1),
        "measuring_s": round(sum(e - s for s, e in spans), 1),
        "wall_per_measurement_s": round((t1 - t0) / len(spans), 2),
        "gap_between_measurements_median_s": round(statistics.median(gaps), 2) if gaps else None,
        "gap_between_measurements_max_s": round(max(gaps), 2) if gaps else None,
        "to_first_measurement_s": round(spans[0][0] - t0, 1),
        "last_measurement_to_tidy_s": round(tidy - spans[-1][1], 1),
        "sbatch_submissions": len(re.findall(r"submitted with SLURM jobid \d+", log)),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--keep", action="store_true", help="keep the clone and the cluster's state directory")
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        raise SystemExit("bench-slurm-2n: the local cluster runs its daemons as root")

    work = Path(tempfile.mkdtemp(prefix="hpcvirt-slurm2n-"))
    clone, state = work / "clone", work / "state"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    (clone / ".venv").symlink_to(ROOT / ".venv")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env.update(PATH=f"{ROOT / '.venv/bin'}:{env['PATH']}", HPCVIRT_WORKDIR=str(state))
    cluster = ["bash", str(clone / "workflow/scripts/local-slurm.sh")]
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    report = {}
    try:
        t0 = time.monotonic()
        subprocess.run([*cluster, "start", "--nodes", "2", "--cpus-per-node", "2"], env=env, check=True,
                       capture_output=True, timeout=180)
        report["cluster_start_s"] = round(time.monotonic() - t0, 1)
        report["slurm"] = run_study(clone, env, "workflow/profiles/slurm", f"bench2n-slurm-{stamp}",
                                    "local-slurm-2n", [])
    finally:
        t0 = time.monotonic()
        subprocess.run([*cluster, "stop"], env=env, capture_output=True, timeout=180)
        report["cluster_stop_s"] = round(time.monotonic() - t0, 1)
    # the bridge offers more than the two Slurm nodes (the suites, the applications): the same experiments only
    ran = set(pd.read_csv(clone / f"data/results/bench2n-slurm-{stamp}/local-slurm-2n/tidy.csv")["benchmark"])
    same = {"experiments": {b.experiment: {"enabled": False} for b in REGISTRY if b.name not in ran}}
    (clone / "config/bench-same.yaml").write_text(json.dumps(same))
    report["local"] = run_study(clone, env, "workflow/profiles/default", f"bench2n-local-{stamp}", "bridge",
                                ["config/bench-same.yaml"])
    s, lo = report["slurm"], report["local"]
    report["slurm_minus_local_per_measurement_s"] = round(
        s["wall_per_measurement_s"] - lo["wall_per_measurement_s"], 2)
    print(json.dumps(report, indent=2))
    print(f"bench-slurm-2n: through Slurm {s['wall_s']:.0f} s for {s['measurements']} measurements "
          f"({s['sbatch_submissions']} sbatch), local executor {lo['wall_s']:.0f} s for {lo['measurements']}; "
          f"between two measurements {s['gap_between_measurements_median_s']} s in the allocation vs "
          f"{lo['gap_between_measurements_median_s']} s locally (median)")
    if not args.keep:
        subprocess.run(["rm", "-rf", str(work)], check=False)
    else:
        print(f"bench-slurm-2n: kept {work}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
