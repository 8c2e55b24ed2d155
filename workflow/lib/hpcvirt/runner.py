"""Execute one launch spec and capture its merged stdout/stderr.

Run as ``python -m hpcvirt.runner SPEC.json OUT STATUS.json``, normally inside
a private network namespace (``unshare --net``): it brings loopback up, starts
the optional server (raw TCP tests), waits until the server's port accepts
connections, runs the client with a time limit, kills whatever is left of the
process groups, and writes a status record.  It never reads or writes
anything else.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from datetime import datetime, timezone


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def _wait_port(port: int, timeout_s: float, probe_argv: list[str] | None = None) -> bool:
    """Wait until the server accepts connections: on loopback, or by running
    ``probe_argv`` (a connect from inside another namespace or guest)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if probe_argv:
            try:
                if subprocess.run(probe_argv, capture_output=True, timeout=10).returncode == 0:
                    return True
            except subprocess.TimeoutExpired:
                pass
            time.sleep(0.2)
            continue
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.05)
    return False


def _group_alive(pgid: int) -> list[int]:
    """The processes of process group ``pgid`` that are not zombies (a zombie
    has ended; where init does not reap, it stays a member for good)."""
    alive = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue        # ended meanwhile
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            alive.append(int(entry))
    return alive


def _kill_group(proc: subprocess.Popen, grace_s: float = 3.0) -> None:
    """End the whole process group of ``proc``, not only its leader: a
    launcher (mpirun) may exit on SIGTERM before the ranks it started.
    SIGTERM, ``grace_s`` for the group to end, then SIGKILL; returns once no
    member runs (or after a further 10 s, for a process stuck in the kernel)."""
    pgid = proc.pid
    if proc.poll() is None or _group_alive(pgid):
        try:
            os.killpg(pgid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + grace_s
    while (proc.poll() is None or _group_alive(pgid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    if proc.poll() is None or _group_alive(pgid):
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait()
    deadline = time.monotonic() + 10
    while _group_alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.05)


def run(spec: dict, out_path: str) -> dict:
    status = {"started_at": _now(), "timed_out": False, "exit_code": None, "note": ""}
    if spec.get("isolation") == "netns":
        subprocess.run(["ip", "link", "set", "lo", "up"], check=True, timeout=10)
    env = dict(os.environ)
    env.update(spec.get("env", {}))
    client_env = dict(env)
    if spec.get("rank_hosts_dir"):
        client_env["HPCVIRT_RANK_HOSTS"] = spec["rank_hosts_dir"]    # where the ranks record their hosts
    timeout = float(spec.get("timeout_s", 300))
    server = None
    with open(out_path, "wb") as out:
        try:
            if spec.get("server_argv"):
                server = subprocess.Popen(
                    spec["server_argv"],
                    env=env,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                )
                if not _wait_port(int(spec["server_port"]), 30, spec.get("server_probe_argv")):
                    status["note"] = f"server {' '.join(spec['server_argv'])} did not accept connections within 30 s"
                    status["exit_code"] = 125
                    return status
            client = subprocess.Popen(
                spec["argv"], env=client_env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
            try:
                status["exit_code"] = client.wait(timeout=timeout)
                left = _group_alive(client.pid)
                if left:
                    status["note"] = f"the launch ended leaving {len(left)} of its processes running: killed"
                    _kill_group(client)
            except subprocess.TimeoutExpired:
                status["timed_out"] = True
                status["note"] = f"killed after the time limit of {timeout:g} s"
                _kill_group(client)
                status["exit_code"] = client.returncode
        finally:
            if server is not None:
                _kill_group(server)
            status["finished_at"] = _now()
    return status


def main(argv: list[str]) -> int:
    spec_path, out_path, status_path = argv
    with open(spec_path, encoding="utf-8") as fh:
        spec = json.load(fh)
    status = run(spec, out_path)
    with open(status_path, "w", encoding="utf-8") as fh:
        json.dump(status, fh)
    return 0 if status["exit_code"] == 0 and not status["timed_out"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
