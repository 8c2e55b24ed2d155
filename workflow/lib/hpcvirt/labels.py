"""Labels, units, escaping and number formatting: the one module the paper's
macros and tables, the figures, the claims and the study redraws take them
from, so that a data path or an MPI library is called the same everywhere
and a number is written the same way in every table.

Nothing here names a benchmark: a benchmark's own display name is part of
its declaration (:mod:`hpcvirt.benchmarks`), and this module imports none,
so that the benchmarks' own views may use it.
"""

from __future__ import annotations

import math
import re

from . import kinds

# ------------------------------------------------------------------ labels
#: What a point-to-point benchmark below MPI (its rows' ``mpi``: ``none``) measures.
RAW_TCP = "raw TCP"
#: MPI libraries by the tidy column ``mpi`` (``none``: a raw TCP tool).
MPI_LABEL = {"openmpi": "Open MPI", "mpich": "MPICH", "none": RAW_TCP}


def mpi_label(mpi: str, benchmark: str | None = None) -> str:
    """A row's MPI library as tables and legends name it; rows without MPI are raw
    TCP, named with their tool (``raw TCP (qperf)``) where the row says which."""
    if mpi == "none" and benchmark:
        return f"{RAW_TCP} ({benchmark})"
    return MPI_LABEL.get(mpi, mpi)
#: What carries a site's path between its nodes where it is not TCP (``mpi.<mpi>.paths.net.fabric``).
FABRIC_LABEL = {"ipoib": "TCP over InfiniBand", "ib": "InfiniBand", "roce": "RoCE"}
#: Data paths by the tidy column ``interconnect``.
PATH_LABEL = {"shm": "shared memory", "tcp-loopback": "TCP loopback", "tcp": "TCP",
              "shm+net": "shared memory and network", **FABRIC_LABEL}
#: The same paths as part of a macro name (``tcp`` is the network).
PATH_KEY = {"shm": "Shm", "tcp-loopback": "Tcp", "tcp": "Net"}
#: Container runtimes by the suffix of the virtualization label
#: (``none+charliecloud``); the bare host is ``none``.
RUNTIME_LABEL = {"none": "bare host", "charliecloud": "Charliecloud", "apptainer": "Apptainer"}
#: Process placements of the stencil.
PLACEMENT_LABEL = {"intra-node": "intra-node", "mixed": "mixed", "inter-node": "inter-node"}
#: Data paths of the streams and data-path experiments in the order they are
#: shown: the baseline without a network, the software switch, the direct
#: path, the tunnels (rate-limited links follow their path).
DATAPATH_ORDER = ("loopback", "bridge", "direct (macvlan)", "VXLAN tunnel", "GRE tunnel")
#: What a testbed's link field names (``macvlan, rate 1gbit``), as shown.
_LINK_PATH = {"macvlan": "direct (macvlan)", "vxlan": "VXLAN tunnel", "gretap": "GRE tunnel",
              "macvtap": "guests, direct (macvtap)"}
#: The accelerator of a guest's virtualization label, as the report's labels say it (short: the
#: captions say that under TCG the VM numbers measure the emulator, not a hypervisor).
ACCEL_LABEL = {"qemu-tcg": "TCG (emulation)", "qemu-kvm": "KVM"}
#: Comparators of the studies' reported values (reference CSVs), in LaTeX.
COMPARATOR_TEX = {"=": "", "": "", "~": "$\\approx$", "<": "$<$", ">": "$>$", "<=": "$\\leq$", ">=": "$\\geq$",
                  "up_to": "up to"}
#: The same as plain text, on figures.
COMPARATOR_TEXT = {"~": "≈", "<": "<", "up_to": "≤", ">": ">", "<=": "≤", ">=": "≥"}


def normalize_units(tidy):
    """Tidy rows with bandwidth in Gbit/s (:data:`TO_GBITS`: the unit of Expósito et al., in which every
    bandwidth is compared), latency in us."""
    df = tidy.copy()
    bw = df["metric"] == "bandwidth"
    if not bw.any():
        return df
    factor = df.loc[bw, "unit"].map(TO_GBITS)
    if factor.isna().any():
        raise ValueError(f"unknown bandwidth units: {sorted(df.loc[bw, 'unit'][factor.isna()].unique())}")
    df.loc[bw, "value"] = df.loc[bw, "value"] * factor
    df.loc[bw, "unit"] = "Gbit/s"
    return df


def path_label(interconnect) -> str:
    return PATH_LABEL.get(interconnect, interconnect)


def path_key(interconnect: str) -> str:
    """A data path as part of a macro name (``shm`` -> ``Shm``)."""
    return PATH_KEY.get(interconnect, None) or camel(interconnect)


