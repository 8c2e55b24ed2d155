"""Execute one launch: the one path by which measurements and the container
preflight's wire-up run a command.

The launch spec goes to :mod:`hpcvirt.runner` in a child process, inside a
private network namespace (``unshare --net``) when the launch asks for one;
the runner writes the merged output to ``out_path`` and a status record.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from .testbeds import Launch


class ExecuteError(RuntimeError):
    pass


def runner_argv(spec_path: str, out_path: str, status_path: str, isolation: str) -> list[str]:
    runner = [sys.executable, "-m", "hpcvirt.runner", spec_path, out_path, status_path]
    if isolation == "netns":
        if shutil.which("unshare") is None:
            raise ExecuteError("isolation 'netns' needs unshare(1) from util-linux")
        # a user without root (a site's compute node): the network namespace inside a user namespace of its own
        user = [] if os.geteuid() == 0 else ["--user", "--map-root-user"]
        return ["unshare", *user, "--net", "--", *runner]
    return runner


#: Why a user without root gets no network namespace of its own, and what to do.
USERNS_HINT = ("; a user without root gets a private network namespace only inside a user namespace: this node's "
               "kernel refuses one (sysctl user.max_user_namespaces must be above 0; Debian and Ubuntu kernels also "
               "need kernel.unprivileged_userns_clone=1, Ubuntu 24.04 kernel.apparmor_restrict_unprivileged_userns=0). "
               "Ask the site to allow them, or leave the raw TCP experiments out on this testbed "
               "(experiments.<tcp|streams>.skip_testbeds)")


def namespace_hint(argv: list[str], runner_err: str) -> str:
    """:data:`USERNS_HINT` when the runner never started because ``unshare --user`` failed; else ``""``."""
    return USERNS_HINT if "--user" in argv[:3] and "unshare:" in runner_err else ""


def execute(launch: Launch, out_path: str | os.PathLike, timeout: float,
            rank_hosts_dir: str | os.PathLike | None = None) -> dict:
    """Run ``launch`` with a time limit; its output goes to ``out_path``.
    ``rank_hosts_dir``: a directory where each rank records its host
    (``HPCVIRT_RANK_HOSTS`` for the launch's process, read by the ranks'
    wrapper; not a setting of the testbed, so not in the launch's ``env``).

    Returns the runner's status (``exit_code``, ``timed_out``, ``note``,
    ``started_at``, ``finished_at``) plus ``runner_stderr`` and ``spec`` (the
    launch as run, for the provenance)."""
    spec = {**launch.to_dict(), "timeout_s": timeout}
    if rank_hosts_dir is not None:
        spec["rank_hosts_dir"] = str(Path(rank_hosts_dir).resolve())
    # the runner imports this library, wherever the calling Python found it
    lib = str(Path(__file__).resolve().parents[1])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [lib, os.environ.get("PYTHONPATH")])))
    with tempfile.TemporaryDirectory(prefix="hpcvirt-") as tmp:
        spec_path, status_path = os.path.join(tmp, "spec.json"), os.path.join(tmp, "status.json")
        with open(spec_path, "w", encoding="utf-8") as fh:
            json.dump(spec, fh)
        argv = runner_argv(spec_path, str(out_path), status_path, launch.isolation)
        try:
            cp = subprocess.run(argv, timeout=timeout + 60, capture_output=True, text=True, env=env)
            runner_err = cp.stderr.strip()
        except subprocess.TimeoutExpired:
            runner_err = "the runner itself did not return"
        try:
            with open(status_path, encoding="utf-8") as fh:
                status = json.load(fh)
        except (OSError, ValueError):
            note = runner_err[-2000:] + namespace_hint(argv, runner_err)
            status = {"exit_code": None, "timed_out": None, "note": note}
    status["runner_stderr"] = runner_err
    status["spec"] = spec
    return status


def succeeded(status: dict) -> bool:
    return status.get("exit_code") == 0 and not status.get("timed_out")
