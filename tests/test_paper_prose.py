"""The paper's sentences about results, claims and threats type no number and no verdict (hpcvirt.prose)."""

from pathlib import Path

import pytest

from hpcvirt import prose

ROOT = Path(__file__).resolve().parents[1]


def test_the_results_claims_and_threats_type_no_number():
    assert len(prose.files(ROOT)) >= 10
    assert prose.check(ROOT) == []


@pytest.mark.parametrize("sentence, typed", [
    ("MILC takes 2.5 times its time over shared memory.", ["2.5"]),
    ("a loss of 35\\,\\% across the bridge", ["35\\,\\%"]),
    ("on 64 processes of class C", ["64"]),
    ("the ranks share the 2 cores", ["2"]),
    ("runs of 0.1~s", ["0.1~s"]),
    ("over the link limited to 10\\,Gbit/s", ["10\\,Gbit/s"]),     # a link's rate: \\hvRate<Testbed>
    ("\\ifnum\\hvReps=1 one round\\else the 3 rounds\\fi", ["3"]),
])
def test_a_typed_number_is_found(sentence, typed):
    assert [t for _, t in prose.typed_numbers(sentence)] == typed


@pytest.mark.parametrize("sentence", [
    "MILC takes \\hvAppVmMilcVm{} \\hvint{\\hvAppVmMilcVm} times (\\hvci{\\hvOvhLatVmOpenmpiNet})",
    "the claim \\claimsays{RAM-1}{not testable} (\\claimthreshold{RAM-1}{2})",
    "as in Fig.~5 of the study and Table~\\ref{tab:values-atif2016}",
    "across the bridge limited to \\hvvalue{\\hvRateBridgeTenG}, four iperf3 streams",
    "the knee where the bandwidth falls 20\\,\\% below its maximum, L3/4",
    "% a comment may say 42",
    "(each round boots them)\\ifnum\\hvRepsGuests=1, so their values carry no interval\\fi.",
])
def test_macros_references_names_and_method_constants_are_not_typed_numbers(sentence):
    assert prose.typed_numbers(sentence) == []


def test_the_message_names_file_line_and_token(tmp_path):
    (tmp_path / "paper/sections/parts").mkdir(parents=True)
    (tmp_path / "paper/sections/claims.tex").write_text("All fine: \\claimvalue{EXP-1}{1}.\nIt is 3 times slower.\n")
    assert prose.check(tmp_path) == ["paper/sections/claims.tex:2: '3' is typed, not generated: use a macro of "
                                     "paper/generated/numbers.tex or a claim's \\claimvalue/\\claimthreshold"]


@pytest.mark.parametrize("text, line", [
    ("All fine.\nThe claim EXP-4 holds on the bridge.", 2),
    ("Across the guests EXP-5 is not testable; the rest is fine.", 1),
    ("ATI-15 does not hold\non this host.", 1),
])
def test_a_verdict_typed_into_a_sentence_is_found(text, line):
    found = prose.typed_verdicts(text)
    assert len(found) == 1 and found[0][0] == line, found


@pytest.mark.parametrize("text", [
    "the claim \\claimsays{EXP-4}{holds} (\\claimvalue{EXP-4}{1}, claim EXP-4).",
    "A claim holds when the whole interval meets the threshold.",
    "For MILC (claim RAM-6) the ratio is \\claimvalue{RAM-6}{1}. It holds for NPB CG.",
    "% EXP-4 holds: a comment",
])
def test_verdicts_through_claimsays_and_sentences_without_a_claim_are_not_typed_verdicts(text):
    assert prose.typed_verdicts(text) == []


def test_a_planted_verdict_fails_the_check_naming_file_line_and_sentence(tmp_path):
    (tmp_path / "paper/sections/parts").mkdir(parents=True)
    (tmp_path / "paper/sections/threats.tex").write_text("Fine: \\claimsays{EXP-1}{holds}.\n\nSo EXP-1 holds.\n")
    assert prose.check(tmp_path) == [
        "paper/sections/threats.tex:3: the sentence \"So EXP-1 holds.\" states a claim's verdict typed into the "
        "text: write it as \\claimsays{ID}{verdict}, which the claims rule checks against the data"]
