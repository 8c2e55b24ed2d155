"""The parts of a benchmark declaration (see :mod:`hpcvirt.benchmarks`)."""


from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Callable, ClassVar

from ..kinds import KINDS as _KINDS

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


#: The testbed kinds (hpcvirt.kinds), for per-kind settings.
KINDS = tuple(_KINDS)
BY_KIND_DOC = ("Settings that replace the experiment's own on testbeds of one kind ("
               + ", ".join(f"`{k}`" for k in KINDS) + "), e.g. a smaller class, fewer configurations or fewer "
               "`repetitions` in guests, which run slower (far slower under TCG emulation); the raw-output path and every row record the settings a "
               "run used, and every summary row its n.")
BY_TESTBED_DOC = ("Settings that replace the experiment's own, and its `by_kind` ones, on one testbed (a name of a "
                  "file in config/testbeds/), e.g. an input set only where it is compared (the guests' small input "
                  "on the unlimited bridge, not on every link); the raw-output path and every row record the "
                  "settings a run used.")
TIMEOUT_DOC = ("Wall-clock limit of one measurement of this experiment, in seconds, instead of the study's "
               "`timeout_s`: a run that hangs (e.g. in MPI_Finalize after a complete sweep) is killed sooner, and is "
               "reported with its output path like any other.")
RETRY_DOC = ("How many times a run of this experiment that was killed at its time limit is run again (each "
             "killed attempt's output is kept as `.failed-*` and named in the provenance of the run that "
             "succeeded); any other failure is never retried.")
SKIP_TESTBEDS_DOC = ("Testbeds (names of files in config/testbeds/) this experiment is not run on, although they "
                     "offer it, e.g. OpenFOAM on the links without the tunnel, to keep `make` within its hour; "
                     "default: none.")
REPS_DOC = ("Repetitions of this experiment's configurations (interleaved rounds 1..n of the study's), instead of "
            "the study's `repetitions`; every summary row states its n and the CI's achieved coverage.")


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


# --------------------------------------------------------------------- jobs
#: A testbed key whose value reaches a command line as a value (a path, a name): never an option (no
#: leading ``-``), no shell metacharacters (the testbed schema's ``$defs.value``).
VALUE_KEY = {"type": "string", "pattern": "^[A-Za-z0-9_.,:=+/@%][A-Za-z0-9_.,:=+/@%-]*$"}

#: The interconnect label (tidy column ``interconnect``) of each data path a
#: job may ask for (``Job.path``, the testbed's ``mpi.<mpi>.paths``).
PATH_INTERCONNECT = {"shm": "shm", "tcp": "tcp-loopback", "net": "tcp"}


@dataclass
class Job:
    """What a benchmark asks of the testbed for one configuration.

    MPI jobs (``mpi`` set): ``ranks`` ranks in blocks of ``block`` per host
    (``None``: all on the first host), over data path ``path`` of the
    testbed's ``mpi.<mpi>.paths`` (``None``: the MPI's own choice).
    Client/server jobs (``mpi`` None): ``argv`` is the client, ``server_argv``
    the server; ``{peer}`` in them is the server's address."""

    argv: list[str]
    mpi: str | None = None
    ranks: int = 2
    block: int | None = None
    path: str | None = None
    server_argv: list[str] | None = None
    probe_argv: list[str] | None = None
    port: int | None = None
    # the probe runs where the server runs (e.g. a check of its listening
    # socket) instead of where the client runs (a connect to {peer})
    probe_on_server: bool = False


def listening_probe(port: int) -> list[str]:
    """A probe that succeeds once a TCP socket listens on ``port`` in the
    namespace it runs in (``/proc/net/tcp{,6}``, state 0A): it makes no
    connection, which a server that serves one client at a time (iperf3)
    would take for a client and drop."""
    return ["grep", "-Eq", f":{int(port):04X} [0-9A-F]+:0000 0A ", "/proc/net/tcp", "/proc/net/tcp6"]


