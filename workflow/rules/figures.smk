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


rule figure_npb:
    input:
        summary=f"data/results/{CAMPAIGN}/summary.csv",
    output:
        pdf="paper/figures/npb.pdf",
    log:
        notebook="logs/notebooks/04-npb.ipynb",
    notebook:
        "../../notebooks/04-npb.ipynb"


rule figure_npbnorm:
    input:
        tidy=expand(
            "data/results/{campaign}/{testbed}/tidy.csv",
            campaign=CAMPAIGN,
            testbed=STUDY["testbeds"],
        ),
    output:
        pdf="paper/figures/npbnorm.pdf",
    log:
        notebook="logs/notebooks/05-npbnorm.ipynb",
    notebook:
        "../../notebooks/05-npbnorm.ipynb"


rule figure_osu:
    input:
        summary=f"data/results/{CAMPAIGN}/summary.csv",
    output:
        pdf="paper/figures/osu.pdf",
    log:
        notebook="logs/notebooks/06-osu.ipynb",
    notebook:
        "../../notebooks/06-osu.ipynb"


rule figure_agreement:
    input:
        tidy=expand(
            "data/results/{campaign}/{testbed}/tidy.csv",
            campaign=CAMPAIGN,
            testbed=STUDY["testbeds"],
        ),
    output:
        pdf="paper/figures/agreement.pdf",
    log:
        notebook="logs/notebooks/07-agreement.ipynb",
    params:
        latency_bytes=STUDY["paper"]["latency_bytes"],
    notebook:
        "../../notebooks/07-agreement.ipynb"


rule figure_commprof:
    input:
        summary=f"data/results/{CAMPAIGN}/summary.csv",
    output:
        pdf="paper/figures/commprof.pdf",
    log:
        notebook="logs/notebooks/08-commprof.ipynb",
    notebook:
        "../../notebooks/08-commprof.ipynb"
