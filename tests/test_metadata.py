"""Licence and citation metadata of the artifact: LICENSE matches what the
paper and the package say, CITATION.cff passes the Citation File Format's
own validator (cffconvert, installed by install-deps.sh's `tools` feature),
.zenodo.json agrees with it, and the software versions it lists are those
the archived campaign's provenance records."""

from __future__ import annotations

import json
import re
import subprocess
import tomllib
from pathlib import Path

import pandas as pd
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
CFFCONVERT = ROOT / ".hpcvirt/tools/cffconvert/bin/cffconvert"
CFF = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
CAMPAIGN = yaml.safe_load((ROOT / "config/config.yaml").read_text())["campaign"]


def cffconvert(*args: str) -> subprocess.CompletedProcess:
    assert CFFCONVERT.exists(), f"{CFFCONVERT} is missing: run workflow/scripts/install-deps.sh tools"
    return subprocess.run([str(CFFCONVERT), *args], capture_output=True, text=True, timeout=120)


def test_license_is_the_one_the_paper_and_the_package_state():
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License") and "Permission is hereby granted, free of charge" in text
    assert "under the MIT license" in (ROOT / "paper/sections/appendix.tex").read_text()
    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["license"] == {"text": "MIT"}
    assert CFF["license"] == "MIT"


def test_citation_cff_is_valid():
    res = cffconvert("--validate", "-i", str(ROOT / "CITATION.cff"))
    assert res.returncode == 0, res.stdout + res.stderr


def test_the_validator_rejects_a_broken_citation(tmp_path):
    broken = dict(CFF)
    del broken["authors"]
    (tmp_path / "CITATION.cff").write_text(yaml.safe_dump(broken, allow_unicode=True))
    res = cffconvert("--validate", "-i", str(tmp_path / "CITATION.cff"))
    assert res.returncode != 0 and "authors" in res.stdout + res.stderr


def test_zenodo_metadata_agrees_with_the_citation():
    zenodo = json.loads((ROOT / ".zenodo.json").read_text(encoding="utf-8"))
    res = cffconvert("-f", "zenodo", "-i", str(ROOT / "CITATION.cff"))
    assert res.returncode == 0, res.stderr
    for key, value in json.loads(res.stdout).items():
        assert zenodo[key] == value, key
    assert zenodo["upload_type"] == "software"
    assert len(zenodo["references"]) == len(CFF["references"])
    dois = {r["doi"] for r in CFF["references"] if "doi" in r}
    assert {r["identifier"] for r in zenodo["related_identifiers"]} == dois


def test_the_five_studies_are_referenced():
    bib = (ROOT / "paper/refs.bib").read_text(encoding="utf-8")
    titles = [r["title"] for r in CFF["references"] if r["type"] != "software"]
    assert len(titles) == 5
    for key in ("exposito2012", "nanos2010", "atif2016", "ramakrishnan2011", "richter2015"):
        entry = re.search(r"@\w+\{" + key + r",(.*?)\n\}", bib, re.S).group(1)
        bib_title = re.sub(r"[{}\\\s]+", " ", re.search(r"title\s*=\s*\{(.*?)\},\n", entry, re.S).group(1))
        words = [w for w in re.findall(r"[A-Za-z]{5,}", bib_title)]
        assert any(all(w in t for w in words) for t in titles), (key, words)


def _cited(title: str) -> str:
    return str(next(r["version"] for r in CFF["references"] if r["title"] == title))


def test_software_versions_are_those_of_the_archived_campaign():
    res = ROOT / "data/results" / CAMPAIGN
    prov = json.loads((res / "local/provenance.json").read_text())
    assert _cited("Open MPI") == prov["mpi"]["Open MPI"]["version"]
    assert _cited("MPICH") == prov["mpi"]["MPICH"]["version"]
    upstream = {p: re.match(r"(?:\d+:)?([0-9.]+)", v).group(1) for p, v in prov["host"]["packages"].items()}
    assert _cited("NetPIPE") == upstream["netpipe-openmpi"] == upstream["netpipe-mpich2"]
    assert _cited("qperf") == upstream["qperf"]
    tidy = pd.concat(pd.read_csv(res / tb / "tidy.csv", dtype=str, keep_default_na=False) for tb in ("local", "vm"))
    suites = tidy[tidy["suite_version"] != ""].groupby("benchmark")["suite_version"].agg(set)
    assert suites["imb"] == {_cited("Intel MPI Benchmarks")}
    assert suites["osu_latency"] == {_cited("OSU Micro-Benchmarks")}
    assert set().union(*(v for b, v in suites.items() if b.startswith("npb-"))) == {
        _cited("NAS Parallel Benchmarks (MPI)")}
    qemu = {(json.loads(p.read_text())["context"].get("testbed_info") or {}).get("qemu_version")
            for p in (ROOT / "data/raw" / CAMPAIGN / "vm").rglob("rep-1.json")}
    assert {re.search(r"version ([0-9.]+)", q).group(1) for q in qemu if q} == {_cited("QEMU")}
    pins = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert f"snakemake=={_cited('Snakemake')}" in pins


@pytest.mark.parametrize("path", ["LICENSE", "CITATION.cff", ".zenodo.json"])
def test_metadata_files_are_tracked(path):
    tracked = subprocess.run(["git", "ls-files", "--error-unmatch", path], cwd=ROOT, capture_output=True)
    assert tracked.returncode == 0, f"{path} is not committed"
