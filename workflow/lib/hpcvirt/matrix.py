"""The measurement matrix: which configurations a study runs, where their raw
outputs live, and in which interleaved order they run.

A *configuration* is one benchmark with fixed parameters on one testbed; a
*measurement* is one repetition of it.  The configurations of an experiment
come from its benchmark declaration (:mod:`hpcvirt.benchmarks`), restricted
to what each testbed offers.  Raw outputs live at::

    data/raw/<campaign>/<testbed>/<benchmark>/<params>/rep-<n>.out

where ``params`` (the declaration's ``raw_params``) encodes every parameter
that changes the result, so a changed parameter never reuses an old output.

Interleaving: repetition ``r`` of every configuration forms round ``r`` (an
experiment may ask for fewer or more repetitions than the study: it takes
part in rounds 1..its own); rounds
run in order and the configurations inside a round run in an order shuffled
with the study's seed (a different shuffle per round).  The order is handed
to the scheduler as job priorities, so a failed measurement does not block
the others.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from pathlib import Path

from .benchmarks import enabled
from .paths import RAW_ROOT


@dataclass(frozen=True)
class Configuration:
    testbed: str
    benchmark: str
    params: str  # path-safe encoding of the parameters
    settings: dict = field(default_factory=dict, compare=False, hash=False)

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.testbed, self.benchmark, self.params)


def configurations(study: dict) -> list[Configuration]:
    """All configurations of the study, in a stable (unshuffled) order: per
    testbed, per benchmark in registry order.  A testbed runs what it offers
    (``study["offers"]``, filled in by :func:`hpcvirt.config.load_study`,
    with the testbeds' kinds in ``study["kinds"]``); guests that would be
    emulated (``study["emulated"]``) run only the experiments of
    ``study["emulated_guests"]``, but for what the campaign already holds."""
    out: list[Configuration] = []
    offers, kinds = study.get("offers"), study.get("kinds", {})
    emulated = study.get("emulated", {})
    for tb in study["testbeds"]:
        for bench, exp in enabled(study):
            if tb in exp.get("skip_testbeds", []):      # the experiment is not run on this testbed
                continue
            offer = None if offers is None else offers.get(tb, {}).get(bench.name)
            if offers is not None and offer is None:
                continue
            left_out = tb in emulated and bench.experiment not in study["emulated_guests"]["experiments"]
            for s in bench.configurations(exp, offer, kinds.get(tb), tb):
                if s.get("path") == "net" and int(s.get("ranks", 2)) < 2:
                    continue    # the path between two hosts: one rank has no one to send to
                c = Configuration(tb, bench.name, bench.raw_params(s), s)
                if not left_out or _measured(study["campaign"], c):
                    out.append(c)
    return out


def _measured(campaign: str, c: Configuration) -> bool:
    """The campaign holds an output of this configuration: guests that would now be emulated keep in
    the plan what the campaign measured (an archived campaign, whatever ran its guests)."""
    return any((Path(RAW_ROOT) / campaign / c.testbed / c.benchmark / c.params).glob("rep-*.out"))


def find(study: dict, testbed: str, benchmark: str, params: str) -> Configuration:
    for c in configurations(study):
        if c.key == (testbed, benchmark, params):
            return c
    raise KeyError(f"no configuration {testbed}/{benchmark}/{params} in the study")


def raw_path(campaign: str, c: Configuration, rep: int, ext: str = "out") -> str:
    return f"{RAW_ROOT}/{campaign}/{c.testbed}/{c.benchmark}/{c.params}/rep-{rep}.{ext}"


def _held(study: dict, configs: list[Configuration]) -> dict[tuple[str, str, str], int]:
    """Per configuration, the highest round the campaign holds an output of (0: none): a campaign keeps
    in its plan the rounds it measured, also where the study now asks for fewer (the archive, when a
    study spends its rounds elsewhere), so that its tables are rebuilt from every output it holds."""
    out = {}
    for c in configs:
        held = [int(m.group(1)) for p in (Path(RAW_ROOT) / study["campaign"] / c.testbed / c.benchmark /
                                          c.params).glob("rep-*.out")
                if (m := re.fullmatch(r"rep-([0-9]+)\.out", p.name))]
        out[c.key] = max(held, default=0)
    return out


def _reps(study: dict, c: Configuration, held: dict) -> int:
    """The rounds a configuration takes part in: its experiment's (or the study's), or what the campaign
    holds if more."""
    return max(c.settings.get("repetitions", study["repetitions"]), held.get(c.key, 0))


def _rounds(study: dict, configs: list[Configuration]) -> list[tuple[int, list[Configuration]]]:
    """[(round, the configurations that take part in it)], in order (unshuffled)."""
    held = _held(study, configs)
    reps = {c.key: _reps(study, c, held) for c in configs}
    return [(rep, [c for c in configs if rep <= reps[c.key]])
            for rep in range(1, max([study["repetitions"], *reps.values()]) + 1)]


def schedule(study: dict) -> list[tuple[Configuration, int]]:
    """The interleaved order: round by round, a seeded shuffle inside each round."""
    rng = random.Random(study.get("seed", 0))
    order = []
    for rep, round_ in _rounds(study, configurations(study)):
        rng.shuffle(round_)
        order += [(c, rep) for c in round_]
    return order


def round_groups(study: dict, testbed: str) -> list[tuple[list[int], list[Configuration]]]:
    """The rounds of one testbed grouped by their configurations: [(reps,
    configurations)], e.g. rounds 1-3 with every experiment and rounds 4-5
    without those that ask for three repetitions."""
    groups: dict[tuple, list[int]] = {}
    for rep, members in _rounds(study, [c for c in configurations(study) if c.testbed == testbed]):
        if members:
            groups.setdefault(tuple(members), []).append(rep)
    return [(reps, list(members)) for members, reps in groups.items()]


def priorities(study: dict) -> dict[tuple[str, str, str, int], int]:
    """Scheduler priority per measurement: earlier in the schedule = higher."""
    order = schedule(study)
    n = len(order)
    return {(c.testbed, c.benchmark, c.params, rep): n - i for i, (c, rep) in enumerate(order)}


def all_raw_paths(study: dict) -> list[str]:
    return [raw_path(study["campaign"], c, rep) for c, rep in schedule(study)]
