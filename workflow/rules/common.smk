# Load and validate the study and testbed files (before any job runs) and
# provide the input functions of the other rule files.  No rules here.
import os
import re
import sys
from pathlib import Path

sys.path.insert(0, f"{workflow.basedir}/workflow/lib")
# the local Python jobs' scripts (run by hpcvirt.localjobs)
SCRIPTS = f"{workflow.basedir}/workflow/scripts"

from hpcvirt import localjobs

# The local jobs' server imports pandas, matplotlib and seaborn while this
# process loads the study and builds the graph, on the other core: a figure
# from the archive waits for neither in turn.  Only in the process a person
# started (not in the jobs Snakemake starts itself: a cluster or group job).
# (A dry run starts it too, and ends it: whether a run is dry is known only
# after the rule files are read.)
if workflow.is_main_process:
    localjobs.start()

from hpcvirt import (
    claims,
    figures,
    kvm,
    link,
    manifest,
    matrix,
    paths,
    progress,
    rawfiles,
    redraw,
    slurm,
    views,
)
from hpcvirt.benchmarks import REGISTRY
from hpcvirt.kinds import KINDS
from hpcvirt.config import (
    ConfigError,
    archived_campaign,
    emulated_note,
    load_study,
)
from hpcvirt.rawfiles import check_campaign_testbeds

# the study's files, as its errors name them: config/config.yaml, the --configfile layers, --config
STUDY_SOURCES = " + ".join(
    [
        "config/config.yaml",
        *(
            os.path.relpath(f) if Path(f).is_relative_to(Path.cwd()) else str(f)
            for f in workflow.config_settings.configfiles
        ),
        *(["--config"] if workflow.config_settings.config else []),
    ]
)
try:
    STUDY, TESTBEDS = load_study(
        config,
        config_path=STUDY_SOURCES,
        testbed_dir="config/testbeds",
    )
    # a redraw (HPCVIRT_NO_MEASURE: no measurement may run, see below) reads what the campaign measured,
    # whatever the testbed files say today
    if not os.environ.get("HPCVIRT_NO_MEASURE"):
        check_campaign_testbeds(STUDY["campaign"], TESTBEDS)
    # no campaign the workflow measures into or reads is a symlink or holds one (hpcvirt.paths)
    for _campaign in {
        STUDY["campaign"],
        archived_campaign(),
        STUDY["paper"].get("containers_campaign"),
        STUDY["paper"].get("datapaths_campaign"),
    } - {None, ""}:
        paths.check_raw_tree(_campaign)
        # its tables were parsed from the raw outputs on disk (hpcvirt.manifest)
        manifest.check_campaign(
            _campaign,
            (
                set(matrix.all_raw_paths(STUDY))
                if _campaign == STUDY["campaign"]
                else None
            ),
        )
except (ConfigError, paths.RawPathError, manifest.ManifestError) as exc:
    raise WorkflowError(str(exc)) from None

CAMPAIGN = STUDY["campaign"]
# The digest of the code that derives the summary, views, numbers, tables and
# figures from the tidy rows (hpcvirt.paths.code_digest): a parameter of the
# rules that run it, so that changed code derives them again.  Parsing is not
# among them: the tidy tables of an archived campaign are records.
DERIVING_CODE = paths.code_digest()

# Link settings the kernel cannot provide fail here, before any job (hpcvirt.link;
# the probe needs root, as the testbeds do: without it the job reports the same).
if os.geteuid() == 0:
    try:
        for _name in STUDY["testbeds"]:
            link.check(TESTBEDS[_name].get("network"), f"config/testbeds/{_name}.yaml")
    except link.LinkError as exc:
        raise WorkflowError(str(exc)) from None

# How far the campaign is, and what its missing measurements took in the archive (not for a
# redraw, which measures nothing: onstart names what it lacks).
if not os.environ.get("HPCVIRT_NO_MEASURE"):
    progress.report(STUDY, file=sys.stderr)
if STUDY["skipped"]:
    print(
        f"hpcvirt: testbeds {STUDY['testbeds']} do not offer (skipped, skip_unoffered):\n  "
        + "\n  ".join(STUDY["skipped"]),
        file=sys.stderr,
    )
