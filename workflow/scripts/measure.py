"""Snakemake adapter: run one measurement (see hpcvirt.measure)."""

from hpcvirt import matrix, progress
from hpcvirt.config import load_study
from hpcvirt.measure import job_log, run_measurement

snakemake = globals()["snakemake"]
w = snakemake.wildcards
with job_log(snakemake.log[0], f"measurement {w.testbed}/{w.benchmark}/{w.params}/rep-{w.rep}") as log:
    study, testbeds = load_study(snakemake.config)
    study = dict(study, campaign=w.campaign)
    config = matrix.find(study, w.testbed, w.benchmark, w.params)
    rec = run_measurement(
        study, testbeds[w.testbed], config, int(w.rep), snakemake.output.raw, snakemake.output.prov
    )
    print(f"ok: {rec['context']['run_id']} exit {rec['exit_code']}", file=log)
progress.report(study)
