# Raw outputs -> tidy rows (one schema for every suite).


rule parse:
    input:
        raw_outputs_of_testbed,
    output:
        tidy=report(
            "data/results/{campaign}/{testbed}/tidy.csv",
            caption="../report/table.rst",
            category="Tables",
            labels={
                "table": "tidy rows",
                "testbed": "{testbed}",
                "campaign": "{campaign}",
            },
        ),
        rejected=report(
            "data/results/{campaign}/{testbed}/rejected.csv",
            caption="../report/table.rst",
            category="Tables",
            labels={
                "table": "rejected outputs",
                "testbed": "{testbed}",
                "campaign": "{campaign}",
            },
        ),
        provenance="data/results/{campaign}/{testbed}/provenance.json",
        # the raw outputs parsed and their sha256 (hpcvirt.manifest)
        manifest="data/results/{campaign}/{testbed}/manifest.json",
    log:
        "logs/parse/{campaign}/{testbed}.log",
    wildcard_constraints:
        campaign=PARSED_CAMPAIGN,
    script:
        "../scripts/parse.py"
