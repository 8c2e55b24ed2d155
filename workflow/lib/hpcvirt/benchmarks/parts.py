"""The parts a benchmark declares (see :mod:`hpcvirt.benchmarks`): its parameters, how it is built,
where its point-to-point rows are, the views of its rows and the studies' experiments it stands in for."""


from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

REQUIRED = object()


# --------------------------------------------------------------- parameters
@dataclass(frozen=True)
class Param:
    """One parameter of an experiment (a key of ``experiments.<name>``)."""

    kind: str                      # int | bool | choice | ints | choices | group
    doc: str
    default: Any = REQUIRED
    choices: tuple = ()
    minimum: int | None = None
    maximum: int | None = None
    fields: dict | None = None     # group: sub-parameters
    offered_by: str | None = None  # choices the testbed must offer: "mpi" or "path"
    sweep: str | None = None       # list parameters: one configuration per value, under this name

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    def schema(self) -> dict:
        s: dict[str, Any] = {"description": self.doc}
        bounds = {k: v for k, v in (("minimum", self.minimum), ("maximum", self.maximum)) if v is not None}
        if self.kind == "int":
            s.update(type="integer", **bounds)
        elif self.kind == "bool":
            s.update(type="boolean")
        elif self.kind == "choice":
            s.update(type="string", enum=list(self.choices))
        elif self.kind == "ints":
            s.update(type="array", minItems=1, uniqueItems=True, items={"type": "integer", **bounds})
        elif self.kind == "choices":
            s.update(type="array", minItems=1, uniqueItems=True, items={"type": "string", "enum": list(self.choices)})
        elif self.kind == "group":
            s.update(type="object", additionalProperties=False,
                     properties={k: p.schema() for k, p in self.fields.items()})
        else:
            raise ValueError(f"unknown parameter kind {self.kind!r}")
        if not self.required:
            s["default"] = self.default
        return s

    def type_doc(self) -> str:
        rng = ""
        if self.minimum is not None or self.maximum is not None:
            rng = f" {self.minimum if self.minimum is not None else ''}–{self.maximum if self.maximum is not None else ''}"
        return {
            "int": f"integer{rng}",
            "bool": "boolean",
            "choice": "one of " + ", ".join(f"`{c}`" for c in self.choices),
            "ints": f"list of integers{rng}",
            "choices": "list of " + ", ".join(f"`{c}`" for c in self.choices),
            "group": "mapping",
        }[self.kind]


def Int(doc, default=REQUIRED, minimum=None, maximum=None) -> Param:  # noqa: N802
    return Param("int", doc, default, minimum=minimum, maximum=maximum)


def Bool(doc, default=REQUIRED) -> Param:  # noqa: N802
    return Param("bool", doc, default)


def Choice(choices, doc, default=REQUIRED) -> Param:  # noqa: N802
    return Param("choice", doc, default, choices=tuple(choices))


def Ints(doc, default=REQUIRED, minimum=None, maximum=None, sweep=None) -> Param:  # noqa: N802
    return Param("ints", doc, default, minimum=minimum, maximum=maximum, sweep=sweep)


def Choices(choices, doc, default=REQUIRED, sweep=None, offered_by=None) -> Param:  # noqa: N802
    return Param("choices", doc, default, choices=tuple(choices), sweep=sweep, offered_by=offered_by)


def Group(fields, doc) -> Param:  # noqa: N802
    default = {k: p.default for k, p in fields.items() if not p.required}
    return Param("group", doc, default, fields=dict(fields))


MPIS = ("openmpi", "mpich")
PATHS = ("shm", "tcp", "net")


PATHS_DOC = ("Data paths: `shm` shared memory on one host, `tcp` TCP over loopback on one host, `net` across "
             "hosts/guests (TCP, or a site's declared `fabric`); each runs where the testbed defines it "
             "(`mpi.<mpi>.paths`).")


def Paths(doc=PATHS_DOC, default=REQUIRED):  # noqa: N802
    return Choices(PATHS, doc, default, sweep="path", offered_by="path")


def Mpis(doc="MPI libraries; each runs on the testbeds that offer the benchmark with it.", default=REQUIRED):  # noqa: N802
    return Choices(MPIS, doc, default, sweep="mpi", offered_by="mpi")

# ------------------------------------------------------------------- builds
@dataclass(frozen=True)
class Package:
    """Binaries from Debian packages (installed by ``workflow/envs/debian-packages*.txt``)."""

    packages: tuple[str, ...]

    def describe(self) -> str:
        return "Debian packages " + ", ".join(self.packages)


@dataclass(frozen=True)
class Compiled:
    """Compiled from ``workflow/src/`` by a build script, on first use on the
    host (``binary`` matching ``host_binary``) and into the guest image."""

    source: str
    script: str
    host_binary: str               # regex of the testbed binary path built on the host; group 1 = MPI
    packages: tuple[str, ...] = ()

    def describe(self) -> str:
        return f"compiled from {self.source} by {self.script} (host: on first use; guests: in the image)"


