"""Snakemake adapter: the paper parts this campaign has data for (see hpcvirt.paper.parts_tex)."""

from pathlib import Path

import pandas as pd

from hpcvirt.atomic import write_text
from hpcvirt.paper import parts_tex

snakemake = globals()["snakemake"]
with open(snakemake.log[0], "w") as log:
    parts = {Path(p).stem: Path(p).read_text(encoding="utf-8") for p in snakemake.input.parts}
    # the campaign's numbers, as the numbers rule made them (their names)
    defined = set(pd.read_csv(snakemake.input.numbers, usecols=["macro"])["macro"])
    tex, included, omitted = parts_tex(parts, defined, set(snakemake.params.figures))
    write_text(snakemake.output[0], tex)
    print(f"included: {included}", file=log)
    for name, why in omitted.items():
        print(f"omitted {name}: {why}", file=log)
