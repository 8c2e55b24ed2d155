# Measurements: one job per configuration and repetition.


rule measure:
    output:
        raw=protected(
            "data/raw/{campaign}/{testbed}/{benchmark}/{params}/rep-{rep}.out"
        ),
        prov="data/raw/{campaign}/{testbed}/{benchmark}/{params}/rep-{rep}.json",
    log:
        "logs/measure/{campaign}/{testbed}/{benchmark}/{params}/rep-{rep}.log",
    priority: measurement_priority
    # A measurement owns the whole machine: never two at once, whatever --cores says.
    threads: workflow.cores
    resources:
        benchmark=1,
    message:
        "measure {wildcards.testbed}/{wildcards.benchmark}/{wildcards.params} repetition {wildcards.rep}"
    script:
        "../scripts/measure.py"
