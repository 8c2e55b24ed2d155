"""Snakemake adapter: medians and confidence intervals per configuration and size."""

import pandas as pd

from hpcvirt.analysis import summarize_tidy
from hpcvirt.atomic import write_csv

snakemake = globals()["snakemake"]
with open(snakemake.log[0], "w") as log:
    tidy = pd.concat([pd.read_csv(p) for p in snakemake.input], ignore_index=True)
    summary = summarize_tidy(tidy)
    print(f"{len(summary)} summary rows from {len(tidy)} tidy rows", file=log)
    write_csv(snakemake.output.summary, summary)
