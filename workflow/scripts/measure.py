"""Snakemake adapter: run one measurement (see hpcvirt.measure)."""

import sys

from hpcvirt import matrix, progress
from hpcvirt.config import load_study
from hpcvirt.measure import run_measurement

snakemake = globals()["snakemake"]
w = snakemake.wildcards
with open(snakemake.log[0], "w") as log:
    sys.stderr = log
    study, testbeds = load_study(snakemake.config)
    study = dict(study, campaign=w.campaign)
    config = matrix.find(study, w.testbed, w.benchmark, w.params)
    rec = run_measurement(
        study, testbeds[w.testbed], config, int(w.rep), snakemake.output.raw, snakemake.output.prov
    )
    print(f"ok: {rec['context']['run_id']} exit {rec['exit_code']}", file=log)
# progress for the person at the terminal: done / all, and what the rest took in the archive
line = progress.status(study, progress.archived_campaign())
if line:
    print(f"hpcvirt: {line}", flush=True)