for _line in emulated_note(STUDY) + kvm.kvm_note(TESTBEDS):
    print(f"hpcvirt: {_line}", file=sys.stderr)
CONFIGURATIONS = matrix.configurations(STUDY)
# The sbatch resources of each testbed's measurements (hpcvirt.slurm.resources), kept for the
# rules; a Slurm testbed's fail here, naming its file, when a configuration puts more ranks on
# one node than the testbed's ranks_per_node.
_SLURM = {}
for _name in STUDY["testbeds"]:
    if TESTBEDS[_name].get("executor") == "slurm":
        try:
            _SLURM[_name] = slurm.resources(TESTBEDS[_name], CONFIGURATIONS)
        except ValueError as exc:
            raise WorkflowError(f"config/testbeds/{_name}.yaml: {exc}") from None
PRIORITIES = matrix.priorities(STUDY)
# The raw outputs the study asks for and the campaign lacks (a new campaign;
# or an existing one that the study has grown: a repetition, experiment or
# parameter more): targets of rule all, so that they are measured and their
# tables re-parsed.  As inputs of a table that exists they would not be
# (Snakemake runs no job for a missing input of an up-to-date job).
MISSING_RAW = [p for p in matrix.all_raw_paths(STUDY) if not Path(p).exists()]
# Slurm testbeds: the allocations a site's queue will be asked for (the dry run shows them)
for _line in slurm.allocation_note(TESTBEDS, MISSING_RAW):
    print(f"hpcvirt: {_line}", file=sys.stderr)
# The figures the campaign has data for (hpcvirt.figures, workflow/figures.yaml).
try:
    PAPER_FIGURES = figures.for_campaign(CONFIGURATIONS, TESTBEDS)
except figures.FigureError as exc:
    raise WorkflowError(str(exc)) from None
# testbeds whose kind boots its hosts once per interleaved round (the guests,
# rule measure_round_<testbed>_<i>); every other testbed has one job per measurement.
ROUND_TESTBEDS = [
    name for name, tb in TESTBEDS.items() if KINDS[tb["kind"]].boots_per_round
]
MEASURE_TESTBED_RE = "|".join(n for n in TESTBEDS if n not in ROUND_TESTBEDS) or "(?!)"


wildcard_constraints:
    campaign=r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}",
    testbed=r"[a-z][a-z0-9-]{0,31}",
    benchmark="|".join(REGISTRY.names()),
    params=r"[A-Za-z0-9_.,=+-]+",
    rep=r"[0-9]+",


def measurement_priority(wildcards):
    """Interleaved order of the measurements (see hpcvirt.matrix)."""
    key = (wildcards.testbed, wildcards.benchmark, wildcards.params, int(wildcards.rep))
    return PRIORITIES.get(key, 0)


def raw_outputs_of_testbed(wildcards):
    """Raw outputs of one campaign and testbed.  ancient(): raw files are
    immutable records, so their modification time never triggers a re-parse;
    a new or deleted file does (input-set trigger).  Another campaign than
    the one configured (the archive this campaign is compared with, the
    paper's companion campaigns) is what its records hold: its tables are
    never a reason to measure into it with this study's settings."""
    if wildcards.campaign != CAMPAIGN:
        return [
            ancient(str(p))
            for p in sorted(
                Path("data/raw", wildcards.campaign, wildcards.testbed).glob(
                    "*/*/rep-*.out"
                )
            )
            if re.fullmatch(r"rep-[0-9]+\.out", p.name)
        ]
    study = dict(STUDY, campaign=wildcards.campaign, testbeds=[wildcards.testbed])
    return [ancient(p) for p in matrix.all_raw_paths(study)]


def tidy_tables(wildcards):
    return expand(
        "data/results/{campaign}/{testbed}/tidy.csv",
        campaign=wildcards.campaign,
        testbed=STUDY["testbeds"],
    )


def paper_sections(wildcards):
    return sorted(str(p) for p in Path("paper/sections").glob("*.tex"))


