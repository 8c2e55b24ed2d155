"""The container preflight: before any benchmark runs on a containerized
testbed, host and image must agree on MPI and PMIx, and a 2-rank wire-up
must pass through the launcher and the container prefix exactly as a
measurement runs it (:func:`hpcvirt.execute.execute`)."""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Mapping

from .benchmarks import REGISTRY
from .execute import execute, succeeded
from .kinds import KINDS, Native
from .matrix import Configuration, configurations
from .provenance import portable
from .runtime import APPTAINER_KINDS, NATIVE_KINDS, PROCESS_ENV, _image, container_prefix, launch_env
from .stack import (PreflightError, Runner, check_match, image_digest, runtime_provenance, stack_identity,
                    verify_image)
from .testbeds import launch
from .tidy import ParseError

__all__ = ["PreflightError", "preflight", "wireup", "testbed_preflight"]



def charliecloud_provenance(rt: Mapping[str, Any], timeout: float = 30) -> dict:
    """Which ch-run ran: its path and ``ch-run --version`` (printed on standard
    error; None when it cannot tell)."""
    import shutil
    import subprocess

    exe = str(rt.get("exe", "ch-run"))
    path = shutil.which(exe) or exe
    try:
        cp = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=timeout,
                            env={**os.environ, **launch_env(rt)})
        out = (cp.stdout + cp.stderr).strip().splitlines()
        version = out[0].strip() if cp.returncode == 0 and out else None
    except (OSError, subprocess.TimeoutExpired):
        version = None
    return {"kind": "charliecloud", "exe": path, "version": version}

def preflight(
    runtime: Mapping[str, Any],
    flavor: str = "openmpi",
    *,
    runner: Runner | None = None,
    timeout: float = 120,
    check_ucx: bool = False,
) -> dict[str, Any]:
    """Probe host and image, compare, and return a provenance record.

    Returns ``{"host": {...}, "container": {...}, "image_digest": ...,
    "prefix": [...]}``; raises :class:`PreflightError` on a mismatch.  For
    ``kind: none`` the container side is the host itself.
    """
    env = launch_env(runtime)
    host = stack_identity((), flavor, runner=runner, timeout=timeout)
    prefix = container_prefix(runtime, single=True)
    if prefix:
        container = stack_identity(prefix, flavor, runner=runner, timeout=timeout, env=env)
    else:
        container = dict(host)
    check_match(host, container, check_ucx=check_ucx)
    digest = None
    image = (runtime or {}).get("image")
    if image and Path(image).exists():
        digest = image_digest(image)
    return {
        "host": host,
        "container": container,
        "image_digest": digest,
        # the per-rank prefix of the 2-rank wire-up (join_ct auto: 2 ranks on the host)
        "prefix": container_prefix(runtime, ranks_per_node=2),
    }




def _tail_text(text: str, n: int = 15) -> str:
    return "\n".join("    " + line for line in text.splitlines()[-n:])


def wireup(tb: Mapping[str, Any], mpi: str, path: str, *, timeout: float = 120) -> dict[str, Any]:
    """Run the short 2-rank run the registry declares for it (``wireup``: a
    small ping-pong) through the testbed's launcher, its path options and the
    container prefix, exactly as a measurement runs it (same launch builder,
    same :func:`~hpcvirt.execute.execute`).  Returns a record; raises
    :class:`PreflightError` with the command and the last lines of output
    when the ranks do not complete the exchange."""
    bench = next(b for b in REGISTRY if b.wireup)
    settings = {"mpi": mpi, "path": path, **bench.wireup}
    la = launch(Configuration(str(tb["name"]), bench.name, f"preflight-{mpi}-{path}", settings), dict(tb))
    with tempfile.TemporaryDirectory(prefix="hpcvirt-preflight-") as tmp:
        out_path = Path(tmp) / "out"
        t0 = time.monotonic()
        status = execute(la, out_path, timeout)
        seconds = round(time.monotonic() - t0, 3)
        runner_err = status["runner_stderr"]
        output = out_path.read_text(errors="replace") if out_path.exists() else ""
        env = {k: v for k, v in la.env.items() if k not in PROCESS_ENV}     # as hpcvirt.provenance.record
        rec = {"mpi": mpi, "path": path, "argv": la.argv, "env": env, "isolation": la.isolation,
               "exit_code": status.get("exit_code"), "timed_out": status.get("timed_out"), "seconds": seconds}
        problem = None
        if not succeeded(status):
            problem = status.get("note") or f"exit code {status.get('exit_code')}"
        else:
            try:
                rows = bench.read(out_path, la.expected)
                rec["max_bytes_reached"] = max(m.msg_bytes or 0 for m in rows)
            except (ParseError, ValueError) as exc:
                problem = f"output rejected: {exc}"
        if problem:
            hint = ""
            if "$USER not set" in output or "$USER not set" in runner_err:
                hint = ("\n  hint: ch-run needs $USER; the launch environment lacks it "
                        "(export USER=$(id -un), or add hpcvirt.runtime.launch_env() to the launch env)")
            raise PreflightError(
                f"2-rank wire-up of {mpi}/{path} on testbed {tb['name']} failed ({problem})\n"
                f"  command: {' '.join(la.argv)}\n  last lines:\n{_tail_text(output)}"
                + (f"\n  runner: {runner_err[-500:]}" if runner_err else "") + hint
            )
        return rec


