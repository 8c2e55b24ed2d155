# Figures are drawn by notebooks that read only their views (or one table of
# a companion campaign).  One rule figure_<name> per declaration of
# workflow/figures.yaml (hpcvirt.figures): its notebook, what it reads, its
# parameters and its report caption, with labels read from what it reads
# when the report is made (figure_png).  The notebook runs in a process forked
# from one that imported pandas, matplotlib and seaborn once (hpcvirt.localjobs:
# no Jupyter kernel and no new interpreter, which would cost more than the
# drawing) and is written, executed, as the log; it is an input, so an edited
# notebook redraws its figure.  The paper asks only
# for the figures the campaign has data for (PAPER_FIGURES); a companion
# campaign's figure exists when the paper names the campaign.
for fig in FIGURE_RULES:

    rule:
        name:
            f"figure_{fig.name}"
        input:
            **figure_inputs(fig),
            notebook=f"notebooks/{fig.notebook}.ipynb",
        output:
            pdf=f"paper/figures/{fig.name}.pdf",
            png=figure_png(fig),
        log:
            notebook=f"logs/notebooks/{fig.notebook}.ipynb",
        localrule: True
        params:
            **figure_params(fig),
        run:
            localjobs.notebook(input.notebook, input, output, params, log)


# The views the figures draw (hpcvirt.views): one job computes them all from
# the campaign's tables, in a second; a figure's notebook reads only its views.
rule views:
    input:
        summary=f"data/results/{CAMPAIGN}/summary.csv",
        tidy=expand(
            "data/results/{campaign}/{testbed}/tidy.csv",
            campaign=CAMPAIGN,
            testbed=STUDY["testbeds"],
        ),
    output:
        [view_csv(v.name) for v in views.VIEWS],
    log:
        "logs/figures/views.log",
    # first: ten figures wait for it
    priority: 10
    localrule: True
    params:
        code=DERIVING_CODE,
        latency_bytes=STUDY["paper"]["latency_bytes"],
    run:
        localjobs.script(f"{SCRIPTS}/views.py", input, output, params, log)


# The studies' own figures redrawn with the values they report beside this
# campaign's (the redraw declarations of data/reference/reproduction.yaml,
# hpcvirt.redraw): one job draws them all, from the tidy tables only.
rule study_figures:
    input:
        summary=f"data/results/{CAMPAIGN}/summary.csv",
        tidy=expand(
            "data/results/{campaign}/{testbed}/tidy.csv",
            campaign=CAMPAIGN,
            testbed=STUDY["testbeds"],
        ),
        reference=expand("data/reference/{study}.csv", study=claims.STUDIES),
        reproduction="data/reference/reproduction.yaml",
    output:
        pdf=[f"paper/figures/{name}.pdf" for name in STUDY_FIGURES],
        png=[study_figure_png(name) for name in STUDY_FIGURES],
    log:
        "logs/figures/study_figures.log",
    # a paper build starts its longest jobs right after the views the figures wait for
    priority: 5
    params:
        code=DERIVING_CODE,
    run:
        localjobs.script(f"{SCRIPTS}/redraw.py", input, output, params, log)
