# Figures are drawn by notebooks that read only the aggregated tables.  One
# rule per figure declaration of hpcvirt.figures (figure_<name> writes
# paper/figures/<name>.pdf); the paper asks only for the figures the
# campaign has data for (PAPER_FIGURES).


rule figure_pingpong:
    input:
        summary=f"data/results/{CAMPAIGN}/summary.csv",
    output:
        pdf="paper/figures/pingpong.pdf",
    log:
        notebook="logs/notebooks/01-pingpong.ipynb",
    notebook:
        "../../notebooks/01-pingpong.ipynb"


rule figure_datapaths:
    input:
        summary=f"data/results/{CAMPAIGN}/summary.csv",
    output:
        pdf="paper/figures/datapaths.pdf",
    log:
        notebook="logs/notebooks/02-datapaths.ipynb",
    params:
        latency_bytes=STUDY["paper"]["latency_bytes"],
    notebook:
        "../../notebooks/02-datapaths.ipynb"


rule figure_placement:
    input:
        summary=f"data/results/{CAMPAIGN}/summary.csv",
    output:
        pdf="paper/figures/placement.pdf",
    log:
        notebook="logs/notebooks/03-placement.ipynb",
    notebook:
        "../../notebooks/03-placement.ipynb"
