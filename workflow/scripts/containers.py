"""Snakemake adapter: the container-versus-bare-host campaign (the paper's
companion campaign, config key paper.containers_campaign) as a tidy table of
paired ratios and the paper's macros and table (hpcvirt.analysis.container_ratios,
hpcvirt.companions.containers_tex)."""

import json
from pathlib import Path

import pandas as pd

from hpcvirt.analysis import bare_host_peaks, container_ratios
from hpcvirt.atomic import write_csv, write_text
from hpcvirt.companions import containers_tex, host_cores
from hpcvirt.compare import host_line

snakemake = globals()["snakemake"]
with open(snakemake.log[0], "w") as log:
    latency_bytes = int(snakemake.params.latency_bytes)
    if not snakemake.params.campaign:
        # no companion campaign configured: the section says so
        write_text(snakemake.output.tex, containers_tex(None, campaign="", latency_bytes=latency_bytes))
        print("no container campaign (paper.containers_campaign is empty)", file=log)
    else:
        tidy = pd.concat([pd.read_csv(p, keep_default_na=False, na_values=[""]) for p in snakemake.input.tidy],
                         ignore_index=True)
        ratios = container_ratios(tidy, latency_bytes=latency_bytes)
        print(f"{len(ratios)} ratios from {len(tidy)} tidy rows", file=log)
        # the runtimes' versions as the campaign's preflight records them
        # and the image each ran (digest) with the Spack lock its suites were installed from
        versions, images = {}, {}
        for path in snakemake.params.preflights:
            pf = json.loads(Path(path).read_text())
            rt = pf.get("container_runtime") or {}
            if rt.get("version"):
                versions[rt.get("kind", "apptainer")] = str(rt["version"])
            if pf.get("image_digest") and (pf.get("runtime") or {}).get("kind"):
                images[pf["runtime"]["kind"]] = {"digest": pf["image_digest"], "image": pf.get("image", ""),
                                                 **{k: (pf.get("image_suites") or {}).get(k, "")
                                                    for k in ("lock", "lock_sha256")}}
        print(f"versions: {versions}; images: {images}", file=log)
        write_csv(snakemake.output.ratios, ratios)
        write_text(snakemake.output.tex, containers_tex(ratios, campaign=snakemake.params.campaign,
                                                        latency_bytes=latency_bytes, versions=versions, images=images,
                                                        bare_peaks=bare_host_peaks(tidy),
                                                        cores=host_cores([json.loads(Path(p).read_text())
                                                                          for p in snakemake.input.hosts]),
                                                        host=host_line(snakemake.input.hosts)))
