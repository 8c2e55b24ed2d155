# Generated LaTeX (numbers, tables, the parts this campaign has data for) and
# the paper itself.


rule numbers:
    input:
        # the numbers the text cites, declared (hpcvirt.numbers)
        declared="workflow/numbers.yaml",
        summary=f"data/results/{CAMPAIGN}/summary.csv",
        tidy=expand(
            "data/results/{campaign}/{testbed}/tidy.csv",
            campaign=CAMPAIGN,
            testbed=STUDY["testbeds"],
        ),
        hosts=expand(
            "data/results/{campaign}/{testbed}/provenance.json",
            campaign=CAMPAIGN,
            testbed=STUDY["testbeds"],
        ),
    output:
        # the tables of the views that have one (hpcvirt.benchmarks.View.tex)
        **{f"{v.name}_table": view_table(v.name) for v in VIEW_TABLES},
        numbers="paper/generated/numbers.tex",
        # the same numbers as a table: macro, value, what made it
        names="paper/generated/numbers.csv",
        table="paper/generated/results_table.tex",
        overheads="paper/generated/overheads_table.tex",
        placement="paper/generated/placement_table.tex",
        apps="paper/generated/apps_table.tex",
        # the studies' experiments the benchmarks stand in for (their declared counterparts)
        mapping="paper/generated/mapping_table.tex",
    log:
        "logs/paper/numbers.log",
    params:
        code=DERIVING_CODE,
        latency_bytes=STUDY["paper"]["latency_bytes"],
        quick_look=STUDY["paper"]["quick_look"],
        archive=ARCHIVE,
        # the testbeds as the introduction lists them: their descriptions, in the study's order
        testbeds={tb: TESTBEDS[tb].get("description", "") for tb in STUDY["testbeds"]},
    run:
        localjobs.script(f"{SCRIPTS}/numbers.py", input, output, params, log)


rule parts:
    input:
        numbers="paper/generated/numbers.csv",
        parts=paper_parts,
    output:
        "paper/generated/parts.tex",
    log:
        "logs/paper/parts.log",
    params:
        code=DERIVING_CODE,
        figures=[f.name for f in PAPER_FIGURES],
    run:
        localjobs.script(f"{SCRIPTS}/parts.py", input, output, params, log)


rule reference_table:
    input:
        "data/reference/exposito2012.csv",
        "data/reference/nanos2010.csv",
        "data/reference/atif2016.csv",
        "data/reference/ramakrishnan2011.csv",
        "data/reference/richter2015.csv",
    output:
        "paper/generated/reference_table.tex",
    log:
        "logs/paper/reference_table.log",
    params:
        code=DERIVING_CODE,
    run:
        localjobs.script(f"{SCRIPTS}/reference_table.py", input, output, params, log)


# The studies' claims (data/reference/claims.yaml) checked on the campaign,
# every \claimsays{ID}{verdict} of the text checked against the result, and
# one section per study (its testbeds, figures, values and claims).
rule claims:
    input:
        claims="data/reference/claims.yaml",
        claims_md="data/reference/claims.md",
        audit=expand("data/reference/audit/{study}.yaml", study=claims.STUDIES),
        reference=expand("data/reference/{study}.csv", study=claims.STUDIES),
        testbeds="data/reference/testbeds.csv",
        figures="data/reference/figures_without_data.csv",
        reproduction="data/reference/reproduction.yaml",
        tidy=expand(
            "data/results/{campaign}/{testbed}/tidy.csv",
            campaign=CAMPAIGN,
            testbed=STUDY["testbeds"],
        ),
        # the hosts' cache sizes (claims relative to a cache)
        hosts=expand(
            "data/results/{campaign}/{testbed}/provenance.json",
            campaign=CAMPAIGN,
            testbed=STUDY["testbeds"],
        ),
        sections=paper_sections,
        parts=paper_parts,
        # the committed archive's tables, for "this campaign against the archive"
        archive=archive_tidy_tables,
        archive_hosts=archive_host_records,
        # the verdicts of every other campaign of the study, for the stability of each
        campaigns=expand("data/results/{c}/verdicts.csv", c=study_campaigns()),
        campaign_hosts=study_campaign_hosts(),
    output:
        verdicts=report(
            f"data/results/{CAMPAIGN}/claims.csv",
            caption="../report/table.rst",
            category="Tables",
            labels={
                "table": "claims (verdicts, CSV)",
                "testbed": "all",
                "campaign": CAMPAIGN,
            },
        ),
        # the same verdicts as a page the report shows (a CSV file it offers to download)
        page=report(
            "paper/generated/claims.html",
            caption="../report/table.rst",
            category="Tables",
            labels={
                "table": "claims (verdicts)",
                "testbed": "all",
                "campaign": CAMPAIGN,
            },
        ),
        macros="paper/generated/claims.tex",
        table="paper/generated/claims_table.tex",
        per_study="paper/generated/per_study.tex",
        vs_archive="paper/generated/vs_archive.tex",
    log:
        "logs/paper/claims.log",
    # a paper build starts its longest jobs right after the views the figures wait for
    priority: 5
    params:
        code=DERIVING_CODE,
        campaign=CAMPAIGN,
        archive=ARCHIVE,
        latency_bytes=STUDY["paper"]["latency_bytes"],
        quick_look=STUDY["paper"]["quick_look"],
        figures=[f.name for f in PAPER_FIGURES],
    run:
        localjobs.script(f"{SCRIPTS}/claims.py", input, output, params, log)