def is_vm(virtualization) -> bool:
    """Whether a tidy row's virtualization label is a guest's (``qemu-tcg``, ``qemu-kvm``)."""
    return bool(kinds.guest_accel(virtualization))


def is_emulated(virtualization) -> bool:
    """Whether the guests ran under software emulation (their numbers measure the emulator)."""
    return kinds.guest_accel(virtualization) == "tcg"


def runtime_of(virtualization) -> str:
    """``none`` -> ``none``; ``none+apptainer`` -> ``apptainer``."""
    v = str(virtualization)
    return v.split("+", 1)[1] if "+" in v else v


def testbed_label(testbed: str, virtualization: str | None) -> str:
    """The testbed name, with its virtualization (for VMs: the accelerator)."""
    if virtualization and virtualization != "none":
        return f"{testbed} ({virtualization})"
    return testbed


def rate_label(link_part: str) -> str:
    """``rate 1gbit`` -> ``1 Gbit/s``."""
    return link_part.replace("rate ", "").replace("gbit", " Gbit/s").replace("mbit", " Mbit/s")


def interconnect_class(virtualization: str, interconnect: str, link: str | None) -> str:
    """The interconnect class a configuration stands for, from its tidy
    columns: ``shared memory``, ``TCP loopback``, ``bridge, 1 Gbit/s``,
    ``guests (TCG)``, ``network`` (a bare-metal cluster's), ``VM cluster (kvm)``, ..."""
    v, link = str(virtualization), (link if isinstance(link, str) else "")
    if v == "none":   # a bare-metal cluster's path between its nodes is its network (its fabric, declared)
        return {"shm": "shared memory", "tcp-loopback": "TCP loopback",
                "tcp": "network", **FABRIC_LABEL}.get(interconnect, interconnect)
    if hyp := kinds.cluster_hypervisor(v):
        on = "shared memory" if interconnect == "shm" else FABRIC_LABEL.get(interconnect)
        return f"VM cluster ({hyp}){', ' + on if on else ''}"
    where = "guests" if is_vm(v) else "bridge" if kinds.is_bridge(v) else v
    rate = rate_label(link) if link else ""
    return f"{where}, {rate}" if rate else (f"{where} (TCG)" if is_emulated(v) else where)


def datapath_label(virtualization, link) -> str:
    """``loopback`` (one namespace, no network), ``bridge``, ``direct
    (macvlan)``, ``VXLAN tunnel``, ``guests`` (bridged), ``guests, direct
    (macvtap)``, each with ``, <rate>`` when the link is limited (``bridge,
    1 Gbit/s``)."""
    v, link = str(virtualization), (link if isinstance(link, str) else "")
    if v.startswith("none"):
        return "loopback"
    if hyp := kinds.cluster_hypervisor(v):      # a site's or a cloud's VMs: their own network, not the project's link
        return f"VM cluster ({hyp})"
    parts = [p.strip() for p in link.split(",") if p.strip()]
    where = next((_LINK_PATH[p] for p in parts if p in _LINK_PATH), "guests" if is_vm(v) else "bridge")
    return ", ".join([where, *(rate_label(p) for p in parts if p.startswith("rate "))])


#: A part of a declared text (``data/reference/claims.yaml``, ``reproduction.yaml``) that is true only
#: where the campaign's guests ran under that accelerator: ``{tcg: (TCG here)}``, ``{kvm: (KVM here)}``.
_ACCEL_PART = re.compile(r"\{(tcg|kvm):([^{}]*)\}")


def accel_text_error(text) -> str | None:
    """Why a declared text's braces are not accelerator parts (None: they are, or it has none); a
    mapping or list: the first of its texts that fails, quoted."""
    if isinstance(text, dict):
        text = list(text.values())
    if isinstance(text, list):
        return next((why for why in map(accel_text_error, text) if why), None)
    rest = _ACCEL_PART.sub("", text) if isinstance(text, str) else ""
    if "{" in rest or "}" in rest:
        return (f"{text[:60]!r}: braces only around a part said under one accelerator, {{tcg:...}} or "
                "{kvm:...}, not nested")
    return None


def for_accel(text, accel: str | None):
    """A declared text as a campaign says it: its ``{tcg:...}`` parts kept where the guests ran under TCG,
    its ``{kvm:...}`` parts under KVM, and neither without guests (``accel`` None); in a mapping or a
    list, every text."""
    if isinstance(text, dict):
        return {k: for_accel(v, accel) for k, v in text.items()}
    if isinstance(text, list):
        return [for_accel(v, accel) for v in text]
    if not isinstance(text, str):
        return text
    return _ACCEL_PART.sub(lambda m: m.group(2) if m.group(1) == accel else "", text)


