# hpcvirt: native vs virtualized HPC communication study.
# Thin entry point: configuration, rule files, default target.  No logic here.
from snakemake.utils import min_version

min_version("9.0")


# The study files are checked before they are loaded (no rules).
include: "workflow/rules/inputs.smk"


configfile: "config/config.yaml"


# The HTML report's front page (snakemake --report, `make report`).
report: "workflow/report/workflow.rst"


# The software of every rule, for --software-deployment-method apptainer
# (build: see containers/workflow.def).  Without that flag the host
# environment installed by workflow/scripts/install-deps.sh is used.
container: "containers/workflow.sif"


include: "workflow/rules/common.smk"
include: "workflow/rules/software.smk"
include: "workflow/rules/run.smk"
include: "workflow/rules/parse.smk"
include: "workflow/rules/aggregate.smk"
include: "workflow/rules/figures.smk"
include: "workflow/rules/paper.smk"


rule all:
    default_target: True
    input:
        "paper/main.pdf",
        MISSING_RAW,
