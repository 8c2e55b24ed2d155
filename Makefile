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
FEATURES ?= base slurm vm containers tools
# What the default study (config/config.yaml: local, bridge, vm) needs.
STUDY_FEATURES ?= base vm

.PHONY: all paper deps deps-study deps-all test figure dry-run lint archive image clean help

all: paper

help:
	@echo "make            install, measure a new campaign on this machine, build paper/main.pdf"
	@echo "make test       install, run the whole test suite (unit, workflow, end-to-end)"
	@echo "make figure     rebuild paper/figures/\$$FIGURE.pdf from the committed archive (no measuring)"
	@echo "make dry-run    show the jobs of the full study without running them"
	@echo "make archive    re-measure the archived campaign named in config/config.yaml"

deps:
	@workflow/scripts/install-deps.sh base

deps-study:
	@workflow/scripts/install-deps.sh $(STUDY_FEATURES)

deps-all:
	@workflow/scripts/install-deps.sh $(FEATURES)

paper: deps-study
	@echo "hpcvirt: building the pinned suites the study runs (NPB, IMB, OSU; cached after the first time)"
	PYTHONPATH=workflow/lib $(VENV)/bin/python -m hpcvirt.build --study --jobs 2
	@echo "hpcvirt: measuring campaign $(CAMPAIGN) (raw outputs in data/raw/$(CAMPAIGN)/)"
	snakemake $(PROFILE) --config campaign=$(CAMPAIGN)
	@echo "hpcvirt: paper/main.pdf built from campaign $(CAMPAIGN)"

archive: deps-study
	snakemake $(PROFILE)

test: deps-all
	$(VENV)/bin/python -m pytest -ra

figure: deps
	snakemake $(PROFILE) paper/figures/$(FIGURE).pdf

dry-run: deps-study
	snakemake $(PROFILE) -n --config campaign=$(CAMPAIGN)

lint: deps
	snakemake --lint
	snakefmt --check Snakefile workflow/rules

image: deps-all
	snakemake $(PROFILE) .hpcvirt/images/offline.sqfs

clean:
	rm -rf paper/build paper/figures paper/generated paper/main.pdf logs .snakemake