def guests_accel(tidy) -> str | None:
    """The accelerator of a campaign's guests by its rows: ``tcg`` where any ran emulated (those numbers
    measure the emulator), else ``kvm``; None without guests."""
    accels = {kinds.guest_accel(v) for v in tidy["virtualization"].unique()} - {""}
    return "tcg" if "tcg" in accels else "kvm" if accels else None


# ------------------------------------------------------------------ LaTeX
_LATEX_SPECIALS: dict[str, str] = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
}
_LATEX_RE = re.compile("|".join(re.escape(c) for c in _LATEX_SPECIALS))
_SYMBOLS = {"µ": r"\textmu{}", "×": r"$\times$", "≈": r"$\approx$", "≥": r"$\geq$", "≤": r"$\leq$",
            "→": r"$\to$", "−": "-", "–": "--", "≪": r"$\ll$", "³": r"\textsuperscript{3}", "½": "1/2", "¼": "1/4",
            "±": r"$\pm$"}


def latex_escape(text: object) -> str:
    """Escape the LaTeX special characters of ``text`` (``str()`` of it); hyphens
    print as typed (``--config``, not an en dash and ``config``)."""
    return re.sub(r"-(?=-)", "-{}", _LATEX_RE.sub(lambda m: _LATEX_SPECIALS[m.group(0)], str(text)))


def tex(text: object) -> str:
    """``latex_escape`` and the symbols of the studies' and claims' texts
    (µ, ×, ≈, ≥, ≤, →, ≪, ±, ³, ½, ¼, the minus sign and the en dash) as LaTeX."""
    s = latex_escape(text)
    for a, b in _SYMBOLS.items():
        s = s.replace(a, b)
    return s


NUMBER_WORDS = {0: "Zero", 1: "One", 2: "Two", 3: "Three", 4: "Four", 5: "Five", 6: "Six", 7: "Seven", 8: "Eight",
                9: "Nine", 10: "Ten", 16: "Sixteen", 40: "Forty", 100: "Hundred"}


def count_text(n: int) -> str:
    """A count as a sentence writes it: in words up to ten (``8`` -> ``eight``), digits above."""
    return NUMBER_WORDS[int(n)].lower() if 0 <= int(n) <= 10 else str(int(n))


def counted(counts, noun: str) -> str:
    """Counts with their noun, as a figure's title writes them: ``[1]`` -> ``1 round``, ``[3, 5]`` ->
    ``3/5 rounds`` (``noun`` singular; the plural adds an s)."""
    ns = sorted({int(n) for n in counts})
    return f"{'/'.join(map(str, ns))} {noun if ns == [1] else noun + 's'}"


def digit_words(n: int) -> str:
    """A whole number digit by digit in words (``16`` -> ``OneSix``)."""
    return "".join(NUMBER_WORDS[int(c)] for c in str(int(n)))


def camel(word: str) -> str:
    """A name as part of a LaTeX macro name: words capitalised, numbers in
    words (``bridge-10g`` -> ``BridgeTenG``)."""
    parts = re.findall(r"[A-Za-z]+|[0-9]+", str(word))
    parts = [NUMBER_WORDS.get(int(p), digit_words(p)) if p.isdigit() else p for p in parts]
    out = "".join(p[:1].upper() + p[1:].lower() for p in parts)
    if not re.fullmatch(r"[A-Za-z]+", out):
        raise ValueError(f"{word!r} cannot become part of a LaTeX macro name")
    return out


def and_list(items) -> str:
    """``A``, ``A and B``, ``A, B and C``: a list as the text names it."""
    items = list(items)
    return " and ".join([", ".join(items[:-1]), items[-1]]) if len(items) > 1 else "".join(items)


#: A macro name of the paper's numbers: letters only, ``hv`` first.
MACRO_NAME = re.compile(r"hv[A-Za-z]+")
#: A number's macro where LaTeX text uses it (group 1: its name; ``\\hvpart`` and other commands of the
#: paper's own begin with a lowercase letter after ``hv``).
MACRO_USE = re.compile(r"\\(hv[A-Z][A-Za-z]*)")


def macro(name: str, value: str) -> str:
    if not MACRO_NAME.fullmatch(name):
        raise ValueError(f"bad macro name {name!r}")
    return f"\\newcommand{{\\{name}}}{{{value}}}\n"


