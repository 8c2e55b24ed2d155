"""Tests for hpcvirt.reference: the published values of the five studies."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from hpcvirt.reference import (
    STUDIES,
    latex_escape,
    load_reference,
    reference_table_tex,
)

REFERENCE_DIR = Path(__file__).resolve().parents[1] / "data" / "reference"


@pytest.fixture(scope="module")
def reference() -> pd.DataFrame:
    return load_reference(REFERENCE_DIR)


@pytest.fixture(scope="module")
def table(reference: pd.DataFrame) -> str:
    return reference_table_tex(reference)


def _data_rows(tex: str) -> list[str]:
    """The body rows of the tabular (between \\midrule after the header and \\bottomrule)."""
    body = tex.split(r"\midrule", 1)[1].split(r"\bottomrule", 1)[0]
    return [line for line in body.splitlines() if line.rstrip().endswith(r"\\")]


def _without_comments(tex: str) -> str:
    return "\n".join(line for line in tex.splitlines() if not line.lstrip().startswith("%"))


def _synthetic(**overrides: str) -> pd.DataFrame:
    row = {
        "study": "exposito2012",
        "figure_or_table": "Fig. 4 top",
        "testbed": "Testbed",
        "virtualization": "xen-hvm",
        "interconnect": "10GbE",
        "transport_middleware": "Hpcbench-TCP",
        "benchmark": "pingpong",
        "metric": "latency_us",
        "message_size_bytes": "",
        "processes_or_cores": "2",
        "nodes": "2",
        "value": "52",
        "value_kind": "stated_in_text",
        "source_quote": "",
        "notes": "",
        "comparator": "~",
        "origin": "measured",
        "row_id": "exposito2012-999",
    }
    row.update(overrides)
    return pd.DataFrame([row])


# --- loader ------------------------------------------------------------------


def test_loader_finds_all_five_studies(reference: pd.DataFrame) -> None:
    assert set(reference["study"]) == set(STUDIES)
    for study in STUDIES:
        assert (reference["study"] == study).sum() > 0, study


def test_loader_row_ids_unique_and_prefixed(reference: pd.DataFrame) -> None:
    assert reference["row_id"].is_unique
    assert all(rid.startswith(f"{s}-") for rid, s in zip(reference["row_id"], reference["study"]))


def test_loader_keeps_all_columns_and_values_as_written(reference: pd.DataFrame) -> None:
    for col in ("source_quote", "notes", "comparator", "origin", "value_kind", "row_id"):
        assert col in reference.columns
    by_id = reference.set_index("row_id")
    # trailing zeros as written in the paper's table, NA kept as text
    assert by_id.loc["nanos2010-013", "value"] == "205.00"
    assert by_id.loc["richter2015-031", "value"] == "NA"


def test_loader_reports_missing_file(tmp_path: Path) -> None:
    for study in STUDIES[1:]:
        (tmp_path / f"{study}.csv").write_bytes((REFERENCE_DIR / f"{study}.csv").read_bytes())
    with pytest.raises(FileNotFoundError, match=STUDIES[0]):
        load_reference(tmp_path)


def test_loader_rejects_duplicate_row_ids(tmp_path: Path) -> None:
    for study in STUDIES:
        (tmp_path / f"{study}.csv").write_bytes((REFERENCE_DIR / f"{study}.csv").read_bytes())
    path = tmp_path / "atif2016.csv"
    lines = path.read_text(encoding="utf-8").splitlines()
    path.write_text("\n".join(lines + [lines[1]]) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match="duplicate row_id"):
        load_reference(tmp_path)


# --- table -------------------------------------------------------------------


def test_table_is_booktabs_with_caption_and_label(table: str) -> None:
    for token in (r"\begin{table}", r"\caption{", r"\label{tab:reference}", r"\toprule", r"\midrule", r"\bottomrule"):
        assert token in table, token
    assert table.count(r"\begin{tabular}") == table.count(r"\end{tabular}") == 1


def test_table_contains_exposito_hpcbench_startup_latency(table: str) -> None:
    # Expósito et al.: Hpcbench (raw TCP) start-up latency of about 52 us on EC2
    rows = [r for r in _data_rows(table) if "Hpcbench" in r and r"($\mu$s)" in r]
    assert any(re.search(r"\\textasciitilde\{\}52(?!\d)", r) for r in rows), rows
    assert r"\citet{exposito2012}" in table


def test_table_merges_stated_ranges(table: str) -> None:
    assert r"\textasciitilde{}55--60" in table  # EC2 MPI start-up latency 55-60 us
    assert r"\textasciitilde{}28--35" in table  # CAG Xen PV start-up latency


def test_table_only_reported_point_to_point_values(table: str) -> None:
    rows = _data_rows(table)
    assert 1 <= len(rows) <= 25
    metrics = {r.split(" & ")[4] for r in rows}
    assert metrics <= {r"lat.\ ($\mu$s)", "bw (Gbit/s)", "bw (MiB/s)"}
    # derived values (overheads, ratios) and cited values do not appear
    assert "overhead" not in table
    cited = {r"\citet{atif2016}", r"\citet{richter2015}", r"\citet{ramakrishnan2011}"}
    assert not any(c in table for c in cited)
    # nanos2010 stream tables: native netperf total is there
    assert "811.73" in table and "1238" in table


def test_table_sorted_by_study_then_metric(table: str) -> None:
    studies, metrics, current = [], [], None
    for row in _data_rows(table):
        cells = row.split(" & ")
        m = re.match(r"\\citet\{(\w+)\}", cells[0])
        if m:
            current = m.group(1)
        studies.append(current)
        metrics.append(cells[4])
    keys = list(zip(studies, metrics))
    assert keys == sorted(keys)
    # each study cited once, on its first row
    assert len({s for s in studies}) == sum(1 for r in _data_rows(table) if r.startswith(r"\citet"))


def test_table_escapes_underscores(table: str, reference: pd.DataFrame) -> None:
    assert not re.search(r"(?<!\\)_", _without_comments(table)), "unescaped underscore"
    assert "up_to" not in table
    tex = reference_table_tex(_synthetic(testbed="set_up_1", transport_middleware="My_MPI"))
    assert r"set\_up\_1" in tex
    assert r"My\_MPI" in tex
    assert not re.search(r"(?<!\\)_", _without_comments(tex))


@pytest.mark.parametrize(
    ("raw", "escaped"),
    [
        ("a_b", r"a\_b"),
        ("50%", r"50\%"),
        ("A&B", r"A\&B"),
        ("#1", r"\#1"),
        ("~x", r"\textasciitilde{}x"),
        ("$5", r"\$5"),
        ("{x}", r"\{x\}"),
        ("a^b", r"a\textasciicircum{}b"),
        ("a\\b", r"a\textbackslash{}b"),
        ("snakemake --config", r"snakemake -{}-config"),
        ("a---b", r"a-{}-{}-b"),
    ],
)
def test_latex_escape(raw: str, escaped: str) -> None:
    assert latex_escape(raw) == escaped


def test_latex_specials_escaped_in_table() -> None:
    nasty = "Node_1 & 50% #2 ~$x^{y}\\z"
    tex = reference_table_tex(_synthetic(testbed=nasty, value="5_0%"))
    assert latex_escape(nasty) in tex
    assert r"5\_0\%" in tex
    body = "\n".join(_data_rows(tex))
    # outside the escapes, no special character survives in a body row
    stripped = re.sub(r"\\(textasciitilde|textasciicircum|textbackslash)\{\}|\\[&%#$_{}]", "", body)
    stripped = stripped.replace(r"\citet{exposito2012}", "").replace(r"lat.\ ($\mu$s)", "")
    stripped = stripped.replace(r"\\", "")
    stripped = stripped.replace(" & ", " | ")
    assert not re.search(r"[&%#_~^$\\{}]", stripped), stripped


def test_table_requires_point_to_point_rows() -> None:
    with pytest.raises(ValueError):
        reference_table_tex(_synthetic(origin="derived"))
