"""Snakemake adapter: the studies' figures redrawn with their reported values
(hpcvirt.redraw), from the campaign's tables."""

from pathlib import Path

import pandas as pd

from hpcvirt import redraw
from hpcvirt.figures import partial, publish
from hpcvirt.labels import for_accel, guests_accel

snakemake = globals()["snakemake"]
with open(snakemake.log[0], "w") as log:
    ref, drawings = redraw.load(Path(snakemake.input.reproduction).parent)
    summary = pd.read_csv(snakemake.input.summary, keep_default_na=False, na_values=[""])
    tidy = pd.concat([pd.read_csv(p) for p in snakemake.input.tidy], ignore_index=True)
    pdfs = {Path(p).stem: p for p in snakemake.output.pdf}
    pngs = {Path(p).stem: p for p in snakemake.output.png}
    accel = guests_accel(tidy)
    for study, figure, d in drawings:
        name, d = redraw.pdf_name(study, d), for_accel(d, accel)
        tcg = redraw.draw(d, study, summary, tidy, ref, partial(pdfs[name]))
        publish(partial(pdfs[name]), pdfs[name], pngs[name])
        print(f"{name}: {study} {figure} ({d['layout']}){' with guests under TCG' if tcg else ''}", file=log)