# The verdicts of one of the study's other campaigns, without their stability
# (that is the paper's campaign's, rule claims): made once per campaign, not on
# every paper build; committed with the campaigns' tables, and re-evaluated by
# the tests (tests/test_archive.py).
rule verdicts:
    input:
        claims="data/reference/claims.yaml",
        claims_md="data/reference/claims.md",
        tidy=lambda w: campaign_records(w, "tidy.csv"),
        hosts=lambda w: campaign_records(w, "provenance.json"),
    output:
        verdicts="data/results/{campaign}/verdicts.csv",
    log:
        "logs/paper/verdicts-{campaign}.log",
    wildcard_constraints:
        campaign="|".join(map(re.escape, study_campaigns())) or "(?!)",
    params:
        code=DERIVING_CODE,
        campaign=lambda w: w.campaign,
    run:
        localjobs.script(f"{SCRIPTS}/verdicts.py", input, output, params, log)


# The artifact appendix from the campaign's provenance records (hpcvirt.artifact):
# hardware and software, the suites as built, measured time per phase, the
# exact commands, and where each claim is checked.
rule artifact:
    input:
        verdicts=f"data/results/{CAMPAIGN}/claims.csv",
        tidy=expand(
            "data/results/{campaign}/{testbed}/tidy.csv",
            campaign=CAMPAIGN,
            testbed=STUDY["testbeds"],
        ),
    output:
        "paper/generated/artifact.tex",
    log:
        "logs/paper/artifact.log",
    params:
        code=DERIVING_CODE,
        campaign=CAMPAIGN,
        raw_root="data/raw",
    run:
        localjobs.script(f"{SCRIPTS}/artifact.py", input, output, params, log)


rule paper:
    input:
        tex="paper/main.tex",
        sections=paper_sections,
        bib="paper/refs.bib",
        numbers="paper/generated/numbers.tex",
        parts="paper/generated/parts.tex",
        results_table="paper/generated/results_table.tex",
        overheads_table="paper/generated/overheads_table.tex",
        placement_table="paper/generated/placement_table.tex",
        mapping_table="paper/generated/mapping_table.tex",
        view_tables=[view_table(v.name) for v in VIEW_TABLES],
        reference_table="paper/generated/reference_table.tex",
        claims="paper/generated/claims.tex",
        claims_table="paper/generated/claims_table.tex",
        per_study="paper/generated/per_study.tex",
        vs_archive="paper/generated/vs_archive.tex",
        artifact="paper/generated/artifact.tex",
        figures=[
            f"paper/figures/{f.name}.pdf" for f in PAPER_FIGURES + COMPANION_FIGURES
        ],
        study_figures=[f"paper/figures/{name}.pdf" for name in STUDY_FIGURES],
        containers="paper/generated/containers.tex",
        datapaths="paper/generated/datapaths.tex",
    output:
        pdf=report("paper/main.pdf", caption="../report/paper.rst", category="Paper"),
    log:
        "logs/paper/latexmk.log",
    shell:
        "workflow/scripts/build-paper.sh paper {output.pdf} > {log} 2>&1"


