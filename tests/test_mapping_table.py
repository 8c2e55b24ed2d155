"""The table of the studies' experiments and the benchmarks that stand in for
them comes from the benchmarks' declarations (``counterparts``) and the
campaign: a row per declared counterpart of each benchmark the campaign ran,
its campaign facts from the campaign's numbers."""

from __future__ import annotations

import glob
import re
from pathlib import Path

import pandas as pd
import pytest

from hpcvirt.benchmarks import REGISTRY
from hpcvirt.labels import MACRO_USE
from hpcvirt.paper import benchmark_numbers
from hpcvirt.reference import STUDIES
from hpcvirt.tables import mapping_tex

ROOT = Path(__file__).resolve().parents[1]


def _archive_tidy() -> pd.DataFrame:
    campaign = re.search(r'^campaign: "([^"]+)"', (ROOT / "config/config.yaml").read_text(), re.M).group(1)
    paths = sorted(glob.glob(str(ROOT / f"data/results/{campaign}/*/tidy.csv")))
    return pd.concat([pd.read_csv(p, low_memory=False) for p in paths], ignore_index=True)


def _names(tidy: pd.DataFrame) -> set[str]:
    """The numbers of the benchmarks' own (their ``numbers``), and those the table's rows take from the
    campaign's other producers."""
    made = {n for _, m in benchmark_numbers(tidy) for n in m}
    return made | {"hvCores", "hvPlaceRanks", "hvStreamsCount"}


@pytest.mark.parametrize("bench", list(REGISTRY), ids=lambda b: b.name)
def test_every_benchmark_says_which_experiments_of_the_studies_it_stands_in_for(bench):
    assert bench.counterparts, f"{bench.name}: declare its counterparts (hpcvirt.benchmarks.Counterpart)"
    for c in bench.counterparts:
        cited = set(re.findall(r"\\citet\{([^}]+)\}", c.study))
        assert cited and cited <= set(STUDIES), (bench.name, c.study)
        # a number of what the campaign ran is a macro, not typed (a name may hold a digit: iperf3, su3_rmd)
        typed = re.findall(r"(?<![A-Za-z0-9])\d+", MACRO_USE.sub("", c.ours + c.differences))
        assert not typed, (bench.name, c, "a campaign fact typed instead of a macro")


def test_the_archive_has_a_row_per_counterpart_of_what_it_ran_with_its_numbers():
    tidy = _archive_tidy()
    tex = mapping_tex(tidy, _names(tidy))
    rows = [line for line in tex.splitlines() if line.endswith("\\\\") and " & " in line][1:]   # after the header
    lacking = [b.name for b in REGISTRY if not any(b.owns(r) for r in tidy["benchmark"].unique())]
    assert not lacking, f"the archive has no rows of {lacking}: measure them into it (make archive)"
    assert len(rows) == sum(len(b.counterparts) for b in REGISTRY)
    assert "NPB \\hvNpbKernels & " in tex and "\\label{tab:mapping}" in tex
    assert "not the archived" not in tex and "\\begin{tabular}" in tex


def test_a_campaign_has_the_rows_of_the_benchmarks_it_ran_only():
    tidy = _archive_tidy()
    osu = tidy[tidy["benchmark"].astype(str).str.startswith("osu_")]
    tex = mapping_tex(osu, _names(osu) | {"hvCores"})
    assert "OSU \\hvOsuTests & \\citet{atif2016}" in tex
    assert "NPB" not in tex and "NetPIPE" not in tex and "iperf3" not in tex
    assert "no benchmark that stands in" in mapping_tex(tidy.iloc[:0], set())


def test_a_row_that_names_a_number_the_campaign_lacks_is_an_error():
    tidy = _archive_tidy()
    npb = tidy[tidy["benchmark"].astype(str).str.startswith("npb-")]
    with pytest.raises(ValueError, match=r"NPB \\\\hvNpbKernels.*hvNpbClasses"):
        mapping_tex(npb, _names(npb) - {"hvNpbClasses"})


def test_the_campaign_facts_of_the_rows_follow_the_rows():
    """NPB's kernels, classes and process counts, the applications' rank counts and pw.x's atoms are what
    the campaign ran."""
    tidy = _archive_tidy()
    made = {n: v for _, m in benchmark_numbers(tidy) for n, v in m.items()}
    npb = tidy[tidy["benchmark"].astype(str).str.startswith("npb-")]
    assert made["hvNpbClasses"] == " and ".join(sorted(set(npb["variant"].astype(str))))
    w = {n: v for _, m in benchmark_numbers(npb[npb["benchmark"] == "npb-cg"].assign(ranks=2)) for n, v in m.items()}
    assert w["hvNpbKernels"] == "CG" and w["hvNpbRanksOneHost"] == "2"
    qe = tidy[tidy["benchmark"] == "qe-pw"]
    atoms = sorted({int(v[2:].split()[0]) for v in qe["variant"]})
    assert made["hvQeAtoms"] == " and ".join(map(str, atoms))
    one = {n: v for _, m in benchmark_numbers(qe[qe["variant"].str.startswith("Si8 ")]) for n, v in m.items()}
    assert one["hvQeAtoms"] == "8"
    milc = tidy[tidy["benchmark"] == "milc"]
    assert made["hvMilcRanks"] == " and ".join(map(str, sorted(set(milc["ranks"].astype(int)))))
    one_rank = {n: v for _, m in benchmark_numbers(milc[milc["ranks"] == 1]) for n, v in m.items()}
    assert one_rank["hvMilcRanks"] == "1"
