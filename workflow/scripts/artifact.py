"""Snakemake adapter: the artifact appendix from the campaign's provenance
records and claim verdicts (hpcvirt.artifact)."""

import pandas as pd

from hpcvirt import artifact
from hpcvirt.atomic import write_text

snakemake = globals()["snakemake"]
with open(snakemake.log[0], "w") as log:
    verdicts = pd.read_csv(snakemake.input.verdicts)
    tex = artifact.artifact_tex(snakemake.params.campaign, snakemake.params.raw_root, verdicts)
    write_text(snakemake.output[0], tex)
    print(f"{snakemake.output[0]}: {len(tex)} characters", file=log)
