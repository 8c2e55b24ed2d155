"""Snakemake adapter: one interleaved round on a qemu testbed (see hpcvirt.measure.run_round)."""

import sys
import traceback

from hpcvirt import matrix, progress
from hpcvirt.config import load_study
from hpcvirt.measure import run_round

snakemake = globals()["snakemake"]
w = snakemake.wildcards
terminal = sys.stderr
with open(snakemake.log[0], "w") as log:
    sys.stderr = log
    try:
        study, testbeds = load_study(snakemake.config)
        study = dict(study, campaign=w.campaign)
        name, rep = snakemake.params.testbed, int(w.rep)
        order = [c for c, r in matrix.schedule(study) if r == rep and c.testbed == name]
        items = [(c, matrix.raw_path(w.campaign, c, rep), matrix.raw_path(w.campaign, c, rep, "json")) for c in order]
        run_round(study, testbeds[name], items, rep)
    except BaseException as exc:
        # the error (e.g. a guest's console tail) belongs in the round's log and on the terminal
        traceback.print_exc(file=log)
        print(f"round {w.rep} on {snakemake.params.testbed}: {exc}", file=terminal)
        sys.exit(1)
    finally:
        sys.stderr = terminal
line = progress.status(study, progress.archived_campaign())
if line:
    print(f"hpcvirt: {line}", flush=True)