class Macros(dict):
    """The paper's numbers as data: macro name -> its LaTeX text, in the
    order they are made.  A name is checked as it is set (letters only,
    ``hv`` first) and is set once: a second value for it (two configurations
    that map to one name, two producers of one number) raises instead of
    replacing the first.  :meth:`tex` writes them as ``\\newcommand`` lines."""

    def __init__(self, *others, **values: str):
        super().__init__()
        for other in others:
            self.update(other)
        self.update(values)

    def __setitem__(self, name: str, value: str) -> None:
        if not MACRO_NAME.fullmatch(str(name)):
            raise ValueError(f"bad macro name {name!r}")
        if name in self:
            raise ValueError(f"macro \\{name} is made twice: {self[name]!r} and {value!r}")
        super().__setitem__(name, str(value))

    def update(self, other=(), **values: str) -> None:
        for name, value in (other.items() if hasattr(other, "items") else other):
            self[name] = value
        for name, value in values.items():
            self[name] = value

    def __ior__(self, other):
        self.update(other)
        return self

    def setdefault(self, name, value=None):
        raise TypeError("Macros are set once: use m[name] = value")

    def tex(self) -> str:
        return "".join(macro(name, value) for name, value in self.items())


# ------------------------------------------------------------------ numbers
def fmt(x: float, digits: int = 3) -> str:
    """Significant digits, no exponent for the ranges we report (the paper's numbers)."""
    if x is None or not math.isfinite(x):
        return "n/a"
    if x == 0:
        return "0"
    decimals = max(0, digits - 1 - int(math.floor(math.log10(abs(x)))))
    return f"{x:.{decimals}f}"


#: What a table's caption says of a value of one round (:func:`fmt_ci` prints no interval for it).
ONE_ROUND = " A value of one round is its median alone: one round has no interval."


def emulated_note(virtualizations) -> str:
    """A caption's sentence that the emulated guests' values measure the emulator, where a row of the table
    ran under TCG (empty otherwise)."""
    emulated = sorted({str(v) for v in virtualizations.dropna() if is_emulated(v)})
    return (f" {', '.join(emulated)}: guests under TCG software emulation, whose values measure the emulator, "
            "not a hypervisor." if emulated else "")


def one_round(n) -> bool:
    """Whether a value rests on one round (``n`` known and below 2): it has no interval."""
    return n is not None and not (isinstance(n, float) and math.isnan(n)) and int(n) < 2


def fmt_ci(v: float, lo: float, hi: float, n=None, f=None) -> str:
    """``median [low, high]`` with ``f`` (:func:`fmt` by default); a value of ``n`` = 1 round, the median
    alone (an interval of no width and no coverage is none)."""
    f = f or fmt
    return f(v) if one_round(n) else f"{f(v)} [{f(lo)}, {f(hi)}]"


def fmt_g(x: float) -> str:
    """Three significant digits, an exponent beyond 10^5 (the claims' values and bounds)."""
    if x == 0 or not math.isfinite(x):
        return f"{x:g}"
    return f"{x:.3g}" if abs(x) < 1e5 else f"{x:.3e}"


def fmt_measured(x: float) -> str:
    """A measured value (a claim's median and interval): three significant digits with their trailing zeros,
    as :func:`fmt` prints the paper's other numbers; an infinity or one beyond 10^5 as :func:`fmt_g`."""
    return fmt(x) if math.isfinite(x) and abs(x) < 1e5 else fmt_g(x)


def fmt_power(x: float) -> str:
    """A bound that is a power of ten as LaTeX (``$10^{-5}$``), any other with :func:`fmt_g`."""
    e = math.log10(abs(x)) if x > 0 else float("nan")
    return f"$10^{{{round(e)}}}$" if math.isfinite(e) and math.isclose(e, round(e)) else fmt_g(x)


def fmt_axis(x: float) -> str:
    """A value written on a figure: whole numbers from 100 on, else three significant digits."""
    return f"{x:.0f}" if abs(x) >= 100 else f"{x:.3g}"


def fmt_bytes(n: int) -> str:
    """A message size in LaTeX (``8\\,B``, ``4\\,KiB``, ``1\\,MiB``)."""
    for unit, size in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size}\\,{unit}"
    return f"{n}\\,B"


def reported(x) -> str:
    """A reported number as written (``"NA"`` and empty as a dash)."""
    s = str(x).strip()
    return "--" if s in ("", "NA", "nan") else latex_escape(s)


#: Bandwidth units to Gbit/s.
TO_GBITS = {"Mbit/s": 1e-3, "MB/s": 8e-3, "Gbit/s": 1.0}
#: Units as LaTeX.
UNIT_TEX = {"us": "\\textmu{}s", "MB/s": "MB/s", "Gbit/s": "Gbit/s", "s": "s", "Mop/s": "Mop/s"}


def unit_tex(unit) -> str:
    return UNIT_TEX.get(unit, None) or latex_escape(unit)


def empty_table(what: str) -> str:
    """The generated table file of a campaign without ``what``."""
    return f"% Generated by workflow/scripts/numbers.py. Do not edit.\n% (no {what} in this campaign)\n"