def _study_mpis_paths(study: Mapping[str, Any], tb: Mapping[str, Any]) -> list[tuple[str, list[str]]]:
    """The MPIs the study runs on this testbed, each with the data paths its
    configurations use (the first path the testbed offers when none names one)."""
    used: dict[str, list[str]] = {}
    for c in configurations(dict(study, testbeds=[tb["name"]])):
        mpi = c.settings.get("mpi")
        if mpi:
            used.setdefault(mpi, [])
            if c.settings.get("path") and c.settings["path"] not in used[mpi]:
                used[mpi].append(c.settings["path"])
    return [(m, ps or sorted(tb["mpi"][m]["paths"])[:1]) for m, ps in sorted(used.items())]


def testbed_preflight(
    study: Mapping[str, Any],
    tb: Mapping[str, Any],
    *,
    timeout: float = 120,
    runner: Runner | None = None,
    wire: bool = True,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Everything that must hold before a benchmark runs on a containerized
    testbed, as one record (``data/raw/<campaign>/<testbed>/preflight.json``).

    1. the image exists and matches its ``.sha256`` sidecar (digest recorded);
    2. for every MPI the study uses: host vs image MPI implementation and
       major.minor, PMIx major.minor, and UCX major.minor when the runtime
       says ``check_ucx: true`` (all four versions are always recorded);
       the project's builds the testbed names are in the image, installed
       by Spack with the lock's hashes (:func:`hpcvirt.image.check`);
    3. for every MPI and data path the study uses (native testbeds): a
       2-rank NetPIPE wire-up through the launcher and the container prefix.

    Raises :class:`PreflightError` at the first failure; the message names
    both versions or the failing command.
    """
    from datetime import datetime, timezone

    say = log or (lambda _msg: None)
    rt = dict(tb.get("runtime") or {"kind": "none"})
    rec: dict[str, Any] = {
        "schema": "hpcvirt-preflight/1",
        "campaign": study.get("campaign"),
        "testbed": tb["name"],
        "runtime": rt,
        "started_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    prov = {"stack": "host", "image": "", "image_digest": "", "spack_lock": ""}
    if rt.get("kind", "none") not in NATIVE_KINDS:
        img = verify_image(_image(rt))
        say(f"image {img['image']}: {img['image_digest']}")
        prov = runtime_provenance(rt)
        rec["image_bytes"] = img.get("image_bytes")
        rec["image_sidecar"] = img.get("sidecar")
        if rt.get("kind") in APPTAINER_KINDS:
            from .apptainer import provenance as apptainer_provenance
            rec["container_runtime"] = apptainer_provenance(rt)
            u = rec["container_runtime"]["userns"]
            say(f"apptainer {rec['container_runtime']['version']} at {rec['container_runtime']['exe']}; "
                f"--userns {'on' if u['flag'] else 'off'} ({u['decided_by']}: {u.get('reason', '')})")
        elif rt.get("kind") == "charliecloud":
            rec["container_runtime"] = charliecloud_provenance(rt, timeout=timeout)
            say(f"charliecloud {rec['container_runtime']['version']} at {rec['container_runtime']['exe']}")
    rec.update(prov)
    check_ucx = bool(rt.get("check_ucx", False))
    rec["compared"] = ["mpi_impl", "mpi major.minor", "pmix major.minor"] + (["ucx major.minor"] if check_ucx else [])
    rec["stacks"] = {}
    pairs = _study_mpis_paths(study, tb)
    for mpi, _paths in pairs:
        r = preflight(rt, mpi, runner=runner, timeout=timeout, check_ucx=check_ucx)
        rec["stacks"][mpi] = {"host": r["host"], "container": r["container"]}
        say(f"{mpi}: host {r['host']} | image {r['container']}: match")
    from .build import named_builds
    from .image import ImageError, check as check_suites, containerized
    named = named_builds(dict(tb))
    if named and containerized(rt):       # Spack's installs in the image vs the lock
        try:
            suites = check_suites(_image(rt), named)
        except ImageError as exc:
            raise PreflightError(str(exc)) from None
        rec["image_suites"] = {"lock": suites["lock"], "lock_sha256": suites["lock_sha256"],
                               "hashes": {k: v["spack"]["hash"] for k, v in suites["builds"].items()}}
        say(f"image suites: the {len(named)} builds the testbed names are Spack's of {suites['lock']}, "
            f"hashes as in the lock")
    rec["wireup"] = []
    if wire:
        if not KINDS[tb.get("kind", Native.name)].wraps_ranks:
            rec["wireup_skipped"] = f"kind {tb.get('kind')}: the wire-up runs with the first measurement"
        else:
            for mpi, paths in pairs:
                for path in paths:
                    w = wireup(tb, mpi, path, timeout=timeout)
                    rec["wireup"].append(w)
                    say(f"wire-up {mpi}/{path}: ok in {w['seconds']} s")
    rec["finished_at"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    rec["ok"] = True
    return portable(rec)
