"""The base classes of a benchmark declaration (see :mod:`hpcvirt.benchmarks`); the parts a declaration
is made of are in :mod:`hpcvirt.benchmarks.parts`."""


from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, ClassVar

from ..kinds import KINDS as _KINDS
from .parts import Bool, Compiled, Counterpart, Ints, Mpis, Package, Param, Paths, PinnedSource, PointToPoint, View


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
