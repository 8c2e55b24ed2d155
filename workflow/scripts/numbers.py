"""Snakemake adapter: the paper's numbers (LaTeX macros) and results table."""

import json

import pandas as pd

from hpcvirt import numbers
from hpcvirt.atomic import write_text
from hpcvirt.paper import commprof_tex, numbers_tex, streams_tex
from hpcvirt.tables import apps_tex, overheads_tex, placement_tex, results_table_tex
from hpcvirt.views import VIEWS

snakemake = globals()["snakemake"]
with open(snakemake.log[0], "w") as log:
    summary = pd.read_csv(snakemake.input.summary, keep_default_na=False, na_values=[""])
    tidy = pd.concat([pd.read_csv(p) for p in snakemake.input.tidy], ignore_index=True)
    # Host facts of the first testbed (the embedded default describes this machine).
    records = []
    for path in snakemake.input.hosts:
        with open(path) as fh:
            records.append(json.load(fh))
    hosts = records[0]
    latency_bytes = int(snakemake.params.latency_bytes)
    place_macros, place_table = placement_tex(summary, tidy)
    # the views' own macros and tables (hpcvirt.benchmarks.View: macros, tex)
    view_params = {"latency_bytes": latency_bytes}
    view_macros = "".join(v.macros(summary, tidy, **{p: view_params[p] for p in v.params})
                          for v in VIEWS if v.macros)
    write_text(
        snakemake.output.numbers,
        numbers_tex(summary, tidy, latency_bytes=latency_bytes, hosts=hosts,
                    quick_look=bool(snakemake.params.quick_look))
        + numbers.tex(tidy, numbers.load(snakemake.input.declared), latency_bytes=latency_bytes,
                      ambiguous=lambda msg: print(f"not written: {msg}", file=log)) + place_macros
        + view_macros + commprof_tex(summary) + streams_tex(tidy),
    )
    for v in VIEWS:
        if v.tex:
            write_text(snakemake.output[f"{v.name}_table"],
                       v.tex(summary, tidy, **{p: view_params[p] for p in v.params}))
    write_text(snakemake.output.apps, apps_tex(tidy))
    write_text(snakemake.output.overheads, overheads_tex(tidy, latency_bytes=latency_bytes))
    write_text(snakemake.output.placement, place_table)
    write_text(snakemake.output.table, results_table_tex(summary, latency_bytes=latency_bytes))
    print("written", file=log)
