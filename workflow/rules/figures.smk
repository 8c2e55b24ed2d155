# Figures are drawn by notebooks that read only the aggregated tables.


rule figure_pingpong:
    input:
        summary=f"data/results/{CAMPAIGN}/summary.csv",
    output:
        pdf="paper/figures/pingpong.pdf",
    log:
        notebook="logs/notebooks/01-pingpong.ipynb",
    notebook:
        "../../notebooks/01-pingpong.ipynb"
