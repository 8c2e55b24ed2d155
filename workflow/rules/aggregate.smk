# Tidy rows -> medians and nonparametric confidence intervals.


rule aggregate:
    input:
        tidy_tables,
    output:
        summary="data/results/{campaign}/summary.csv",
    log:
        "logs/aggregate/{campaign}.log",
    script:
        "../scripts/aggregate.py"
