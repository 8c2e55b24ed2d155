"""Snakemake adapter: parse the raw outputs of one testbed into the tidy table."""

from pathlib import Path

from hpcvirt import manifest
from hpcvirt.analysis import host_summary, parse_outputs
from hpcvirt.atomic import write_csv, write_json

snakemake = globals()["snakemake"]
raw = [str(p) for p in snakemake.input]
with open(snakemake.log[0], "w") as log:
    tidy, rejected = parse_outputs(raw)
    for row in rejected.itertuples():
        print(f"REJECTED {row.raw_path}: {row.reason}", file=log)
    runs = tidy["run_id"].nunique() if len(tidy) else 0
    print(f"{len(tidy)} rows from {runs} runs; {len(rejected)} outputs rejected", file=log)
    write_json(snakemake.output.provenance, host_summary([str(Path(p).with_suffix(".json")) for p in raw]))
    write_csv(snakemake.output.rejected, rejected)
    write_csv(snakemake.output.tidy, tidy)
    manifest.write(snakemake.output.manifest, raw)
