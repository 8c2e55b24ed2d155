"""Snakemake adapter: run one measurement (see hpcvirt.measure)."""

import sys
import traceback

from hpcvirt import matrix, progress
from hpcvirt.config import load_study
from hpcvirt.measure import run_measurement

snakemake = globals()["snakemake"]
w = snakemake.wildcards
terminal = sys.stderr
with open(snakemake.log[0], "w") as log:
    sys.stderr = log
    try:
        study, testbeds = load_study(snakemake.config)
        study = dict(study, campaign=w.campaign)
        config = matrix.find(study, w.testbed, w.benchmark, w.params)
        rec = run_measurement(
            study, testbeds[w.testbed], config, int(w.rep), snakemake.output.raw, snakemake.output.prov
        )
        print(f"ok: {rec['context']['run_id']} exit {rec['exit_code']}", file=log)
    except BaseException as exc:
        # the error belongs in the job's log and on the terminal (not lost with the redirected stderr)
        traceback.print_exc(file=log)
        print(f"measurement {w.testbed}/{w.benchmark}/{w.params}/rep-{w.rep}: {exc}", file=terminal)
        sys.exit(1)
    finally:
        sys.stderr = terminal
# progress for the person at the terminal: done / all, and what the rest took in the archive
line = progress.status(study, progress.archived_campaign())
if line:
    print(f"hpcvirt: {line}", flush=True)
