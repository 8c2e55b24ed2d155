"""Benchmark declarations and their registry.

A benchmark is one module in this package that declares, in one class:

* ``name`` (the ``<benchmark>`` of raw-output paths and tidy rows) and
  ``experiment`` (its section ``experiments.<experiment>`` of the study file);
* ``params``: the experiment's parameters with types, bounds, defaults and
  documentation.  The study file's schema fragment, the documented keys of
  ``config/README.md`` and the configurations (one per value of each swept
  list parameter) are derived from them;
* ``raw_params``: the path-safe encoding of a configuration's parameters in
  its raw-output path (every parameter that changes the result is in it, so
  an edited parameter never reuses an old output);
* ``build``: how the binary is obtained (:class:`Package`, :class:`Compiled`,
  :class:`PinnedSource`), and ``testbed_keys``: what a testbed file may set
  for it besides ``binary``, ``args`` and ``env``;
* ``job()``: its argv and rank layout (the launcher, the placement of the
  ranks on hosts and any container prefix come from the testbed kind,
  :mod:`hpcvirt.testbeds`);
* ``success`` (the criterion, in words) and ``metrics`` (name -> unit), both
  enforced by ``parse()``, which turns a raw output into
  :class:`~hpcvirt.tidy.Measurement` rows or raises
  :class:`~hpcvirt.tidy.ParseError` naming the file;
* ``counterparts``: the studies' experiments it stands in for
  (:class:`Counterpart`, a row each of the paper's mapping table).

The parts a declaration is made of are in :mod:`.parts`, the base classes
(:class:`Benchmark`, :class:`Application`, :class:`ClientServer`) in
:mod:`.base`.  Matrix, config validation, launch, parse, Slurm shapes,
provenance, views, figures and the paper's numbers iterate over
:data:`REGISTRY` and name no benchmark (``tests/test_generic_modules.py``;
the container preflight runs the one that declares ``wireup``).  Adding
one = one module here (listed in :data:`MODULES`), its parser tests with
captured outputs, and its config entry.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field

from .base import Application, Benchmark, ClientServer, Job
from .parts import (MPIS, PATHS, REQUIRED, Bool, Choice, Choices, Compiled, Counterpart, Group, Int, Ints, Library,
                    Mpis, Package, Param, Paths, PinnedSource, PointToPoint, View)

__all__ = ["MPIS", "PATHS", "REQUIRED", "Application", "Benchmark", "Bool", "Choice", "Choices", "ClientServer",
           "Compiled", "Counterpart", "Group", "Int", "Ints", "Job", "Library", "Mpis", "Package", "Param", "Paths",
           "PinnedSource", "PointToPoint", "View",
           "REGISTRY", "Registry", "enabled", "MODULES"]


# ----------------------------------------------------------------- registry
#: The benchmark modules, in the order configurations are listed.
MODULES = ("netpipe", "qperf", "advect", "osu", "npb", "imb", "commprof", "openfoam", "lammps", "milc", "qe", "iperf3")


@dataclass
class Registry:
    benchmarks: dict[str, Benchmark] = field(default_factory=dict)

    def __iter__(self):
        return iter(self.benchmarks.values())

    def __getitem__(self, name: str) -> Benchmark:
        try:
            return self.benchmarks[name]
        except KeyError:
            raise KeyError(f"unknown benchmark {name!r}; declared: {sorted(self.benchmarks)}") from None

    def names(self) -> list[str]:
        return list(self.benchmarks)

    def by_rows(self, benchmark: str) -> Benchmark:
        """The declaration whose tidy rows carry ``benchmark`` (its name, an application's ``row_name``, or a
        name that begins with its ``row_prefix``)."""
        for b in self:
            if b.owns(benchmark):
                return b
        raise KeyError(f"no benchmark declares rows {benchmark!r}")

    def pinned(self) -> list[PinnedSource]:
        """The benchmarks' pinned-source declarations (``build = PinnedSource(...)``), in registry order."""
        return [b.build for b in self if isinstance(b.build, PinnedSource)]

    def views(self) -> list[View]:
        """The views the benchmarks declare, in registry order."""
        return [v for b in self for v in b.views]

    def point_to_point(self) -> list[tuple[Benchmark, PointToPoint]]:
        """The point-to-point benchmarks and their rows' declarations, in registry order."""
        return [(b, b.point_to_point) for b in self if b.point_to_point is not None]

    def headline_packages(self) -> list[tuple[Benchmark, str]]:
        """(benchmark, package) of each headline point-to-point benchmark installed as a distribution
        package: its first package, whose version the paper and the artifact description name."""
        return [(b, b.build.packages[0]) for b, p in self.point_to_point()
                if p.headline and isinstance(b.build, Package) and b.build.packages]

    def point_to_point_rows(self, headline: bool | None = None) -> dict[str, tuple[str | None, str | None]]:
        """{tidy benchmark: (variant or None, latency metric or None)} of every point-to-point row (only the
        headline ones, or only the others, with ``headline``)."""
        return {row: v for _, p in self.point_to_point() if headline is None or p.headline == headline
                for row, v in p.rows().items()}

    def reproducing(self, study: str) -> Benchmark:
        """The benchmark whose program the study's own set-ups ran (``Benchmark.reproduces``)."""
        for b in self:
            if study in b.reproduces:
                return b
        raise KeyError(f"no benchmark declares that it reproduces {study!r}")

    def by_experiment(self, experiment: str) -> Benchmark:
        for b in self:
            if b.experiment == experiment:
                return b
        raise KeyError(f"no benchmark declares experiment {experiment!r}")


def _load() -> Registry:
    reg = Registry()
    for mod in MODULES:
        bench = importlib.import_module(f"{__name__}.{mod}").BENCHMARK
        for other in reg:
            if other.experiment == bench.experiment:
                raise ValueError(f"benchmarks {other.name} and {bench.name} share experiment {bench.experiment}")
        reg.benchmarks[bench.name] = bench
    return reg


REGISTRY = _load()


def enabled(study: dict) -> list[tuple[Benchmark, dict]]:
    """(declaration, experiment settings) of every enabled experiment of a
    validated study (defaults applied: ``enabled`` defaults to true)."""
    exps = study.get("experiments") or {}
    return [(b, exps[b.experiment]) for b in REGISTRY
            if b.experiment in exps and exps[b.experiment].get("enabled", True)]
