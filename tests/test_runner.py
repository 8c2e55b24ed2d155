"""The runner's time limit ends a launch's whole process group, not only its
leader: a launcher (mpirun) may exit on SIGTERM while ranks it started run on."""

from __future__ import annotations

import uuid

from hpcvirt import runner
from procs import running_with


def _spec(argv: list[str], mark: str, timeout_s: float) -> dict:
    return {"argv": argv, "env": {"HPCVIRT_TEST_MARK": mark}, "timeout_s": timeout_s}


def test_a_timed_out_launch_leaves_no_member_of_its_group_running(tmp_path):
    mark = uuid.uuid4().hex
    # the leader ends on SIGTERM; one child ignores it, as a rank busy in a
    # library call may, and one is an ordinary child
    script = "(trap '' TERM; exec sleep 60) & sleep 60 & wait"
    status = runner.run(_spec(["sh", "-c", script], mark, 1), str(tmp_path / "out"))
    assert status["timed_out"] and "time limit of 1 s" in status["note"]
    assert running_with(f"HPCVIRT_TEST_MARK={mark}") == []


def test_a_launch_that_ends_leaving_a_process_running_has_it_killed_and_says_so(tmp_path):
    mark = uuid.uuid4().hex
    status = runner.run(_spec(["sh", "-c", "sleep 60 & echo done"], mark, 30), str(tmp_path / "out"))
    assert status["exit_code"] == 0 and not status["timed_out"]
    assert status["note"] == "the launch ended leaving 1 of its processes running: killed"
    assert running_with(f"HPCVIRT_TEST_MARK={mark}") == []
    assert (tmp_path / "out").read_text() == "done\n"


def test_a_launch_that_ends_cleanly_has_no_note(tmp_path):
    status = runner.run(_spec(["sh", "-c", "echo done"], uuid.uuid4().hex, 30), str(tmp_path / "out"))
    assert status["exit_code"] == 0 and status["note"] == ""
