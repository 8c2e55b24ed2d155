"""Snakemake adapter: the data paths' campaign (config key
paper.datapaths_campaign: the paper's companion campaign, or the campaign
`make` measured) as Richter et al.'s Table 1 beside ours
and a table of what each data path costs (hpcvirt.richter), and the paper's
macros and tables (hpcvirt.companions.datapaths_tex)."""

import pandas as pd
import yaml

from hpcvirt.atomic import write_csv, write_text
from hpcvirt.companions import datapaths_tex
from hpcvirt.reference import load_reference
from hpcvirt.richter import datapath_table, richter_table

snakemake = globals()["snakemake"]
with open(snakemake.log[0], "w") as log:
    latency_bytes = int(snakemake.params.latency_bytes)
    if not snakemake.params.campaign:
        write_text(snakemake.output.tex, datapaths_tex(None, campaign=""))
        print("no data-path campaign (paper.datapaths_campaign is empty)", file=log)
    else:
        tidy = pd.concat([pd.read_csv(p, keep_default_na=False, na_values=[""]) for p in snakemake.input.tidy],
                         ignore_index=True)
        reference = load_reference(snakemake.params.reference_dir)
        with open(snakemake.input.reproduction) as fh:
            reasons = (yaml.safe_load(fh).get("richter2015") or {}).get("testbeds") or {}
        table = richter_table(tidy, reference, reasons)
        paths = datapath_table(tidy, latency_bytes=latency_bytes)
        print(f"{len(table)} rows of Table 1, {len(paths)} data paths, from {len(tidy)} tidy rows", file=log)
        write_csv(snakemake.output.richter, table)
        write_csv(snakemake.output.paths, paths)
        write_text(snakemake.output.tex, datapaths_tex(table, paths, campaign=snakemake.params.campaign,
                                                       latency_bytes=latency_bytes, own=bool(snakemake.params.own)))
