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
    # under Slurm: the testbed's partition, account and qos (a site has no partition "local")
    resources:
        slurm_partition=post_slurm("slurm_partition"),
        slurm_account=post_slurm("slurm_account"),
        qos=post_slurm("qos"),
    script:
        "../scripts/parse.py"