# The archived campaign (config/config.yaml), which a new campaign's paper compares itself with.
ARCHIVE = archived_campaign() or CAMPAIGN


def archive_tidy_tables(wildcards):
    return sorted(str(p) for p in Path(f"data/results/{ARCHIVE}").glob("*/tidy.csv"))


# The paper's companion campaign: containers against the bare host
# (config/container.yaml; config key paper.containers_campaign, "" = none),
# archived under data/raw and data/results like the main campaign.
CONTAINERS = STUDY["paper"].get("containers_campaign") or ""
if CONTAINERS and not Path("data/raw", CONTAINERS).is_dir():
    raise WorkflowError(
        f"{STUDY_SOURCES}: paper.containers_campaign: no campaign {CONTAINERS!r} under data/raw/ "
        '(measure one with `make containers`, or set the key to "" to leave the container '
        "section out)"
    )
CONTAINER_TESTBEDS = (
    sorted(p.parent.name for p in Path("data/raw", CONTAINERS).glob("*/testbed.json"))
    if CONTAINERS
    else []
)
# The paper's second companion campaign: the data paths and Richter et al.'s
# set-ups (config/datapaths.yaml; config key paper.datapaths_campaign).
# `make` sets the key to the campaign it measures (the default study has the
# data paths and the set-ups): then the study's testbeds are its testbeds.
DATAPATHS = STUDY["paper"].get("datapaths_campaign") or ""
if DATAPATHS and DATAPATHS != CAMPAIGN and not Path("data/raw", DATAPATHS).is_dir():
    raise WorkflowError(
        f"{STUDY_SOURCES}: paper.datapaths_campaign: no campaign {DATAPATHS!r} under data/raw/ "
        '(measure one with `make datapaths`, or set the key to "" to leave the data paths '
        "section without numbers)"
    )
DATAPATH_TESTBEDS = (
    sorted(TESTBEDS)
    if DATAPATHS == CAMPAIGN
    else (
        sorted(
            p.parent.name for p in Path("data/raw", DATAPATHS).glob("*/testbed.json")
        )
        if DATAPATHS
        else []
    )
)
# The companions' figures (when the paper names their campaign), and every
# figure a rule figure_<name> is made for (workflow/rules/figures.smk).
FIGURE_CAMPAIGN = {"main": CAMPAIGN, "containers": CONTAINERS, "datapaths": DATAPATHS}
COMPANION_FIGURES = figures.companions(FIGURE_CAMPAIGN)
FIGURE_RULES = [f for f in figures.load() if f.campaign == "main"] + COMPANION_FIGURES


def study_campaigns():
    """The other campaigns of this study under data/results (named like the archive,
    e.g. local-<time>), for the stability of the claims' verdicts."""
    prefix = ARCHIVE.split("-", 1)[0] + "-"
    return sorted(
        p.name
        for p in Path("data/results").glob(f"{prefix}*")
        if p.name != CAMPAIGN and (p / "summary.csv").exists()
    )


def study_campaign_hosts():
    """One host record (its first testbed's provenance.json) of each other campaign of the study: on
    what machines the verdicts they share were measured."""
    return [
        str(next(iter(sorted(Path("data/results", c).glob("*/provenance.json")))))
        for c in study_campaigns()
        if any(Path("data/results", c).glob("*/provenance.json"))
    ]


# The companions' tables and those of the study's other campaigns are records,
# read as committed: no rule of this study makes them (their testbeds and plans
# need not be this study's), unless it is the campaign measured.  (Parsed by
# rule, every other campaign's raw outputs would be jobs of the graph: about
# 3,000 of them, 5 s of every paper build.)
PARSED_CAMPAIGN = (
    "".join(
        f"(?!{re.escape(c)}/)"
        for c in sorted(
            ({CONTAINERS, DATAPATHS} | set(study_campaigns())) - {"", CAMPAIGN}
        )
    )
    + r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}"
)


def campaign_records(wildcards, name):
    """A recorded campaign's files of one name (its testbeds' tidy.csv or
    provenance.json), as committed (rule verdicts)."""
    return [
        ancient(str(p))
        for p in sorted(Path("data/results", wildcards.campaign).glob(f"*/{name}"))
    ]


