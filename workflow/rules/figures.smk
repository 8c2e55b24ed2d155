# Figures are drawn by notebooks that read only the aggregated tables.  One
# rule per figure declaration (hpcvirt.figures) that the campaign has data
# for: figure_<name> writes paper/figures/<name>.pdf.


for _fig in PAPER_FIGURES:

    rule:
        name:
            f"figure_{_fig.name}"
        input:
            summary=f"data/results/{CAMPAIGN}/summary.csv",
        output:
            pdf=f"paper/figures/{_fig.name}.pdf",
        log:
            notebook=f"logs/notebooks/{_fig.notebook}.ipynb",
        params:
            latency_bytes=STUDY["paper"]["latency_bytes"],
        notebook:
            f"../../notebooks/{_fig.notebook}.ipynb"