# -------------------------------------------------------------- declaration
class Benchmark:
    name: ClassVar[str]
    experiment: ClassVar[str]
    title: ClassVar[str]
    params: ClassVar[dict[str, Param]]
    build: ClassVar[Package | Compiled | PinnedSource]
    metrics: ClassVar[dict[str, str]]     # metric name -> unit (name may hold {n} for families)
    success: ClassVar[str]
    raw_template: ClassVar[str] = ""
    mpi: ClassVar[bool] = True            # an MPI program (else client/server)
    min_hosts: ClassVar[int] = 1          # hosts/guests/nodes a testbed needs to offer it
    testbed_keys: ClassVar[dict[str, dict]] = {}
    unoffered_hint: ClassVar[str] = ""
    # settings of a short two-rank run that shows the ranks of an MPI meet over a data path (the container
    # testbeds' preflight wire-up, hpcvirt.preflight); one benchmark declares them
    wireup: ClassVar[dict[str, Any] | None] = None
    # where its latency and bandwidth rows are, if it is a point-to-point benchmark
    point_to_point: ClassVar[PointToPoint | None] = None
    # the studies (ids of data/reference) whose own set-ups ran this program, for the analyses that
    # rebuild a study's table from its rows (e.g. hpcvirt.richter)
    reproduces: ClassVar[tuple[str, ...]] = ()
    # its tidy rows' benchmark column: its name, or (a suite of several programs) names that begin with
    # this prefix (NPB's npb-<kernel>, OSU's osu_<test>)
    row_prefix: ClassVar[str] = ""
    # the views of its rows the figures draw (View), computed by the views rule
    views: ClassVar[tuple[View, ...]] = ()
    # the studies' experiments it stands in for, a row each of the paper's mapping table (Counterpart)
    counterparts: ClassVar[tuple[Counterpart, ...]] = ()

    def declares(self, metric: str, unit: str) -> bool:
        """Whether ``metric`` with ``unit`` is one of its declared ``metrics`` (a declared name may hold
        ``{n}`` for a family of metrics)."""
        import re

        return any(re.fullmatch(re.escape(m).replace(r"\{n\}", r"\d+"), metric) and u == unit
                   for m, u in self.metrics.items())

    def numbers(self, rows) -> dict[str, str]:
        """The paper's numbers about this benchmark's own tidy rows (a DataFrame, not empty): macro name ->
        LaTeX text.  Each name is written literally where it is made, so a number in the PDF can be
        grepped back to its code.  Most benchmarks have none of their own."""
        return {}

    def owns(self, row: str) -> bool:
        """Whether tidy rows whose benchmark column is ``row`` are this benchmark's."""
        return row in (self.name, getattr(self, "row_name", None)) or bool(self.row_prefix) and \
            str(row).startswith(self.row_prefix)

    # -- configuration
    def all_params(self) -> dict[str, Param]:
        return {"enabled": Bool(f"Run the {self.experiment} experiment ({self.title}).", True), **self.params}

    def schema(self) -> dict:
        ps = self.all_params()
        s = {"type": "object", "additionalProperties": False, "description": self.title,
             "properties": {k: p.schema() for k, p in ps.items()}}
        s["properties"]["repetitions"] = {"type": "integer", "minimum": 1, "maximum": 1000, "description": REPS_DOC}
        s["properties"]["skip_testbeds"] = {"type": "array", "uniqueItems": True, "description": SKIP_TESTBEDS_DOC,
                                            "items": {"type": "string", "pattern": "^[a-z][a-z0-9-]{0,31}$"}}
        s["properties"]["timeout_s"] = {"type": "integer", "minimum": 10, "maximum": 86400, "description": TIMEOUT_DOC}
        s["properties"]["retries_after_timeout"] = {"type": "integer", "minimum": 0, "maximum": 3,
                                                    "description": RETRY_DOC}
        override = {"type": "object", "additionalProperties": False,
                    "properties": {k: {kk: vv for kk, vv in p.schema().items() if kk != "default"}
                                   for k, p in self.params.items()}}
        override["properties"]["repetitions"] = dict(s["properties"]["repetitions"])
        s["properties"]["by_kind"] = {"type": "object", "additionalProperties": False, "description": BY_KIND_DOC,
                                      "properties": {kind: override for kind in KINDS}}
        s["properties"]["by_testbed"] = {"type": "object", "description": BY_TESTBED_DOC,
                                         "propertyNames": {"pattern": "^[a-z][a-z0-9-]{0,31}$"},
                                         "additionalProperties": override}
        req = [k for k, p in ps.items() if p.required]
        if req:
            s["required"] = req
        return s

    def check(self, exp: dict) -> str | None:
        """A cross-parameter error message, or None."""
        if exp.get("min_bytes", 1) > exp.get("max_bytes", 1):
            return f"min_bytes ({exp['min_bytes']}) must not exceed max_bytes ({exp['max_bytes']})"
        return None

    def check_testbed(self, tb: dict, entry: dict) -> str | None:
        """An error message about a testbed's entry for this benchmark, or None."""
        return None

    def normalize(self, settings: dict) -> dict:
        """Hook: canonical settings of one configuration."""
        return settings

    def for_kind(self, exp: dict, kind: str | None, testbed: str | None = None) -> dict:
        """The experiment's settings on a testbed of this kind (and name): its
        ``by_kind.<kind>`` settings replace the others, and its
        ``by_testbed.<testbed>`` settings replace those."""
        base = {k: v for k, v in exp.items() if k not in ("by_kind", "by_testbed")}
        return {**base, **(exp.get("by_kind") or {}).get(kind, {}),
                **((exp.get("by_testbed") or {}).get(testbed, {}) if testbed else {})}

    def configurations(self, exp: dict, offer: dict | None, kind: str | None = None,
                       testbed: str | None = None) -> list[dict]:
        """Settings of every configuration: one per combination of the swept
        list parameters (in declared order), restricted to what the testbed
        offers (``offer``: {mpi: [paths]} for MPI benchmarks, {} when a
        client/server benchmark is offered, None = no restriction) on a
        testbed of ``kind`` (None: any) named ``testbed``."""
        exp = self.for_kind(exp, kind, testbed)
        sweeps = [(k, p.sweep) for k, p in self.params.items() if p.sweep]
        fixed = {k: exp[k] for k, p in self.params.items() if not p.sweep and k in exp}
        out: list[dict] = []
        for combo in itertools.product(*(exp[k] for k, _ in sweeps)):
            s = self.normalize({**fixed, **{name: v for (_, name), v in zip(sweeps, combo)}})
            if "repetitions" in exp:
                s["repetitions"] = exp["repetitions"]
            for run_key in ("timeout_s", "retries_after_timeout"):     # how it runs, not what: not in names
                if run_key in exp:
                    s[run_key] = exp[run_key]
            if offer is not None and self.mpi:
                if s["mpi"] not in offer or ("path" in s and s["path"] not in offer[s["mpi"]]):
                    continue
            if s not in out:
                out.append(s)
        return out

    def raw_params(self, s: dict) -> str:
        return self.raw_template.format(**s)

    # -- running
    def job(self, s: dict, entry: dict) -> Job:
        raise NotImplementedError

    def expected(self, s: dict, rank_hosts: list[str]) -> dict:
        """What the parser checks the output against (kept in the provenance)."""
        return {}

    # -- parsing
    def parse(self, raw, expected: dict) -> list:
        raise NotImplementedError

    def read(self, raw, expected: dict) -> list:
        """:meth:`parse`, with every value checked (:func:`hpcvirt.tidy.checked`); an output the parser
        cannot take apart (a missing key, a wrong type) is a :class:`hpcvirt.tidy.ParseError` naming it."""
        from ..tidy import ParseError, checked

        try:
            return checked(raw, self.parse(raw, expected))
        except ParseError:
            raise
        except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
            raise ParseError(raw, f"not an output of the expected form ({type(exc).__name__}: {exc})") from None


