"""Statistics (median CIs from order statistics) and the interleaved schedule."""

import copy
import math
from pathlib import Path

import pandas as pd
import pytest
import yaml

from hpcvirt import matrix, stats
from hpcvirt.config import load_study

ROOT = Path(__file__).resolve().parents[1]


def _coverage(l, n):
    return 1 - 2 * sum(math.comb(n, i) for i in range(l)) / 2**n


@pytest.mark.parametrize("n,expected", [(1, (1, 1)), (3, (1, 3)), (5, (1, 5)), (6, (1, 6)), (10, (2, 9)),
                                         (20, (6, 15)), (50, (18, 33))])
def test_median_ci_ranks_match_binomial_tables(n, expected):
    l, u, cov = stats.median_ci_ranks(n, 0.95)
    assert (l, u) == expected
    assert cov == pytest.approx(_coverage(l, n))
    if n >= 6:
        assert cov >= 0.95
        # the next narrower interval would not reach 95%
        assert _coverage(l + 1, n) < 0.95


def test_small_samples_report_achieved_coverage_not_nominal():
    assert stats.median_ci([3.0, 1.0, 2.0])["ci_level"] == pytest.approx(0.75)
    assert stats.median_ci([1.0])["ci_level"] == 0.0


def test_median_ci_values_and_outlier_robustness():
    r = stats.median_ci([5, 1, 3, 2, 4, 1000, 6, 7, 8, 9])
    assert r["median"] == 5.5
    assert (r["ci_low"], r["ci_high"]) == (2.0, 9.0)  # ranks 2 and 9: the outlier stays out
    assert r["ci_low"] <= r["median"] <= r["ci_high"]


def test_summarize_groups_by_configuration_and_size():
    df = pd.DataFrame(
        {"run_id": ["c"] * 6, "testbed": ["t"] * 6, "metric": ["latency"] * 6, "unit": ["us"] * 6,
         "msg_bytes": [8, 8, 8, 16, 16, 16], "value": [1.0, 2.0, 3.0, 10.0, 30.0, 20.0], "rep": [1, 2, 3] * 2}
    )
    s = stats.summarize(df)
    assert list(s["msg_bytes"]) == [8, 16]
    assert list(s["median"]) == [2.0, 20.0]
    assert list(s["n"]) == [3, 3]


def _study(reps=4):
    """The shipped study with ``reps`` repetitions of every experiment."""
    cfg = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    _study_reps_only(cfg)
    study, _ = load_study(cfg, config_path=ROOT / "config/config.yaml", testbed_dir=ROOT / "config/testbeds")
    return dict(copy.deepcopy(study), repetitions=reps)


def _study_reps_only(cfg: dict) -> dict:
    """Every experiment with the study's repetitions (none of its own, nor per testbed kind or testbed), in a
    campaign that holds no outputs (a campaign keeps in its plan every round it holds: hpcvirt.matrix)."""
    cfg["campaign"] = "unmeasured-probe"
    for exp in cfg["experiments"].values():
        exp.pop("repetitions", None)
        for over in (*(exp.get("by_kind") or {}).values(), *(exp.get("by_testbed") or {}).values()):
            over.pop("repetitions", None)
    return cfg


def test_experiments_with_fewer_repetitions_join_the_first_rounds_only():
    cfg = _study_reps_only(yaml.safe_load((ROOT / "config/config.yaml").read_text()))
    cfg["repetitions"] = 5
    cfg["experiments"]["npb"]["repetitions"] = 2
    cfg["emulated_guests"] = {"experiments": sorted(cfg["experiments"])}   # the guests run NPB, emulated or not
    study, _ = load_study(cfg, config_path=ROOT / "config/config.yaml", testbed_dir=ROOT / "config/testbeds")
    order = matrix.schedule(study)
    npb = [(c, r) for c, r in order if c.benchmark == "npb"]
    n_npb = len({c.key for c, _ in npb})
    assert n_npb and sorted({r for _, r in npb}) == [1, 2] and len(npb) == 2 * n_npb
    assert sorted({r for c, r in order if c.benchmark == "netpipe"}) == [1, 2, 3, 4, 5]
    # rounds run in order; the npb runs are interleaved with the others in rounds 1 and 2
    reps = [r for _, r in order]
    assert reps == sorted(reps)
    # a qemu testbed's rounds are grouped by what they hold (one Snakemake rule per group)
    groups = matrix.round_groups(study, "vm")
    assert groups[0][0] == [1, 2] and "npb" in {c.benchmark for c in groups[0][1]}
    assert sorted(r for g in groups for r in g[0]) == [1, 2, 3, 4, 5]
    assert all("npb" not in {c.benchmark for c in g[1]} for g in groups[1:])
    # the raw paths of every round exist in the matrix, and none twice
    paths = matrix.all_raw_paths(study)
    assert len(paths) == len(set(paths)) == len(order)


def test_schedule_is_interleaved_round_by_round():
    study = _study(4)
    order = matrix.schedule(study)
    n = len(matrix.configurations(study))
    assert len(order) == 4 * n
    for r in range(4):
        chunk = order[r * n : (r + 1) * n]
        assert {rep for _, rep in chunk} == {r + 1}  # round r holds repetition r of everything
        assert len({c.key for c, _ in chunk}) == n
    rounds = [[c.key for c, _ in order[r * n : (r + 1) * n]] for r in range(4)]
    assert len({tuple(x) for x in rounds}) > 1  # shuffled differently per round


def test_schedule_is_seeded():
    a, b = _study(), _study()
    assert [(c.key, r) for c, r in matrix.schedule(a)] == [(c.key, r) for c, r in matrix.schedule(b)]
    b["seed"] += 1
    assert [(c.key, r) for c, r in matrix.schedule(a)] != [(c.key, r) for c, r in matrix.schedule(b)]


def test_priorities_follow_schedule():
    study = _study(2)
    prio = matrix.priorities(study)
    order = matrix.schedule(study)
    values = [prio[(c.testbed, c.benchmark, c.params, r)] for c, r in order]
    assert values == sorted(values, reverse=True) and len(set(values)) == len(values)


def test_raw_paths_encode_parameters():
    study = _study(1)
    paths = matrix.all_raw_paths(study)
    assert len(paths) == len(set(paths))
    changed = copy.deepcopy(study)
    changed["experiments"]["pingpong"]["max_bytes"] = 1024
    assert set(matrix.all_raw_paths(changed)) != set(paths)  # new parameters, new paths
    assert all(p.split("/")[2] == study["campaign"] and p.split("/")[3] in study["testbeds"] for p in paths)
    assert all(p.endswith(".out") for p in paths)


def test_an_infinite_value_is_a_value_and_nan_is_none():
    """A knee never reached is +inf, a legitimate order statistic: it is kept (the median of five values, not
    of three); NaN is no value."""
    ci = stats.median_ci([0.5, 1.0, 1.0, float("inf"), float("inf")])
    assert ci["n"] == 5 and ci["median"] == 1.0 and ci["ci_high"] == float("inf") and ci["ci_level"] == 0.9375
    assert stats.median_ci([1.0, float("nan"), 2.0, 3.0])["n"] == 3
