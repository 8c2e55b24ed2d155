"""Snakemake adapter: one interleaved round on a qemu testbed (see hpcvirt.measure.run_round)."""

import sys

from hpcvirt import matrix, progress
from hpcvirt.config import load_study
from hpcvirt.measure import run_round

snakemake = globals()["snakemake"]
w = snakemake.wildcards
with open(snakemake.log[0], "w") as log:
    sys.stderr = log
    study, testbeds = load_study(snakemake.config)
    study = dict(study, campaign=w.campaign)
    name, rep = snakemake.params.testbed, int(w.rep)
    order = [c for c, r in matrix.schedule(study) if r == rep and c.testbed == name]
    items = [(c, matrix.raw_path(w.campaign, c, rep), matrix.raw_path(w.campaign, c, rep, "json")) for c in order]
    run_round(study, testbeds[name], items, rep)
line = progress.status(study, progress.archived_campaign())
if line:
    print(f"hpcvirt: {line}", flush=True)
