# Figures are drawn by notebooks that read only the aggregated tables.
# A notebook job is retried once: a Jupyter kernel that fails to start (it
# happens under load) must not fail the paper.
# Each is registered for the HTML report (snakemake --report, `make report`)
# with a caption (workflow/report/figure.rst, params.what) and labels read
# from the campaign's tables when the report is made (figure_pdf).  One
# rule per figure declaration of hpcvirt.figures (figure_<name> writes
# paper/figures/<name>.pdf); the paper asks only for the figures the
# campaign has data for (PAPER_FIGURES).


rule figure_pingpong:
    input:
        summary=f"data/results/{CAMPAIGN}/summary.csv",
    output:
        pdf=figure_pdf("pingpong"),
    log:
        notebook="logs/notebooks/01-pingpong.ipynb",
    retries: 1
    params:
        what=FIGURE_WHAT["pingpong"],
    notebook:
        "../../notebooks/01-pingpong.ipynb"


rule figure_datapaths:
    input:
        summary=f"data/results/{CAMPAIGN}/summary.csv",
    output:
        pdf=figure_pdf("datapaths"),
    log:
        notebook="logs/notebooks/02-datapaths.ipynb",
    retries: 1
    params:
        what=FIGURE_WHAT["datapaths"],
        latency_bytes=STUDY["paper"]["latency_bytes"],
    notebook:
        "../../notebooks/02-datapaths.ipynb"


rule figure_placement:
    input:
        summary=f"data/results/{CAMPAIGN}/summary.csv",
    output:
        pdf=figure_pdf("placement"),
    log:
        notebook="logs/notebooks/03-placement.ipynb",
    retries: 1
    params:
        what=FIGURE_WHAT["placement"],
    notebook:
        "../../notebooks/03-placement.ipynb"


rule figure_npb:
    input:
        summary=f"data/results/{CAMPAIGN}/summary.csv",
    output:
        pdf=figure_pdf("npb"),
    log:
        notebook="logs/notebooks/04-npb.ipynb",
    retries: 1
    params:
        what=FIGURE_WHAT["npb"],
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
        pdf=figure_pdf("npbnorm"),
    log:
        notebook="logs/notebooks/05-npbnorm.ipynb",
    retries: 1
    params:
        what=FIGURE_WHAT["npbnorm"],
    notebook:
        "../../notebooks/05-npbnorm.ipynb"


rule figure_osu:
    input:
        summary=f"data/results/{CAMPAIGN}/summary.csv",
    output:
        pdf=figure_pdf("osu"),
    log:
        notebook="logs/notebooks/06-osu.ipynb",
    retries: 1
    params:
        what=FIGURE_WHAT["osu"],
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
        pdf=figure_pdf("agreement"),
    log:
        notebook="logs/notebooks/07-agreement.ipynb",
    retries: 1
    params:
        what=FIGURE_WHAT["agreement"],
        latency_bytes=STUDY["paper"]["latency_bytes"],
    notebook:
        "../../notebooks/07-agreement.ipynb"


rule figure_commprof:
    input:
        summary=f"data/results/{CAMPAIGN}/summary.csv",
    output:
        pdf=figure_pdf("commprof"),
    log:
        notebook="logs/notebooks/08-commprof.ipynb",
    retries: 1
    params:
        what=FIGURE_WHAT["commprof"],
    notebook:
        "../../notebooks/08-commprof.ipynb"


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
        [study_figure_pdf(name) for name in STUDY_FIGURES],
    log:
        "logs/figures/study_figures.log",
    script:
        "../scripts/redraw.py"


rule figure_apps:
    input:
        tidy=expand(
            "data/results/{campaign}/{testbed}/tidy.csv",
            campaign=CAMPAIGN,
            testbed=STUDY["testbeds"],
        ),
    output:
        pdf=figure_pdf("apps"),
    log:
        notebook="logs/notebooks/09-apps.ipynb",
    retries: 1
    params:
        what=FIGURE_WHAT["apps"],
    notebook:
        "../../notebooks/09-apps.ipynb"


rule figure_speedup:
    input:
        tidy=expand(
            "data/results/{campaign}/{testbed}/tidy.csv",
            campaign=CAMPAIGN,
            testbed=STUDY["testbeds"],
        ),
    output:
        pdf=figure_pdf("speedup"),
    log:
        notebook="logs/notebooks/10-speedup.ipynb",
    retries: 1
    params:
        what=FIGURE_WHAT["speedup"],
    notebook:
        "../../notebooks/10-speedup.ipynb"


rule figure_streams:
    input:
        tidy=expand(
            "data/results/{campaign}/{testbed}/tidy.csv",
            campaign=CAMPAIGN,
            testbed=STUDY["testbeds"],
        ),
    output:
        pdf=figure_pdf("streams"),
    log:
        notebook="logs/notebooks/12-streams.ipynb",
    retries: 1
    params:
        what=FIGURE_WHAT["streams"],
    notebook:
        "../../notebooks/12-streams.ipynb"


# Containers against the bare host, from the paper's companion campaign
# (paper.containers_campaign): the paired ratios' tidy table only.
if CONTAINERS:

    rule figure_containers:
        input:
            ratios=f"data/results/{CONTAINERS}/container_ratios.csv",
        output:
            pdf=report(
                "paper/figures/containers.pdf",
                caption="../report/containers.rst",
                category="Figures",
                labels={"figure": "containers", "campaign": CONTAINERS},
            ),
        log:
            notebook="logs/notebooks/11-containers.ipynb",
        retries: 1
        params:
            campaign=CONTAINERS,
            latency_bytes=STUDY["paper"]["latency_bytes"],
        notebook:
            "../../notebooks/11-containers.ipynb"


# Richter et al.'s efficiency per set-up, from the paper's data-path companion
# campaign (paper.datapaths_campaign): the table of rule datapaths only.
if DATAPATHS:

    rule figure_richter:
        input:
            table=f"data/results/{DATAPATHS}/richter_table.csv",
        output:
            pdf=report(
                "paper/figures/richter.pdf",
                caption="../report/richter.rst",
                category="Figures",
                labels={"figure": "richter", "campaign": DATAPATHS},
            ),
        log:
            notebook="logs/notebooks/13-richter.ipynb",
        retries: 1
        params:
            campaign=DATAPATHS,
        notebook:
            "../../notebooks/13-richter.ipynb"