@dataclass(frozen=True)
class Library:
    """A source of the project's (``workflow/src/``) compiled by the MPI's C wrapper into a suite's build, for
    one MPI: ``lib`` below the build's folder, linked with ``link``."""

    source: str
    lib: str
    mpi: str
    link: tuple[str, ...] = ()


@dataclass(frozen=True)
class PinnedSource:
    """A pinned source archive (name, version); the testbed names the
    binaries built from it (a site's Spack build, or the project's build).

    The project's build (:mod:`hpcvirt.build`): ``suite``, the folder
    ``.hpcvirt/suites/<suite>-<mpi>`` a testbed file names; ``spack_package``,
    the Spack package of the stack that builds it (a benchmark that runs a
    suite another declares leaves it empty); ``binary_dir``, where the
    binaries are below the folder; ``targets``, what it installs (recorded);
    ``library``, a source of the project's built into the folder.

    The pin (:mod:`hpcvirt.sources`; one declaration of a source carries it):
    ``urls``, the official archive(s); ``files``, the files accepted as
    (file name, sha256, which copy: ``official archive`` or ``mirror copy``,
    which may have the official name but other bytes, re-packed)."""

    name: str
    version: str
    packages: tuple[str, ...] = ()
    urls: tuple[str, ...] = ()
    files: tuple[tuple[str, str, str], ...] = ()
    suite: str = ""
    spack_package: str = ""
    binary_dir: str = ""
    targets: tuple[str, ...] = ()
    library: Library | None = None

    def describe(self) -> str:
        return f"pinned source {self.name} {self.version}; the testbed names the built binaries"


# --------------------------------------------------------------------- rows
@dataclass(frozen=True)
class PointToPoint:
    """A benchmark of two ranks or two hosts that sends messages of growing size: where its latency and
    bandwidth rows are, for what reads point-to-point rows alike (the paper's headline numbers and their
    macros, the container comparison, the study redraws' sweeps).  ``latency`` and ``bandwidth`` are
    (tidy benchmark, variant or None for any, metric) of its rows, None where it has none; ``label`` names
    it in tables; ``headline``: its rows are the paper's headline table and overheads, whose macros carry
    no benchmark name (``\\hvLat...``; the others' carry theirs, ``\\hvImbLat...``)."""

    label: str
    latency: tuple[str, str | None, str] | None
    bandwidth: tuple[str, str | None, str] | None
    headline: bool = False
    #: In the data-path table (what each path between two hosts costs): the stem of its columns,
    #: ``<stem>_<mpi>_lat`` and ``_bw`` (``<stem>_lat`` without an MPI), and of its macros,
    #: ``\hvDp<Testbed><Stem>Lat`` (Open MPI's, or its only one); None: not in that table.
    datapath: str | None = None

    def rows(self) -> dict[str, tuple[str | None, str | None]]:
        """{tidy benchmark: (variant or None, its latency metric or None)} of its rows."""
        out = {}
        for side in (self.latency, self.bandwidth):
            if side and side[0] not in out:
                out[side[0]] = (side[1], side[2] if side is self.latency else None)
        return out


@dataclass(frozen=True)
class View:
    """A table the figures draw (:mod:`hpcvirt.views`: one rule writes each to
    ``data/results/<campaign>/views/<name>.csv``), declared by the benchmark whose rows it reads (its
    ``views``) or, for rows of several benchmarks alike, by :mod:`hpcvirt.views`.  ``reads``: the table it
    is computed from (``summary``: medians and CIs per configuration; ``tidy``: one row per value and
    round, for pairing by round); ``compute`` that table (and ``params``) -> the view; ``what`` it
    holds.  Every row of a view is one plotted element.  ``tex``: the paper's table of the view, as
    LaTeX, where it has one: rule ``numbers`` writes it to ``paper/generated/<name>_table.tex``;
    ``macros``: the view's numbers the paper cites (macro name -> LaTeX text; rule ``numbers`` writes
    them with the others).  Both are called with the campaign's summary and tidy tables and the view's
    ``params``."""

    name: str
    reads: str
    compute: Callable[..., Any]
    what: str
    params: tuple[str, ...] = ()       # e.g. latency_bytes
    tex: Callable[..., str] | None = None
    macros: Callable[..., dict[str, str]] | None = None


@dataclass(frozen=True)
class Counterpart:
    """A row of the paper's table of the studies' experiments this benchmark
    stands in for (LaTeX): what of it (``ours``), the study's experiment
    (``study``) and how the two differ (``differences``).  What the campaign
    ran is written as macros of the paper's numbers (e.g. the benchmark's
    own ``numbers``), never typed.  The row is in the table of every
    campaign that has the benchmark's rows (:func:`hpcvirt.tables.mapping_tex`),
    and such a campaign must make every macro it names."""

    ours: str
    study: str
    differences: str