# The container section: the companion campaign (paper.containers_campaign)
# as paired ratios (a tidy table beside its own tables) and the paper's
# macros and table; without a companion campaign the section says so.
if CONTAINERS:

    rule containers:
        input:
            tidy=expand(
                "data/results/{campaign}/{testbed}/tidy.csv",
                campaign=CONTAINERS,
                testbed=CONTAINER_TESTBEDS,
            ),
            # the host's CPUs, as its records give them
            hosts=expand(
                "data/results/{campaign}/{testbed}/provenance.json",
                campaign=CONTAINERS,
                testbed=CONTAINER_TESTBEDS,
            ),
        output:
            ratios=f"data/results/{CONTAINERS}/container_ratios.csv",
            tex="paper/generated/containers.tex",
        log:
            "logs/paper/containers.log",
        params:
            code=DERIVING_CODE,
            campaign=CONTAINERS,
            latency_bytes=STUDY["paper"]["latency_bytes"],
            # the runtimes' versions (records, not inputs: no rule of this study makes them)
            preflights=[
                str(p)
                for p in sorted(Path("data/raw", CONTAINERS).glob("*/preflight.json"))
            ],
        run:
            localjobs.script(f"{SCRIPTS}/containers.py", input, output, params, log)

else:

    rule containers:
        output:
            tex="paper/generated/containers.tex",
        log:
            "logs/paper/containers.log",
        params:
            code=DERIVING_CODE,
            campaign="",
            latency_bytes=STUDY["paper"]["latency_bytes"],
        run:
            localjobs.script(f"{SCRIPTS}/containers.py", input, output, params, log)


# The data paths' section: the campaign paper.datapaths_campaign names (the
# companion campaign, or the one measured: `make` sets it to its campaign)
# as Richter et al.'s Table 1 beside ours and what each data path costs (tidy
# tables beside the campaign's own), and the paper's macros and tables;
# without a companion campaign the section says so.
if DATAPATHS:

    rule datapaths:
        input:
            tidy=expand(
                "data/results/{campaign}/{testbed}/tidy.csv",
                campaign=DATAPATHS,
                testbed=DATAPATH_TESTBEDS,
            ),
            reference=expand("data/reference/{study}.csv", study=claims.STUDIES),
            reproduction="data/reference/reproduction.yaml",
        output:
            richter=f"data/results/{DATAPATHS}/richter_table.csv",
            paths=f"data/results/{DATAPATHS}/datapath_table.csv",
            tex="paper/generated/datapaths.tex",
        log:
            "logs/paper/datapaths.log",
        params:
            code=DERIVING_CODE,
            campaign=DATAPATHS,
            own=DATAPATHS == CAMPAIGN,
            latency_bytes=STUDY["paper"]["latency_bytes"],
            reference_dir=lambda wildcards, input: os.path.dirname(input.reference[0]),
        run:
            localjobs.script(f"{SCRIPTS}/datapaths.py", input, output, params, log)

else:

    rule datapaths:
        output:
            tex="paper/generated/datapaths.tex",
        log:
            "logs/paper/datapaths.log",
        params:
            code=DERIVING_CODE,
            campaign="",
            latency_bytes=STUDY["paper"]["latency_bytes"],
        run:
            localjobs.script(f"{SCRIPTS}/datapaths.py", input, output, params, log)


# The paper's and the figures' rules read small tables and take seconds: they
# run where Snakemake runs, not as cluster jobs of their own (with the Slurm
# profile each would otherwise be one more sbatch, queued and polled, on a node
# that may have neither Jupyter nor LaTeX).  The measurements, and parse and
# aggregate, which read every raw output of a campaign, stay cluster jobs.
localrules:
    numbers,
    parts,
    reference_table,
    claims,
    verdicts,
    artifact,
    paper,
    containers,
    datapaths,
    study_figures,
