"""Snakemake adapter: one campaign's verdicts on the studies' claims
(hpcvirt.claims), without their stability, which the paper's campaign
computes from these tables of the study's other campaigns."""

import pandas as pd

from hpcvirt import claims, provenance
from hpcvirt.atomic import write_text

snakemake = globals()["snakemake"]
with open(snakemake.log[0], "w") as log:
    entries = claims.load(snakemake.input.claims, snakemake.input.claims_md)
    tidy = pd.concat([pd.read_csv(p) for p in snakemake.input.tidy], ignore_index=True)
    verdicts = claims.evaluate(entries, tidy, snakemake.params.campaign,
                               caches=provenance.testbed_caches(snakemake.input.hosts))
    write_text(snakemake.output.verdicts, verdicts.to_csv(index=False))
    print(f"{snakemake.params.campaign}: {len(tidy)} rows, {verdicts['claim'].nunique()} claims", file=log)
