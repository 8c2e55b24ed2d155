"""The archived paper's main body (from the abstract to the threats to
validity) is at most 12 pages; the detailed results, every study in full and
the artifact appendix are in the supplement of the same PDF."""

from __future__ import annotations

import re
import subprocess

import pytest

MAIN_BODY_PAGES = 12


def label_page(aux: str, label: str) -> int:
    m = re.search(r"\\newlabel\{" + re.escape(label) + r"\}\{\{[^}]*\}\{(\d+)\}", aux)
    assert m, f"no label {label} in the paper's aux file"
    return int(m.group(1))


def test_label_page_reads_the_page_of_a_label():
    aux = "\\newlabel{sec:intro}{{1}{1}{Introduction}{section.1}{}}\n\\newlabel{hv:main-end}{{7}{13}{}{}{}}\n"
    assert label_page(aux, "hv:main-end") == 13
    with pytest.raises(AssertionError, match="no label sec:x"):
        label_page(aux, "sec:x")


@pytest.mark.e2e
@pytest.mark.no_measurement
def test_the_archived_papers_main_body_is_at_most_twelve_pages(archive_clone):
    aux = (archive_clone / "paper/build/main.aux").read_text()
    end = label_page(aux, "hv:main-end")
    supplement = label_page(aux, "sec:supplement")
    assert end <= MAIN_BODY_PAGES, f"the main body ends on page {end}"
    assert supplement > end
    # the supplement holds the per-study sections and the full claims tables
    for label in ("sec:details", "sec:per-study", "tab:claims-exposito2012", "sec:artifact"):
        assert label_page(aux, label) >= supplement, label
    # page 1 answers the title's question with the campaign's numbers
    page1 = subprocess.run(["pdftotext", "-l", "1", str(archive_clone / "paper/main.pdf"), "-"],
                           capture_output=True, text=True, check=True).stdout
    assert re.search(r"of the \d+ claims \d+ hold", page1), page1[:3000]
    assert re.search(r"latency by [0-9.]+ µs", page1), page1[:3000]


@pytest.mark.e2e
@pytest.mark.no_measurement
def test_the_archived_paper_omits_no_part(archive_clone):
    """The text is written for the archived campaign: every part of it has its data there (a part
    whose numbers the archive lacks is left out of the paper, and that must not go unnoticed)."""
    log = (archive_clone / "logs/paper/parts.log").read_text()
    assert "omitted" not in log, log
