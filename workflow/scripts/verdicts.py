"""Snakemake adapter: one campaign's verdicts on the studies' claims
(hpcvirt.claims), without their stability, which the paper's campaign
computes from these tables of the study's other campaigns."""

from hpcvirt import claims
from hpcvirt.atomic import write_text

snakemake = globals()["snakemake"]
with open(snakemake.log[0], "w") as log:
    entries = claims.load(snakemake.input.claims, snakemake.input.claims_md)
    tidy, verdicts = claims.evaluate_campaign(entries, snakemake.input.tidy, snakemake.input.hosts,
                                              snakemake.params.campaign)
    write_text(snakemake.output.verdicts, verdicts.to_csv(index=False))
    print(f"{snakemake.params.campaign}: {len(tidy)} rows, {verdicts['claim'].nunique()} claims", file=log)
