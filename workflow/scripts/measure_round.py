"""Snakemake adapter: one interleaved round on a qemu testbed (see hpcvirt.measure.run_round)."""

from hpcvirt import matrix, progress
from hpcvirt.config import load_study
from hpcvirt.measure import job_log, run_round

snakemake = globals()["snakemake"]
w = snakemake.wildcards
name, rep = snakemake.params.testbed, int(w.rep)
with job_log(snakemake.log[0], f"round {rep} on {name}"):
    study, testbeds = load_study(snakemake.config)
    study = dict(study, campaign=w.campaign)
    order = [c for c, r in matrix.schedule(study) if r == rep and c.testbed == name]
    items = [(c, matrix.raw_path(w.campaign, c, rep), matrix.raw_path(w.campaign, c, rep, "json")) for c in order]
    run_round(study, testbeds[name], items, rep)
progress.report(study)
