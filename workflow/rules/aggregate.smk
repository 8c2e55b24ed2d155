# Tidy rows -> medians and nonparametric confidence intervals.


rule aggregate:
    input:
        tidy_tables,
    output:
        summary=report(
            "data/results/{campaign}/summary.csv",
            caption="../report/table.rst",
            category="Tables",
            labels={
                "table": "summary (medians, CIs)",
                "testbed": "all",
                "campaign": "{campaign}",
            },
        ),
    log:
        "logs/aggregate/{campaign}.log",
    # first when a paper is built: the views and tables wait for it
    priority: 10
    # under Slurm: the partition, account and qos of the study's Slurm testbed
    resources:
        slurm_partition=post_slurm("slurm_partition"),
        slurm_account=post_slurm("slurm_account"),
        qos=post_slurm("qos"),
    params:
        code=DERIVING_CODE,
    script:
        "../scripts/aggregate.py"
