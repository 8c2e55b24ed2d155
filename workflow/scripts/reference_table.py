"""Snakemake adapter: the table of values the five studies reported."""

from pathlib import Path

from hpcvirt.atomic import write_text
from hpcvirt.reference import load_reference, reference_table_tex

snakemake = globals()["snakemake"]
df = load_reference(Path(snakemake.input[0]).parent)
write_text(snakemake.output[0], reference_table_tex(df))