def archive_host_records(wildcards):
    return sorted(
        str(p) for p in Path(f"data/results/{ARCHIVE}").glob("*/provenance.json")
    )


def paper_parts(wildcards):
    """Parts of sections that need particular data (\\hvpart{<name>})."""
    return sorted(str(p) for p in Path("paper/sections/parts").glob("*.tex"))


def _testbed(wildcards):
    return TESTBEDS[wildcards.testbed]


def measurement_group(wildcards):
    """Slurm: the measurements of a testbed share one allocation (see hpcvirt.slurm)."""
    return slurm.group(_testbed(wildcards))


def measurement_slurm(key):
    """One sbatch resource of a measurement (see hpcvirt.slurm); None = unset."""

    def value(wildcards):
        if wildcards.testbed not in _SLURM:
            _SLURM[wildcards.testbed] = slurm.resources(
                _testbed(wildcards), CONFIGURATIONS
            )
        return _SLURM[wildcards.testbed].get(key)

    return value


def post_slurm(key):
    """One sbatch resource of parse (its testbed's) or aggregate (the study's first
    Slurm testbed's): hpcvirt.slurm.post_resources; None = unset."""

    def value(wildcards):
        name = wildcards.get("testbed")
        tbs = [TESTBEDS[name]] if name in TESTBEDS else list(TESTBEDS.values())
        return slurm.post_resources(tbs).get(key)

    return value


def measurement_preflight(wildcards):
    """Testbeds with a container runtime check host vs image MPI first."""
    tb = _testbed(wildcards)
    if tb.get("runtime", {}).get("kind", "none") == "none":
        return []
    # ancient(): a rebuilt image re-runs the preflight, which must not make
    # every protected measurement look outdated.
    return ancient(f"data/raw/{wildcards.campaign}/{wildcards.testbed}/preflight.json")


def round_outputs(configs, ext):
    """Raw outputs of one round of a qemu testbed (wildcards: campaign, rep)."""
    return [
        f"data/raw/{{campaign}}/{c.testbed}/{c.benchmark}/{c.params}/rep-{{rep}}.{ext}"
        for c in configs
    ]


# Per qemu testbed, its rounds grouped by the configurations they hold (an
# experiment with fewer repetitions than the study is in the first rounds only).
ROUND_GROUPS = [
    (tb, i, reps, configs)
    for tb in ROUND_TESTBEDS
    for i, (reps, configs) in enumerate(matrix.round_groups(STUDY, tb))
]

# Rounds of this campaign with some outputs already there, per group: {rep: missing configurations}
# (rounds with all their outputs need no job; rounds with none are measured by the group's rule).
ROUND_STARTED = {}
for _tb, _i, _reps, _configs in ROUND_GROUPS:
    ROUND_STARTED[(_tb, _i)] = {}
    for _rep in _reps:
        _have = [
            Path(matrix.raw_path(CAMPAIGN, c, _rep)).exists()
            and Path(matrix.raw_path(CAMPAIGN, c, _rep, "json")).exists()
            for c in _configs
        ]
        if any(_have) and not all(_have):
            ROUND_STARTED[(_tb, _i)][_rep] = [
                c for c, h in zip(_configs, _have) if not h
            ]
        elif all(_have):
            ROUND_STARTED[(_tb, _i)][_rep] = []


def round_priority_for(configs):
    """Priority of a round job: that of its earliest measurement."""

    def round_priority(wildcards):
        rep = int(wildcards.rep)
        return max(
            PRIORITIES.get((c.testbed, c.benchmark, c.params, rep), 0) for c in configs
        )

    return round_priority


# The figure rules' inputs, parameters and output (workflow/rules/figures.smk).
FIGURE_TABLE_INPUT = {
    "summary": "summary",
    "container_ratios": "ratios",
    "richter_table": "table",
}


def view_csv(name):
    return f"data/results/{CAMPAIGN}/views/{name}.csv"


# The views with a table in the paper (rule numbers writes each).
VIEW_TABLES = [v for v in views.VIEWS if v.tex]


