# hpcvirt: the artifact's commands.  `make` reproduces the study on this
# machine and builds paper/main.pdf; `make test` runs the whole test suite.
# Both install what is missing first (Debian packages, pinned Python venv).

SHELL := /bin/bash
VENV := .venv
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
PROFILE := --workflow-profile workflow/profiles/default
# A fresh measurement campaign per `make` run; never overwrites an older one.
CAMPAIGN ?= local-$(shell date -u +%Y%m%dT%H%M%SZ)
FIGURE ?= pingpong
FEATURES ?= base slurm vm containers apptainer tools
# A subset of the study's testbeds, e.g. `make TESTBEDS=local` or TESTBEDS="local bridge":
# the study runs what they offer and lists what it skips (skip_unoffered).
TESTBEDS ?=
comma := ,
empty :=
space := $(empty) $(empty)
SUBSET := $(if $(strip $(TESTBEDS)),testbeds=[$(subst $(space),$(comma),$(strip $(TESTBEDS)))] skip_unoffered=True)
# What the default study (config/config.yaml: this host, the namespaces' bridges and links, the guests) needs.
STUDY_FEATURES ?= base vm

.PHONY: all paper quick containers datapaths bundle paper-from-archive report deps deps-study deps-all test figure remeasure dry-run lint archive image clean help

all: paper

help:
	@echo "make            install, measure a new campaign on this machine, build paper/main.pdf"
	@echo "make quick      a first look in minutes: a reduced study on local, bridge and vm, and its paper (not the archived campaign)"
	@echo "make containers measure a new container-vs-bare-host campaign (bare host, Charliecloud, Apptainer) and build the paper with it"
	@echo "make datapaths  measure a new data-path campaign (bridge, direct path, VXLAN tunnel, 1 Gbit/s links; OpenFOAM for Richter et al.'s Table 1) and build the paper with it"
	@echo "make test       install, run the whole test suite (unit, workflow, end-to-end)"
	@echo "make figure     rebuild paper/figures/\$$FIGURE.pdf from the committed archive, measuring nothing (FIGURE=bogus lists the names;"
	@echo "                FROM=<campaign>: from that campaign's data/results/, e.g. your make's; LAYER=<file>: the study layer it was measured with)"
	@echo "make remeasure  FIGURE=<name>: measure only what that figure draws into a new campaign, then draw it (pingpong: 20 measurements); DRY=1 lists the jobs only"
	@echo "make paper-from-archive  rebuild paper/main.pdf from the committed archive (about 10 s), measuring nothing"
	@echo "make dry-run    show the jobs of the full study without running them"
	@echo "  TESTBEDS=...  (make, make quick, make dry-run) only these testbeds, e.g. TESTBEDS=local; the rest is listed as skipped"
	@echo "make archive    measure what the archived campaign (config/config.yaml: campaign) lacks of the study, then its paper"
	@echo "make report     an HTML report (report/hpcvirt.html) of the archived campaign: figures, tables, paper"
	@echo "make bundle     one file (dist/hpcvirt-<commit>.tar) that rebuilds the paper offline: make paper-from-archive"
	@echo "make lint       snakemake --lint and snakefmt --check"
	@echo "make image      the offline image the container tests run in (.hpcvirt/images/offline.sqfs; make test builds it too)"
	@echo "make clean      remove the built paper, figures, generated LaTeX, logs and Snakemake's records (.snakemake)"
	@echo "make deps       the Debian packages and the pinned venv (every target installs what it needs first)"

deps:
	@workflow/scripts/install-deps.sh base

deps-study:
	@workflow/scripts/install-deps.sh $(STUDY_FEATURES)

deps-all:
	@workflow/scripts/install-deps.sh $(FEATURES)

paper: deps-study
	@echo "hpcvirt: building the pinned suites the study runs (NPB, IMB, OSU, MILC) with the pinned Spack from spack-envs/laptop/spack.lock, offline (installed once per machine)"
	PYTHONPATH=workflow/lib $(VENV)/bin/python -m hpcvirt.build --study --jobs 2
	@echo "hpcvirt: measuring campaign $(CAMPAIGN) (raw outputs in data/raw/$(CAMPAIGN)/)"
	snakemake $(PROFILE) --config campaign=$(CAMPAIGN) 'paper={"datapaths_campaign": "$(CAMPAIGN)"}' $(SUBSET)
	@echo "hpcvirt: paper/main.pdf built from campaign $(CAMPAIGN) (its data-path section and Richter et al.'s Table 1 too)"

# A first look: the reduced study (config/tiny.yaml) into a new campaign, and
# a paper that says it is not the archived campaign (config/quick.yaml).
QUICK_CAMPAIGN ?= quick-$(shell date -u +%Y%m%dT%H%M%SZ)
quick: deps-study
	@echo "hpcvirt: QUICK LOOK (not the archived campaign): a reduced study on local, bridge and vm into campaign $(QUICK_CAMPAIGN)"
	PYTHONPATH=workflow/lib $(VENV)/bin/python -m hpcvirt.build --study --configfile config/tiny.yaml config/quick.yaml --jobs 2
	snakemake $(PROFILE) --configfile config/tiny.yaml config/quick.yaml --config campaign=$(QUICK_CAMPAIGN) $(SUBSET)
	@echo "hpcvirt: paper/main.pdf built from the QUICK LOOK campaign $(QUICK_CAMPAIGN) (not the archived campaign; make figure and make report redraw the archive)"

