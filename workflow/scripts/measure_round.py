"""Snakemake adapter: one interleaved round on a qemu testbed (see hpcvirt.measure.run_round)."""

from pathlib import Path

from hpcvirt import matrix, progress
from hpcvirt.config import load_study
from hpcvirt.measure import job_log, run_round

snakemake = globals()["snakemake"]
w, name = snakemake.wildcards, snakemake.params.testbed
# the round and campaign: wildcards, or (a round that has some of its outputs: a rule of its own)
# from its outputs' paths, data/raw/<campaign>/<testbed>/<benchmark>/<params>/rep-<rep>.out
if "rep" in w.keys():
    rep, campaign = int(w.rep), w.campaign
else:
    out = Path(snakemake.output.raw[0])
    rep, campaign = int(out.stem.removeprefix("rep-")), out.parts[-5]
with job_log(snakemake.log[0], f"round {rep} on {name}"):
    study, testbeds = load_study(snakemake.config)
    study = dict(study, campaign=campaign)
    order = [c for c, r in matrix.schedule(study) if r == rep and c.testbed == name]
    # a finished measurement (raw output and provenance there) is not measured again (run_round skips it)
    items = [(c, matrix.raw_path(campaign, c, rep), matrix.raw_path(campaign, c, rep, "json")) for c in order]
    run_round(study, testbeds[name], items, rep)
progress.report(study)