def view_table(name):
    return f"paper/generated/{name}_table.tex"


def figure_inputs(fig):
    """The views or tables a figure reads, by the name its notebook knows them."""
    if fig.views:
        return {name: view_csv(name) for name in fig.views}
    campaign = FIGURE_CAMPAIGN[fig.campaign]
    return {FIGURE_TABLE_INPUT[fig.reads]: f"data/results/{campaign}/{fig.reads}.csv"}


def figure_params(fig):
    """What the notebook gets besides its tables (its input ``notebook``);
    ``what`` is its report caption."""
    values = {
        "latency_bytes": STUDY["paper"]["latency_bytes"],
        "campaign": FIGURE_CAMPAIGN[fig.campaign],
        # the MPI point-to-point suites' names, in registry order, as each declares it
        "suite_labels": {
            b.name: p.label for b, p in REGISTRY.point_to_point() if b.mpi
        },
        # the tests of the figure's benchmark, in the order it declares them
        "tests": (
            list(REGISTRY[fig.benchmark].params["tests"].choices)
            if "tests" in fig.params
            else []
        ),
    }
    return {
        "what": fig.what,
        **{p: values[p] for p in fig.params},
    }


def figure_png(fig):
    """paper/figures/<name>.png (the PDF's picture, which every browser shows),
    registered for the HTML report (snakemake --report) with its caption; its
    labels (how many testbeds of what the figure draws, their virtualization,
    the guests' accelerator) are read from the figure's input tables when the
    report is made, not when it is drawn."""
    campaign = FIGURE_CAMPAIGN[fig.campaign]
    kinds = {name: tb["kind"] for name, tb in TESTBEDS.items()}
    return report(
        f"paper/figures/{fig.name}.png",
        caption=f"../report/{fig.caption}",
        category="Figures",
        labels=lambda wildcards, input: figures.report_labels(
            fig, [t for t in input if t.endswith(".csv")], campaign, kinds
        ),
    )


# The studies' figures redrawn with their reported values (hpcvirt.redraw).
try:
    STUDY_FIGURES = redraw.pdf_names("data/reference")
except (redraw.RedrawError, OSError) as exc:
    raise WorkflowError(str(exc)) from None


def study_figure_png(name):
    return report(
        f"paper/figures/{name}.png",
        caption="../report/study-figure.rst",
        category="Studies redrawn",
        labels={"figure": name},
    )


# Raw outputs are records.  With Snakemake's default rerun triggers a change
# of the measurement code would re-measure every finished measurement and
# replace its raw output (a git checkout does not keep the write protection).
# The project's profiles leave the code trigger out; Snakemake finds them only
# when named (the Snakefile is at the top, the profiles in workflow/profiles).
onstart:
    if "CODE" in {t.name for t in workflow.rerun_triggers}:
        raise WorkflowError(
            "hpcvirt: run the workflow through make, or name a profile: snakemake "
            "--workflow-profile workflow/profiles/default ... (or workflow/profiles/slurm).  "
            "Without one, Snakemake re-runs a job whose code changed: it would measure "
            "finished measurements again and replace their raw outputs, which are records.  "
            "Another profile must set rerun-triggers: [mtime, input, params, software-env]."
        )
    # --forceall, --forcerun/-R of a measurement, -f of a raw output: refused before any job runs
    _replaced = rawfiles.replaced_records(
        f for job in workflow.dag.needrun_jobs() for f in job.output
    )
    if _replaced:
        raise WorkflowError(_replaced)
    # make figure, report, paper-from-archive: redraw from a campaign's results, never measure
    _measuring = [
        j for j in workflow.dag.needrun_jobs() if j.rule.name.startswith("measure")
    ]
    if _measuring and os.environ.get("HPCVIRT_NO_MEASURE"):
        raise WorkflowError(
            f"hpcvirt: this command redraws from campaign {CAMPAIGN}'s results and measures nothing, "
            f"but the campaign lacks {len(_measuring)} measurement jobs of this study: name a campaign "
            "that has them, with the study it was measured with (make figure ... LAYER=<file>, "
            "snakemake --configfile <file>), or measure with make"
        )
