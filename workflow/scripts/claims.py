"""Snakemake adapter: the studies' claims checked on the campaign (hpcvirt.claims)."""

import sys

import pandas as pd

from hpcvirt import claims
from hpcvirt.atomic import write_text

snakemake = globals()["snakemake"]
with open(snakemake.log[0], "w") as log:
    entries = claims.load(snakemake.input.claims, snakemake.input.claims_md)
    tidy = pd.concat([pd.read_csv(p) for p in snakemake.input.tidy], ignore_index=True)
    verdicts = claims.evaluate(entries, tidy, snakemake.params.campaign)
    problems = claims.check_sentences([*snakemake.input.sections, *snakemake.input.parts], verdicts)
    if problems:
        msg = "hpcvirt.claims: the paper's text no longer matches the data:\n  " + "\n  ".join(problems)
        print(msg, file=log)
        print(msg, file=sys.stderr)
        sys.exit(1)
    write_text(snakemake.output.verdicts, verdicts.to_csv(index=False))
    write_text(snakemake.output.macros, claims.tex_macros(verdicts))
    write_text(snakemake.output.table, claims.tex_table(verdicts))
    print(claims.counts(verdicts).to_string(), file=log)
