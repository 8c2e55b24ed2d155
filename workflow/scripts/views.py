"""Snakemake adapter: the figures' views of the campaign (hpcvirt.views),
computed from its summary and tidy tables, one CSV each."""

from pathlib import Path

from hpcvirt import views

snakemake = globals()["snakemake"]
with open(snakemake.log[0], "w") as log:
    outputs = {Path(p).stem: p for p in snakemake.output}
    views.write_all(snakemake.input.summary, snakemake.input.tidy, outputs,
                    latency_bytes=int(snakemake.params.latency_bytes))
    print("views: " + ", ".join(outputs), file=log)