# The paper's companion campaign: containers against the bare host
# (config/container.yaml: the bare host, Charliecloud and Apptainer,
# interleaved) into a new campaign, then the paper with it as its container
# section (config key paper.containers_campaign; the archived main campaign
# stays the rest of the paper).  20 to 30 minutes on 2 cores.
CONTAINER_CAMPAIGN ?= container-$(shell date -u +%Y%m%dT%H%M%SZ)
CONTAINER_FEATURES ?= base containers apptainer
containers:
	@workflow/scripts/install-deps.sh $(CONTAINER_FEATURES)
	PYTHONPATH=workflow/lib $(VENV)/bin/python -m hpcvirt.build --study --configfile config/container.yaml --jobs 2
	@echo "hpcvirt: measuring container campaign $(CONTAINER_CAMPAIGN) (raw outputs in data/raw/$(CONTAINER_CAMPAIGN)/)"
	snakemake $(PROFILE) data/results/$(CONTAINER_CAMPAIGN)/summary.csv --configfile config/container.yaml --config campaign=$(CONTAINER_CAMPAIGN)
	snakemake $(PROFILE) paper/main.pdf --config 'paper={"containers_campaign": "$(CONTAINER_CAMPAIGN)"}'
	@echo "hpcvirt: paper/main.pdf built with container campaign $(CONTAINER_CAMPAIGN) (to keep it: set paper.containers_campaign in config/config.yaml)"

# The paper's second companion campaign: the data paths (config/datapaths.yaml:
# this host, the bridge, the direct path, the VXLAN tunnel over an unlimited
# and a 1 Gbit/s link, the 1 Gbit/s link), with OpenFOAM's damBreak for
# Richter et al.'s Table 1, into a new campaign; then the paper with it
# (config key paper.datapaths_campaign).  About 30 minutes on 2 cores.
DATAPATHS_CAMPAIGN ?= datapaths-$(shell date -u +%Y%m%dT%H%M%SZ)
datapaths: deps-study
	@echo "hpcvirt: measuring data-path campaign $(DATAPATHS_CAMPAIGN) (raw outputs in data/raw/$(DATAPATHS_CAMPAIGN)/)"
	snakemake $(PROFILE) data/results/$(DATAPATHS_CAMPAIGN)/summary.csv --configfile config/datapaths.yaml --config campaign=$(DATAPATHS_CAMPAIGN)
	snakemake $(PROFILE) paper/main.pdf --config 'paper={"datapaths_campaign": "$(DATAPATHS_CAMPAIGN)"}'
	@echo "hpcvirt: paper/main.pdf built with data-path campaign $(DATAPATHS_CAMPAIGN) (to keep it: set paper.datapaths_campaign in config/config.yaml)"

# The offline bundle (hpcvirt.bundle): repository, archived campaign, built
# paper, pinned sources, wheelhouse, checksum manifest.  Unpacked, it rebuilds
# the paper with `make paper-from-archive` and no network (pip --no-index).
BUNDLE ?= dist/hpcvirt-$(shell git rev-parse --short=12 HEAD 2>/dev/null || echo unknown).tar
# Inside an unpacked bundle, its source archives are the mirror.
ifneq ($(wildcard bundle/sources),)
export HPCVIRT_SOURCE_MIRROR ?= $(CURDIR)/bundle/sources
endif
bundle: deps
	snakemake $(PROFILE) paper/main.pdf
	PYTHONPATH=workflow/lib $(VENV)/bin/python -m hpcvirt.bundle $(BUNDLE)

paper-from-archive: deps
	HPCVIRT_NO_MEASURE=1 snakemake $(PROFILE) paper/main.pdf
	@echo "hpcvirt: paper/main.pdf rebuilt from the archived campaign"

# The HTML report of the archived campaign (or REPORT_CAMPAIGN=<campaign>).
REPORT_CAMPAIGN ?=
REPORT_CONFIG := $(if $(REPORT_CAMPAIGN),--config campaign=$(REPORT_CAMPAIGN))
report: deps
	HPCVIRT_NO_MEASURE=1 snakemake $(PROFILE) paper/main.pdf $(REPORT_CONFIG)
	@mkdir -p report
	@# the archive's files were made by other clones: Snakemake says so once per file (a non critical
	@# warning, about 900 lines), counted here instead
	HPCVIRT_NO_MEASURE=1 snakemake $(PROFILE) --report report/hpcvirt.html $(REPORT_CONFIG) 2>&1 \
	  | awk '/^Missing metadata for file /{n++; next} {print} END{if (n) print "hpcvirt: " n " archived files have no Snakemake metadata of this clone (non critical)"}'; \
	  exit $${PIPESTATUS[0]}
	@echo "hpcvirt: report/hpcvirt.html"

