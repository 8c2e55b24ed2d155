"""Run one measurement: build the launch, execute it (inside a private network
namespace when the testbed asks for one), and write the raw output and its
provenance record.

Outputs are written atomically.  A failed or timed-out run never lands at
the raw path: its output is kept next to it under a unique
``rep-N.failed-<UTC time>.out`` name (never overwritten) and the error names
that file and ends with the last lines it printed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from . import launch as launch_mod
from . import provenance
from .atomic import write_json
from .matrix import Configuration


class MeasurementError(RuntimeError):
    pass


def context_for(study: dict, tb: dict, c: Configuration, rep: int, launch: launch_mod.Launch, raw: str) -> dict:
    """Columns of the tidy table that the benchmark output cannot know."""
    runtime = tb.get("runtime", {"kind": "none"})
    return {
        "run_id": f"{study['campaign']}/{c.testbed}/{c.benchmark}/{c.params}/rep-{rep}",
        "campaign": study["campaign"],
        "testbed": c.testbed,
        "testbed_kind": tb["kind"],
        "virtualization": {"native": "none", "netns-bridge": "netns-bridge", "qemu": "qemu"}[tb["kind"]]
        + ("" if runtime["kind"] == "none" else f"+{runtime['kind']}"),
        "interconnect": launch.interconnect,
        "stack": runtime.get("stack", "host") if runtime["kind"] != "none" else "host",
        "mpi": launch.mpi,
        "ranks": launch.ranks,
        "nodes": launch.nodes,
        "ranks_per_node": launch.ranks_per_node,
        "placement": "intra-node" if launch.nodes == 1 else "inter-node",
        "rep": rep,
        "warmup": "benchmark-internal",
        "raw_path": raw,
        "expected": launch.expected,
    }


def _tail(path: Path, n: int = 15) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join("    " + line for line in lines[-n:])


def wrapped_argv(spec_path: str, out_path: str, status_path: str, isolation: str) -> list[str]:
    runner = [sys.executable, "-m", "hpcvirt.runner", spec_path, out_path, status_path]
    if isolation == "netns":
        if shutil.which("unshare") is None:
            raise MeasurementError("isolation 'netns' needs unshare(1) from util-linux")
        return ["unshare", "--net", "--", *runner]
    return runner


def run_measurement(study: dict, tb: dict, c: Configuration, rep: int, raw_out: str, prov_out: str) -> dict:
    launch = launch_mod.build(c, tb)
    timeout = int(study.get("timeout_s", 300))
    raw_out_p = Path(raw_out)
    raw_out_p.parent.mkdir(parents=True, exist_ok=True)
    ctx = context_for(study, tb, c, rep, launch, raw_out)
    digest = provenance.config_hash(study, tb)
    with tempfile.TemporaryDirectory(prefix="hpcvirt-") as tmp:
        spec = {**launch.to_dict(), "timeout_s": timeout}
        spec_path = os.path.join(tmp, "spec.json")
        status_path = os.path.join(tmp, "status.json")
        with open(spec_path, "w", encoding="utf-8") as fh:
            json.dump(spec, fh)
        fd, tmp_out = tempfile.mkstemp(prefix=f".{raw_out_p.name}.", suffix=".partial", dir=raw_out_p.parent)
        os.close(fd)
        argv = wrapped_argv(spec_path, tmp_out, status_path, launch.isolation)
        try:
            proc = subprocess.run(argv, timeout=timeout + 60, capture_output=True, text=True)
            runner_err = proc.stderr.strip()
        except subprocess.TimeoutExpired:
            runner_err = "the runner itself did not return"
        try:
            with open(status_path, encoding="utf-8") as fh:
                status = json.load(fh)
        except (OSError, ValueError):
            status = {"exit_code": None, "timed_out": None, "note": runner_err[-2000:]}
        rec = provenance.record(launch=spec, status=status, config_digest=digest, context=ctx)
        ok = status.get("exit_code") == 0 and not status.get("timed_out")
        if ok:
            os.chmod(tmp_out, 0o444)
            os.replace(tmp_out, raw_out)
            write_json(prov_out, rec)
            return rec
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
        failed = raw_out_p.with_name(f"{raw_out_p.stem}.failed-{stamp}.out")
        os.replace(tmp_out, failed)
        write_json(failed.with_suffix(".json"), rec)
        why = status.get("note") or f"exit code {status.get('exit_code')}"
        raise MeasurementError(
            f"measurement {ctx['run_id']} failed ({why}); its output is kept at {failed}\n"
            f"  command: {' '.join(launch.argv)}\n  last lines:\n{_tail(failed)}"
            + (f"\n  runner: {runner_err[-500:]}" if runner_err else "")
        )