INPUTS_DOC = ("Input sets, each one configuration per MPI, rank count and path: a mapping of this experiment's "
              "input keys (a list key by its singular name, e.g. `lattice`) that replace the experiment's own "
              "values; `{}` is the experiment's own input.  Unlike list keys, input sets are not crossed with each "
              "other, e.g. a large input natively and beside it the small one that guests under TCG emulation "
              "can run, to compare the two testbeds on the same input (default: `[{}]`).")


class Application(Benchmark):
    """An MPI application over the data paths: its ranks on one host (path
    ``shm`` or ``tcp``), or split into two blocks over two hosts (``net``).
    One rank exchanges nothing, so it runs only once, over shared memory.
    ``row_name`` is the benchmark its tidy rows carry and ``time_metric`` the
    metric its runs are compared by across the interconnect classes;
    ``label`` names it and its input in tables (and what it stands in for).
    ``inputs`` (:data:`INPUTS_DOC`) lists input sets that are not crossed
    with each other."""

    row_name: ClassVar[str]
    label: ClassVar[str]
    time_metric: ClassVar[str] = "wall_time"
    #: parameters that are not part of an input set
    RUN_PARAMS: ClassVar[tuple[str, ...]] = ("mpis", "ranks", "paths")

    @staticmethod
    def run_params(mpis: str | None = None, ranks_doc: str = "Process counts; one configuration each.") -> dict:
        """The run parameters of an application: its MPI libraries (``mpis``:
        the one MPI a Debian package is built with, in a sentence; None: any),
        one or two ranks, over shared memory unless the study says more."""
        return {
            "mpis": Mpis(f"MPI libraries ({mpis}).", ["openmpi"]) if mpis else Mpis(),
            "ranks": Ints(ranks_doc, [1, 2], minimum=1, maximum=4096, sweep="ranks"),
            "paths": Paths("Data paths; `net` spreads the ranks over two hosts (one block per host).", ["shm"]),
        }

    @staticmethod
    def span(variant: str) -> float:
        """How much of the problem an input variant runs, to order variants of
        one input size (the longest first); 1 unless the application says more."""
        return 1.0

    def input_schema(self) -> dict:
        props = {}
        for k, p in self.params.items():
            if k in self.RUN_PARAMS:
                continue
            one = {kk: vv for kk, vv in p.schema().items() if kk != "default"}
            if p.sweep:                    # a list key: one value, under its singular name
                one = {"description": p.doc, **one["items"]}
            props[p.sweep or k] = one
        return {"type": "array", "minItems": 1, "description": INPUTS_DOC,
                "items": {"type": "object", "additionalProperties": False, "properties": props}}

    def schema(self) -> dict:
        s = super().schema()
        s["properties"]["inputs"] = self.input_schema()
        for override in s["properties"]["by_kind"]["properties"].values():
            override["properties"]["inputs"] = self.input_schema()
        s["properties"]["by_testbed"]["additionalProperties"]["properties"]["inputs"] = self.input_schema()
        return s

    def input_sets(self, exp: dict) -> list[dict]:
        return list(exp.get("inputs") or [{}])

    def configurations(self, exp: dict, offer: dict | None, kind: str | None = None,
                       testbed: str | None = None) -> list[dict]:
        out: list[dict] = []
        for s in super().configurations(exp, offer, kind, testbed):
            if not (s["ranks"] > 1 or s["path"] == "shm"):
                continue
            for inp in self.input_sets(self.for_kind(exp, kind, testbed)):
                c = self.normalize({**s, **inp})
                if c not in out:
                    out.append(c)
        return out

    def app_job(self, argv: list[str], s: dict) -> Job:
        ranks = s["ranks"]
        return Job(argv, mpi=s["mpi"], ranks=ranks, block=-(-ranks // 2) if s["path"] == "net" else ranks,
                   path=s["path"])


class ClientServer(Benchmark):
    """A client/server program, not MPI: the client runs on the testbed's
    first host and reaches the server at ``{peer}``.  A declaration names
    the server's default listen ``port``; where the server listens
    (``server_host``) and on which port are testbed keys, which the class
    derives from it."""

    mpi = False
    port: ClassVar[int]   # the server's default listen port (testbed key ``port``)

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls.testbed_keys = {
            "server_host": {"type": "string", "pattern": "^[A-Za-z0-9.:][A-Za-z0-9.:-]*$", "default": "127.0.0.1",
                            "description": "Where the server listens on a native testbed (client and server in "
                                           "a private namespace of the measurement on one node, as a non-root user "
                                           "in a user namespace too); the project's own two-host testbeds use the "
                                           "second host."},
            "port": {"type": "integer", "minimum": 1024, "maximum": 65535, "default": cls.port,
                     "description": "Listen port of the server."},
        }

    @staticmethod
    def program(entry: dict) -> list[str]:
        """The testbed entry's program: its ``binary`` and ``args``."""
        return [entry["binary"], *entry.get("args", [])]

    def client_server(self, entry: dict, client: list[str], server: list[str], probe: list[str],
                      probe_on_server: bool = False) -> Job:
        """The job of one configuration: the program with the ``client``
        arguments against the program with the ``server`` arguments, which
        listens on the entry's ``port``; ``probe`` (a whole argv) succeeds
        once the server is ready (``probe_on_server``: run where the server
        runs)."""
        program = self.program(entry)
        return Job([*program, *client], mpi=None, ranks=2, server_argv=[*program, *server], probe_argv=probe,
                   probe_on_server=probe_on_server, port=int(entry["port"]))
