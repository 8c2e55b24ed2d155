"""The measurement matrix: which configurations a study runs, where their raw
outputs live, and in which interleaved order they run.

A *configuration* is one benchmark with fixed parameters on one testbed; a
*measurement* is one repetition of it.  Raw outputs live at::

    data/raw/<campaign>/<testbed>/<benchmark>/<params>/rep-<n>.out

where ``params`` encodes every parameter that changes the result, so a changed
parameter never reuses an old output.

Interleaving: repetition ``r`` of every configuration forms round ``r``; rounds
run in order and the configurations inside a round run in an order shuffled
with the study's seed (a different shuffle per round).  The order is handed
to the scheduler as job priorities, so a failed measurement does not block
the others.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

RAW_ROOT = "data/raw"


@dataclass(frozen=True)
class Configuration:
    testbed: str
    benchmark: str  # netpipe | qperf | advect
    params: str  # path-safe encoding of the parameters
    settings: dict = field(default_factory=dict, compare=False, hash=False)

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.testbed, self.benchmark, self.params)


def _pingpong_configs(testbed: str, exp: dict, offers: dict | None) -> list[Configuration]:
    out = []
    for mpi in exp["mpis"]:
        for path in exp["paths"]:
            if offers is not None and path not in offers.get(mpi, ()):
                continue
            params = f"{mpi}-{path}_{exp['min_bytes']}-{exp['max_bytes']}"
            settings = dict(mpi=mpi, path=path, min_bytes=exp["min_bytes"], max_bytes=exp["max_bytes"])
            out.append(Configuration(testbed, "netpipe", params, settings))
    return out


def tcp_sizes(min_bytes: int, max_bytes: int, factor: int) -> list[int]:
    sizes, s = [], min_bytes
    while s <= max_bytes:
        sizes.append(s)
        s *= factor
    return sizes


def _tcp_configs(testbed: str, exp: dict) -> list[Configuration]:
    out = []
    for test in exp["tests"]:
        params = f"{test}_{exp['min_bytes']}-{exp['max_bytes']}x{exp['factor']}_t{exp['seconds_per_size']}"
        settings = dict(
            test=test,
            min_bytes=exp["min_bytes"],
            max_bytes=exp["max_bytes"],
            factor=exp["factor"],
            seconds_per_size=exp["seconds_per_size"],
            path="tcp",
        )
        out.append(Configuration(testbed, "qperf", params, settings))
    return out


def _placement_configs(testbed: str, exp: dict, offered: list[str] | None) -> list[Configuration]:
    out = []
    g = exp["grid"]
    for mpi in exp["mpis"]:
        if offered is not None and mpi not in offered:
            continue
        for block in exp["ranks_per_block"]:
            block = min(block, exp["ranks"])  # every block >= ranks is the same intra-node run
            params = (f"{mpi}-n{exp['ranks']}-b{block}_{g['x']}x{g['y']}x{g['z_per_rank']}"
                      f"_s{exp['steps']}w{exp['warmup']}" + ("" if exp["verify"] else "-nv"))
            settings = dict(mpi=mpi, ranks=exp["ranks"], block=block, grid=dict(g), steps=exp["steps"],
                            warmup=exp["warmup"], verify=exp["verify"])
            c = Configuration(testbed, "advect", params, settings)
            if c not in out:
                out.append(c)
    return out


def configurations(study: dict) -> list[Configuration]:
    """All configurations of the study, in a stable (unshuffled) order.  A
    testbed runs the MPIs and paths it offers (``study["offers"]``, filled in
    by :func:`hpcvirt.config.load_study`)."""
    out: list[Configuration] = []
    exps = study.get("experiments", {})
    offers = study.get("offers")
    for tb in study["testbeds"]:
        if exps.get("pingpong", {}).get("enabled", False):
            out += _pingpong_configs(tb, exps["pingpong"], None if offers is None else offers.get(tb, {}))
        if exps.get("tcp", {}).get("enabled", False):
            out += _tcp_configs(tb, exps["tcp"])
        if exps.get("placement", {}).get("enabled", False):
            pl_offers = study.get("placement_offers")
            out += _placement_configs(tb, exps["placement"], None if pl_offers is None else pl_offers.get(tb, []))
    return out


def find(study: dict, testbed: str, benchmark: str, params: str) -> Configuration:
    for c in configurations(study):
        if c.key == (testbed, benchmark, params):
            return c
    raise KeyError(f"no configuration {testbed}/{benchmark}/{params} in the study")


def raw_path(campaign: str, c: Configuration, rep: int, ext: str = "out") -> str:
    return f"{RAW_ROOT}/{campaign}/{c.testbed}/{c.benchmark}/{c.params}/rep-{rep}.{ext}"


def schedule(study: dict) -> list[tuple[Configuration, int]]:
    """The interleaved order: round by round, a seeded shuffle inside each round."""
    configs = configurations(study)
    rng = random.Random(study.get("seed", 0))
    order = []
    for rep in range(1, study["repetitions"] + 1):
        round_ = list(configs)
        rng.shuffle(round_)
        order += [(c, rep) for c in round_]
    return order


def priorities(study: dict) -> dict[tuple[str, str, str, int], int]:
    """Scheduler priority per measurement: earlier in the schedule = higher."""
    order = schedule(study)
    n = len(order)
    return {(c.testbed, c.benchmark, c.params, rep): n - i for i, (c, rep) in enumerate(order)}


def all_raw_paths(study: dict) -> list[str]:
    return [raw_path(study["campaign"], c, rep) for c, rep in schedule(study)]