archive: deps-study
	snakemake $(PROFILE)

# In two phases (workflow/scripts/test.sh): the tests that need no image and
# no machine to themselves while the offline and guests' images are built
# (each cached in .hpcvirt/), then the end-to-end, Slurm, guest and container
# tests one at a time.
# (Apptainer's build, when the machine has none, is one of those background builds.)
test:
	@workflow/scripts/install-deps.sh $(subst apptainer,apptainer-deps,$(FEATURES))
	workflow/scripts/test.sh

# FROM=<campaign>: the figure of another campaign (a user's `make`) instead of the archive's (for
# FIGURE=containers: a container campaign); LAYER=<file>: the study layer that campaign was measured
# with (make remeasure's .hpcvirt/remeasure-<figure>.yaml, config/tiny.yaml, ...).  Measures nothing
# (HPCVIRT_NO_MEASURE: refused at start).
FROM ?=
LAYER ?=
# a campaign's directory as a shell completes it (local-.../) names the campaign
override FROM := $(patsubst %/,%,$(strip $(FROM)))
# the campaign key the figure reads (workflow/figures.yaml: campaign), set to FROM
FROM_CONFIG = $(shell PYTHONPATH=workflow/lib $(VENV)/bin/python -m hpcvirt.figures --from-config $(FIGURE) $(FROM))
figure: deps
	@test -z "$(LAYER)" || test -f "$(LAYER)" || { echo "make figure: LAYER=$(LAYER): no such file (the study layer the campaign was measured with, e.g. config/tiny.yaml or .hpcvirt/remeasure-$(FIGURE).yaml)" >&2; exit 2; }
	@test -z "$(LAYER)" || PYTHONPATH=workflow/lib $(VENV)/bin/python -m hpcvirt.config $(LAYER)
	@PYTHONPATH=workflow/lib $(VENV)/bin/python -m hpcvirt.figures "$(FIGURE)" "$(FROM)"
	HPCVIRT_NO_MEASURE=1 snakemake $(PROFILE) paper/figures/$(FIGURE).pdf $(if $(strip $(LAYER)),--configfile $(LAYER)) $(if $(strip $(FROM)),$(FROM_CONFIG))
	@echo "hpcvirt: paper/figures/$(FIGURE).pdf, drawn from $(if $(FROM),campaign $(FROM),the archived campaign)"

# Only what one figure draws (workflow/figures.yaml: draws), measured into a new campaign: a study layer
# (python -m hpcvirt.figures --remeasure) with only those experiments and testbeds, then the figure.
# DRY=1: only the jobs it would run, with the expected time (snakemake -n), nothing built or measured.
REMEASURE_CAMPAIGN ?= $(FIGURE)-$(shell date -u +%Y%m%dT%H%M%SZ)
DRY ?=
remeasure: deps-study
	@PYTHONPATH=workflow/lib $(VENV)/bin/python -m hpcvirt.figures "$(FIGURE)"
	@mkdir -p .hpcvirt && PYTHONPATH=workflow/lib $(VENV)/bin/python -m hpcvirt.figures --remeasure "$(FIGURE)" > .hpcvirt/remeasure-$(FIGURE).yaml
ifneq ($(DRY),)
	snakemake $(PROFILE) -n paper/figures/$(FIGURE).pdf --configfile .hpcvirt/remeasure-$(FIGURE).yaml --config campaign=$(REMEASURE_CAMPAIGN)
	@echo "hpcvirt: dry run: nothing built or measured (make remeasure FIGURE=$(FIGURE) measures these jobs)"
else
	@echo "hpcvirt: measuring what figure $(FIGURE) draws into campaign $(REMEASURE_CAMPAIGN) (the study layer: .hpcvirt/remeasure-$(FIGURE).yaml)"
	PYTHONPATH=workflow/lib $(VENV)/bin/python -m hpcvirt.build --study --configfile .hpcvirt/remeasure-$(FIGURE).yaml --jobs 2
	snakemake $(PROFILE) paper/figures/$(FIGURE).pdf --configfile .hpcvirt/remeasure-$(FIGURE).yaml --config campaign=$(REMEASURE_CAMPAIGN)
	@echo "hpcvirt: paper/figures/$(FIGURE).pdf drawn from the new campaign $(REMEASURE_CAMPAIGN) (make figure FIGURE=$(FIGURE) FROM=$(REMEASURE_CAMPAIGN) LAYER=.hpcvirt/remeasure-$(FIGURE).yaml draws it again)"
endif

# The study's Debian packages too: the plan asks QEMU whether the guests can run under KVM (without
# QEMU it would plan emulated guests, and so fewer experiments, where the real run would have KVM).
dry-run: deps-study
	snakemake $(PROFILE) -n --config campaign=$(CAMPAIGN) 'paper={"datapaths_campaign": "$(CAMPAIGN)"}' $(SUBSET)

lint: deps
	snakemake --lint
	snakefmt --check Snakefile workflow/rules

image: deps-all
	snakemake $(PROFILE) .hpcvirt/images/offline.sqfs

clean:
	rm -rf paper/build paper/figures paper/generated paper/main.pdf logs .snakemake
