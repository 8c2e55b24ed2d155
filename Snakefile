# hpcvirt: native vs virtualized HPC communication study.
# Thin entry point: configuration, rule files, default target.  No logic here.
from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/run.smk"
include: "workflow/rules/parse.smk"
include: "workflow/rules/aggregate.smk"
include: "workflow/rules/figures.smk"
include: "workflow/rules/paper.smk"


rule all:
    default_target: True
    input:
        "paper/main.pdf",
