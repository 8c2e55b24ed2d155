"""Snakemake adapter: host vs image check and 2-rank wire-up of one
containerized testbed (see hpcvirt.preflight.testbed_preflight)."""

import sys

from hpcvirt.atomic import write_json
from hpcvirt.config import load_study
from hpcvirt.preflight import PreflightError, testbed_preflight

snakemake = globals()["snakemake"]
w = snakemake.wildcards
stderr = sys.stderr
with open(snakemake.log[0], "w") as log:

    def say(msg):
        print(msg, file=log, flush=True)

    study, testbeds = load_study(snakemake.config)
    study = dict(study, campaign=w.campaign)
    try:
        rec = testbed_preflight(study, testbeds[w.testbed], timeout=snakemake.params.timeout, log=say)
    except PreflightError as exc:
        msg = f"preflight of testbed {w.testbed} failed; no benchmark runs on it.\n{exc}"
        say(msg)
        print(msg, file=stderr)
        sys.exit(1)
    write_json(snakemake.output.record, rec)
    say(f"ok: {snakemake.output.record}")
