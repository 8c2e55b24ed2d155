"""Snakemake adapter: one interleaved round on a qemu testbed (see hpcvirt.measure.run_round)."""

from hpcvirt import matrix, progress
from hpcvirt.config import load_study
from hpcvirt.measure import job_log, run_round

snakemake = globals()["snakemake"]
w, par = snakemake.wildcards, snakemake.params
# the round and campaign: wildcards, or (a round that has some of its outputs) fixed by the rule
name, rep, campaign = par.testbed, int(par.get("rep", None) or w.rep), par.get("campaign", None) or w.campaign
with job_log(snakemake.log[0], f"round {rep} on {name}"):
    study, testbeds = load_study(snakemake.config)
    study = dict(study, campaign=campaign)
    order = [c for c, r in matrix.schedule(study) if r == rep and c.testbed == name]
    # a finished measurement (raw output and provenance there) is not measured again (run_round skips it)
    items = [(c, matrix.raw_path(campaign, c, rep), matrix.raw_path(campaign, c, rep, "json")) for c in order]
    run_round(study, testbeds[name], items, rep)
progress.report(study)
