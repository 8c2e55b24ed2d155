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


def _kill_group(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=3)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()


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
