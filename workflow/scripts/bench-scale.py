#!/usr/bin/env python3
"""Benchmark: how the workflow scales to a site's full study.

In a fresh clone of this checkout's HEAD it makes ``--testbeds`` copies of
``config/testbeds/example-site.yaml`` (two-node Slurm testbeds, as a site
would describe its partitions), a study of every experiment of
``config/config.yaml`` on them with enough repetitions for at least
``--measurements`` measurements, and runs the Slurm profile's dry run
(``snakemake --workflow-profile workflow/profiles/slurm -n``) for the whole
campaign up to its summary table.  It reports:

* the number of measurements and of jobs;
* the wall time and peak memory (RSS) of the dry run, i.e. the DAG build a
  real run pays before its first submission;
* the sbatch calls a real run would make: the group jobs of the dry run (one
  allocation per testbed and node count holds ``--group-size`` measurements,
  ``workflow/profiles/slurm``'s ``group-components``);
* the status polling: the Slurm executor asks ``squeue --name <run id>`` for
  all of a run's jobs at once, every ``seconds-between-status-checks`` while
  jobs are active, so the calls per minute do not grow with the measurements.

usage: workflow/scripts/bench-scale.py [--testbeds 3] [--measurements 10000] [--group-size 100000] [--keep]
(run with the project's venv python: .venv/bin/python)
"""

from __future__ import annotations

import argparse
import json
import math
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
# not this script's folder: its numbers.py (a workflow script) would shadow the standard library's
sys.path = [str(ROOT / "workflow/lib")] + [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).parent]

from hpcvirt import matrix  # noqa: E402
from hpcvirt.benchmarks import REGISTRY  # noqa: E402
from hpcvirt.config import load_study  # noqa: E402

GOALS = {"dry_run_s": 20.0}


def study_for(clone: Path, sites: list[str], repetitions: int) -> dict:
    base = yaml.safe_load((clone / "config/config.yaml").read_text())
    exps = base["experiments"]
    for b in REGISTRY:
        exp = exps.setdefault(b.experiment, {})
        exp.pop("by_kind", None)
        if "repetitions" in exp:
            exp["repetitions"] = repetitions
    return {**base, "campaign": "scale", "testbeds": sites, "repetitions": repetitions, "skip_unoffered": True}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--testbeds", type=int, default=3)
    ap.add_argument("--measurements", type=int, default=10_000, help="at least this many")
    ap.add_argument("--group-size", type=int, default=100_000,
                    help="measurements per allocation (group-components <site>.n2=N)")
    ap.add_argument("--keep", action="store_true", help="keep the clone")
    args = ap.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="hpcvirt-scale-"))
    clone = work / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    (clone / ".venv").symlink_to(ROOT / ".venv")
    site = yaml.safe_load((clone / "config/testbeds/example-site.yaml").read_text())
    sites = [f"site{chr(ord('a') + i)}" for i in range(args.testbeds)]
    for name in sites:
        (clone / f"config/testbeds/{name}.yaml").write_text(yaml.safe_dump({**site, "name": name}))

    # repetitions for at least --measurements measurements
    one = study_for(clone, sites, 1)
    loaded, _ = load_study(one, testbed_dir=clone / "config/testbeds")
    per_round = len(matrix.all_raw_paths(loaded))
    reps = max(1, math.ceil(args.measurements / per_round))
    study = study_for(clone, sites, reps)
    loaded, _ = load_study(study, testbed_dir=clone / "config/testbeds")
    measurements = len(matrix.all_raw_paths(loaded))
    (clone / "config/scale.yaml").write_text(yaml.safe_dump(study))

    # the target first: the list options (--configfile, --quiet, --group-components) take every word after them
    argv = [str(ROOT / ".venv/bin/snakemake"), "data/results/scale/summary.csv", "--workflow-profile",
            "workflow/profiles/slurm", "-n", "--configfile", "config/scale.yaml", "--quiet", "rules",
            "--group-components", *(f"{s}.n2={args.group_size}" for s in sites)]
    # --quiet rules: the job list without the per-job blocks (a site's dry run prints no 10,000 blocks either)
    print(f"bench-scale: {args.testbeds} testbeds x {per_round} measurements per round x {reps} rounds "
          f"= {measurements} measurements; dry run in {clone}", flush=True)
    t0 = time.monotonic()
    cp = subprocess.run(["/usr/bin/time", "-f", "%M", *argv], cwd=clone, capture_output=True, text=True)
    wall = time.monotonic() - t0
    if cp.returncode != 0:
        print(cp.stdout[-3000:], cp.stderr[-3000:], file=sys.stderr)
        return cp.returncode
    peak_kib = int(cp.stderr.strip().splitlines()[-1])
    out = cp.stdout + cp.stderr
    # the job stats table: "<rule>  <count>" lines, "total" last
    jobs = {m.group(1): int(m.group(2)) for m in re.finditer(r"^([a-z_]+)\s+(\d+)\s*$", out, re.M)}
    # a second dry run that prints the job blocks: count the group jobs (one sbatch each)
    full = subprocess.run([a for a in argv if a not in ("--quiet", "rules")], cwd=clone, capture_output=True,
                          text=True)
    groups = len(re.findall(r"Group job \S+ \(jobs", full.stdout + full.stderr))
    profile = yaml.safe_load((clone / "workflow/profiles/slurm/config.yaml").read_text())
    interval = float(profile.get("seconds-between-status-checks", 40))
    report = {
        "testbeds": args.testbeds, "repetitions": reps, "measurements": measurements,
        "measure_jobs": jobs.get("measure"), "jobs": jobs.get("total"),
        "dry_run_s": round(wall, 1), "peak_rss_mib": round(peak_kib / 1024),
        "sbatch_calls": groups, "allocations_per_testbed_and_node_count": math.ceil(
            measurements / args.testbeds / args.group_size),
        "status_calls_per_min_max": round(60 / interval, 1), "status_call": "squeue --name <run id> (all jobs)",
        "goals": {"dry_run_s": GOALS["dry_run_s"], "sbatch_calls": args.testbeds},
        "self_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }
    print(json.dumps(report, indent=2))
    ok = wall <= GOALS["dry_run_s"] and groups <= args.testbeds
    print(f"bench-scale: dry run {wall:.1f} s (goal <= {GOALS['dry_run_s']:.0f} s), {groups} sbatch calls "
          f"(goal <= {args.testbeds}: one per testbed and node count), at most {60 / interval:.0f} status calls "
          f"per minute whatever the number of measurements: {'goals met' if ok else 'GOAL MISSED'}")
    if not args.keep:
        subprocess.run(["rm", "-rf", str(work)], check=False)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
