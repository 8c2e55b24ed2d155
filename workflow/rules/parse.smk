# Raw outputs -> tidy rows (one schema for every suite).


rule parse:
    input:
        raw_outputs_of_testbed,
    output:
        tidy="data/results/{campaign}/{testbed}/tidy.csv",
        rejected="data/results/{campaign}/{testbed}/rejected.csv",
        provenance="data/results/{campaign}/{testbed}/provenance.json",
    log:
        "logs/parse/{campaign}/{testbed}.log",
    script:
        "../scripts/parse.py"
