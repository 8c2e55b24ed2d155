# Measurements: one job per configuration and repetition.


rule measure:
    input:
        preflight=measurement_preflight,
    output:
        raw=protected(
            "data/raw/{campaign}/{testbed}/{benchmark}/{params}/rep-{rep}.out"
        ),
        prov="data/raw/{campaign}/{testbed}/{benchmark}/{params}/rep-{rep}.json",
    log:
        "logs/measure/{campaign}/{testbed}/{benchmark}/{params}/rep-{rep}.log",
    priority: measurement_priority
    group:
        measurement_group
    # A measurement owns the whole machine: never two at once, whatever --cores says.
    threads: workflow.cores
    resources:
        benchmark=1,
        runtime=measurement_runtime,
        slurm_partition=measurement_slurm_partition,
        slurm_account=measurement_slurm_account,
    message:
        "measure {wildcards.testbed}/{wildcards.benchmark}/{wildcards.params} repetition {wildcards.rep}"
    script:
        "../scripts/measure.py"
