"""Numbers and verdicts typed into the paper's introduction and its sentences about results, claims and threats.

Every number and every finding there comes from a generated macro
(``paper/generated/numbers.tex``) or a claim's verdict and values
(``\\claimsays``, ``\\claimvalue``, ``\\claimthreshold``).  A digit typed
into those sentences is a number no rule produced: :func:`typed_numbers`
finds it; a sentence that names a claim and states its verdict in words
instead of through ``\\claimsays`` is a finding nothing checks against the
data: :func:`typed_verdicts` finds it.  What may be typed is listed in :data:`ALLOWED`, each with why:
references, names that contain digits, and the method's own constants.
"""

from __future__ import annotations

import re
from pathlib import Path

#: The sentences this applies to: the introduction (the campaign's testbeds), the results, the claims and
#: the threats to validity.
FILES = ("paper/sections/introduction.tex", "paper/sections/results.tex", "paper/sections/details.tex",
         "paper/sections/claims.tex", "paper/sections/threats.tex",
         "paper/sections/parts/results-*.tex", "paper/sections/parts/threats-*.tex")

#: A claim's id (data/reference/claims.yaml).
_CLAIM_ID = r"\b(?:EXP|NAN|ATI|RAM|RIC)-\d+\b"

#: What may be typed, and why.
ALLOWED: tuple[tuple[str, str], ...] = (
    (_CLAIM_ID, "a claim's id"),
    (r"(?:Fig\.|Figs\.|Table|and)~\d+[a-z]?", "a figure or table of a study, by its own number"),
    (r"L3(?:/4)?|10G|56G|IPoIB", "a name with a digit (the cache level, 10G and 56G Ethernet, IP over InfiniBand)"),
    (r"\$T\(1\)/T\(n\)\$", "the speed-up's definition"),
    (r"20\\,\\%", "the knee's definition: the bandwidth 20 % below its maximum (claims.yaml, at: {knee: 0.2})"),
    (r"\(1:", "the reference value of a ratio axis (1: as fast as native)"),
    (r"\\ifnum\\hv[A-Za-z]+[<=>]\d+", "a condition on a generated count (\\ifnum), which chooses a sentence and "
     "prints nothing"),
)

_COMMENT = re.compile(r"(?<!\\)%.*")
# a command with its optional and braced arguments (one level of nesting inside braces)
_COMMAND = re.compile(r"\\[A-Za-z@]+\*?(?:\[[^\]]*\])*(?:\{(?:[^{}]|\{[^{}]*\})*\})*")
_TOKEN = re.compile(r"\S*\d\S*")


def typed_numbers(text: str) -> list[tuple[int, str]]:
    """(line, token) for every token with a digit that is not inside a command's arguments and not
    allowed by :data:`ALLOWED`."""
    from .benchmarks import REGISTRY

    # a benchmark's name may hold a digit too
    names = [re.escape(b.name) for b in REGISTRY if re.search(r"\d", b.name)]
    allowed = re.compile("|".join([f"(?:{a})" for a, _ in ALLOWED] + names))
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        line = _COMMENT.sub("", line)
        line = allowed.sub(" ", line)
        line = _COMMAND.sub(" ", line)
        out.extend((n, t) for t in _TOKEN.findall(line))
    return out


_VERDICT = re.compile(r"\b(?:holds?|does not hold|do not hold|inconclusive|not testable|not tested|refuted|"
                      r"confirmed)\b", re.IGNORECASE)


def typed_verdicts(text: str) -> list[tuple[int, str]]:
    """(line, sentence) for every sentence that names a claim and states a verdict typed into the text
    rather than through ``\\claimsays`` (which the claims rule checks against the data): a claim id and a
    verdict word outside the arguments of a command, in one sentence."""
    lines = [_COMMENT.sub("", line) for line in text.splitlines()]
    flat = "\n".join(lines)
    out = []
    start = 0
    for m in re.finditer(r"(?<=[.;:!?])\s+|\n\s*\n", flat + "\n\n"):
        sentence, begin = flat[start:m.start()], start
        start = m.end()
        bare = _COMMAND.sub(" ", sentence)
        if re.search(_CLAIM_ID, bare) and _VERDICT.search(bare):
            out.append((flat.count("\n", 0, begin) + 1, " ".join(sentence.split())))
    return out


def files(root: Path) -> list[Path]:
    return sorted({p for pattern in FILES for p in Path(root).glob(pattern)})


def check(root: Path) -> list[str]:
    """One message per typed number and per typed verdict in the paper's results, claims and threats:
    file:line and the token or the sentence."""
    out = []
    for p in files(root):
        text = p.read_text(encoding="utf-8")
        out += [f"{p.relative_to(root)}:{n}: '{tok}' is typed, not generated: use a macro of "
                f"paper/generated/numbers.tex or a claim's \\claimvalue/\\claimthreshold"
                for n, tok in typed_numbers(text)]
        out += [f"{p.relative_to(root)}:{n}: the sentence \"{sentence}\" states a claim's verdict typed into "
                f"the text: write it as \\claimsays{{ID}}{{verdict}}, which the claims rule checks against the data"
                for n, sentence in typed_verdicts(text)]
    return out
