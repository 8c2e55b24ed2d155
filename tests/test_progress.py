"""Progress lines: measurements done, and the time the rest took in the
archived campaign (slots from its provenance records)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

from hpcvirt import progress


def _record(root: Path, campaign: str, key: str, start: str, end: str) -> None:
    p = root / "data/raw" / campaign / f"{key}.json"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps({"started_at": start, "finished_at": end,
                             "host": {"cpu": {"model": "Test CPU", "lscpu": {"CPU(s)": "2"}}}}))
    p.with_suffix(".out").write_text("raw\n")


def _at(seconds: float) -> str:
    return (datetime(2026, 1, 1, tzinfo=timezone.utc) + timedelta(seconds=seconds)).isoformat()


def test_slots_are_the_run_its_testbeds_median_overhead_and_its_share_of_a_round_boot(tmp_path, monkeypatch):
    monkeypatch.setenv("HPCVIRT_ROOT", str(tmp_path))
    # this host: 2 s of job overhead before each run, and a pause of 50 min (the archive was extended later)
    for rep, (start, end) in enumerate([(0, 10), (12, 22), (3022, 3032), (3034, 3044)], 1):
        _record(tmp_path, "arch", f"local/netpipe/a/rep-{rep}", _at(start), _at(end))
    # guests: 60 s of boot before each round, 1 s between the runs of a round
    vm = tmp_path / "data/raw/arch/vm/testbed.json"
    vm.parent.mkdir(parents=True)
    vm.write_text(json.dumps({"testbed": {"kind": "qemu"}}))
    for key, start, end in [("x/rep-1", 3104, 3124), ("y/rep-1", 3125, 3135),
                            ("x/rep-2", 3195, 3215), ("y/rep-2", 3216, 3226)]:
        _record(tmp_path, "arch", f"vm/netpipe/{key}", _at(start), _at(end))
    # a failed run's record is not a measurement (its time is in a gap, like a pause)
    _record(tmp_path, "arch", "vm/netpipe/x/rep-3.failed-20260101T000000Z", _at(3300), _at(3400))
    arch = progress.archive_slots("arch")
    assert arch["slots"] == {**{f"local/netpipe/a/rep-{r}": 12.0 for r in (1, 2, 3, 4)},
                             "vm/netpipe/x/rep-1": 51.0, "vm/netpipe/y/rep-1": 41.0,
                             "vm/netpipe/x/rep-2": 51.0, "vm/netpipe/y/rep-2": 41.0}
    # the slots add up to the wall time without the pause (and the first run's overhead)
    assert sum(arch["slots"].values()) == 3226 - (3000 - 2) + 2 + 2
    assert arch["cpu"] == "Test CPU, 2 CPUs"
    assert (tmp_path / ".hpcvirt/progress/arch.json").exists()
    # same configuration and round; else the median of its testbed and benchmark; else of its testbed
    seconds, unknown = progress.estimate(
        ["vm/netpipe/x/rep-2", "vm/netpipe/z/rep-1", "vm/qperf/q/rep-1", "bridge/netpipe/a/rep-1"], arch["slots"])
    assert (seconds, unknown) == (51.0 + 46.0 + 46.0, 1)


def test_a_cache_made_another_way_is_made_again(tmp_path, monkeypatch):
    monkeypatch.setenv("HPCVIRT_ROOT", str(tmp_path))
    _record(tmp_path, "arch", "local/netpipe/a/rep-1", _at(0), _at(10))
    cache = tmp_path / ".hpcvirt/progress/arch.json"
    cache.parent.mkdir(parents=True)
    cache.write_text(json.dumps({"records": 1, "cpu": "x", "slots": {"local/netpipe/a/rep-1": 999.0}}))
    assert progress.archive_slots("arch")["slots"] == {"local/netpipe/a/rep-1": 10.0}


def test_status_counts_what_is_done_and_estimates_the_rest(tmp_path, monkeypatch):
    monkeypatch.setenv("HPCVIRT_ROOT", str(tmp_path))
    monkeypatch.setattr(progress, "all_raw_paths", lambda study: [
        f"data/raw/{study['campaign']}/local/netpipe/a/rep-{r}.out" for r in (1, 2, 3)])
    T = "2026-01-01T00:{}+00:00"
    for r, (s, e) in enumerate([("00:00", "00:20"), ("00:20", "00:50"), ("00:50", "01:00")], 1):
        _record(tmp_path, "arch", f"local/netpipe/a/rep-{r}", T.format(s), T.format(e))
    new = tmp_path / "data/raw/new/local/netpipe/a/rep-1.out"
    new.parent.mkdir(parents=True)
    new.write_text("raw\n")
    line = progress.status({"campaign": "new"}, "arch")
    assert line.startswith("1 of 3 measurements of campaign new done; the other 2: about 40 s to go")
    assert "archived campaign arch (Test CPU, 2 CPUs)" in line
    assert progress.status({"campaign": "arch"}, "arch") is None              # nothing missing: nothing said


def test_share_counts_runs_with_their_overhead_but_not_the_guests_boot(tmp_path, monkeypatch):
    monkeypatch.setenv("HPCVIRT_ROOT", str(tmp_path))
    T = "2026-01-01T00:{}+00:00"
    # native: 2 s of job overhead before each run
    _record(tmp_path, "c", "local/netpipe/a/rep-1", T.format("00:00"), T.format("00:10"))
    _record(tmp_path, "c", "local/imb/a/rep-1", T.format("00:12"), T.format("00:20"))
    # a VM round: 60 s of boot before its first run, then 1 s between runs
    _record(tmp_path, "c", "vm/imb/x/rep-1", T.format("01:20"), T.format("01:30"))
    _record(tmp_path, "c", "vm/netpipe/y/rep-1", T.format("01:31"), T.format("01:41"))
    _record(tmp_path, "c", "vm/npb/z/rep-1", T.format("01:42"), T.format("01:52"))
    out = progress.share("c", ["imb", "npb"])
    assert out["runs"] == 3 and out["run_seconds"] == 28.0
    # local imb: 8 + 2; vm imb (first in round): 10 + the round's median gap 1; vm npb: 10 + 1
    assert out["by"] == {"local/imb": 10.0, "vm/imb": 11.0, "vm/npb": 11.0}
    assert out["seconds"] == 32.0
    # <testbed>/<benchmark> patterns: everything in the guests, and imb on this host
    out = progress.share("c", ["vm/*", "local/imb"])
    assert out["by"] == {"local/imb": 10.0, "vm/imb": 11.0, "vm/netpipe": 11.0, "vm/npb": 11.0}


def test_share_cli_says_whether_the_budget_holds(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HPCVIRT_ROOT", str(tmp_path))
    T = "2026-01-01T00:{}+00:00"
    _record(tmp_path, "c", "local/imb/a/rep-1", T.format("00:00"), T.format("00:30"))
    assert progress.main(["share", "c", "imb", "--builds-s", "20", "--budget-s", "60"]) == 0
    assert "50 s" in capsys.readouterr().out
    assert progress.main(["share", "c", "imb", "--builds-s", "40", "--budget-s", "60"]) == 3
    assert "OVER" in capsys.readouterr().out
    assert progress.main(["share", "missing", "imb"]) == 1


def test_the_estimate_takes_this_machines_pace_once_it_has_run_enough(tmp_path, monkeypatch):
    """The archive's runs took 60 s each; here the first three took 90 s: once they stand for the archive's
    120 s or more, the rest is estimated at 1.5 times the archive's times, and the line says both."""
    monkeypatch.setenv("HPCVIRT_ROOT", str(tmp_path))
    monkeypatch.setattr(progress, "all_raw_paths", lambda study: [
        f"data/raw/{study['campaign']}/local/netpipe/a/rep-{r}.out" for r in range(1, 7)])
    for r in range(1, 7):
        _record(tmp_path, "arch", f"local/netpipe/a/rep-{r}", _at(60 * (r - 1)), _at(60 * r))
    _record(tmp_path, "new", "local/netpipe/a/rep-1", _at(0), _at(90))
    line = progress.status({"campaign": "new"}, "arch")
    assert "the other 5: about 5.0 min to go, by the times of the archived campaign arch" in line     # 60 s: too few
    for r in (2, 3):
        _record(tmp_path, "new", f"local/netpipe/a/rep-{r}", _at(90 * (r - 1)), _at(90 * r))
    line = progress.status({"campaign": "new"}, "arch")
    assert line.startswith("3 of 6 measurements of campaign new done; the other 3: about 4.5 min to go at this "
                           "machine's pace so far (1.50 times the times of the archived campaign arch"), line
    assert line.endswith("which give 3.0 min)"), line
