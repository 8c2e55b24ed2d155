"""Run one measurement: build the launch, execute it (inside a private network
namespace when the testbed asks for one), and write the raw output and its
provenance record.

Outputs are written atomically, and a raw output is never replaced: it is
published with a no-clobber link, and a measurement whose raw path already
exists is refused.  A failed or timed-out run never lands at the raw path:
its output is kept next to it under a unique ``rep-N.failed-<UTC time>.out``
name (never overwritten) and the error names that file and ends with the
last lines it printed.  The ``.rep-N.out.*.partial`` file of a run that was
killed before it could clean up is removed by the next attempt, which says so.

A round on a qemu testbed (:func:`run_round`) keeps what it finished when it
is interrupted or fails: each finished raw output and its provenance get a
second hard link, ``.rep-N.out.kept`` (the round's journal).  The workflow
manager removes the outputs of an interrupted job before running it again;
the rerun links the kept files back (the same files, untouched) and measures
only the rest.  The journal is dropped when the round ends without error.
These hidden files beside a raw output are made, read and removed by
:mod:`hpcvirt.rawfiles`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import traceback
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

from . import apptainer, paths, provenance
from .atomic import publish, write_json, write_text
from .benchmarks import REGISTRY, Compiled, PinnedSource
from .build import BuildError, ensure as ensure_build, in_guest, project_build
from .image import record as image_record
from .config import testbed_hash
from .execute import execute, succeeded
from .link import UNDERLAY, label as link_label
from .matrix import Configuration
from .rawfiles import RANKS_SUFFIX, clear_partials, drop_kept, keep, kept, new_partial, read_rank_hosts, restore_kept
from .placement import misplaced
from .sources import SourceError
from .runtime import APPTAINER_KINDS
from .stack import runtime_provenance
from .testbeds import KINDS, Launch, kind as testbed_kind, launch as build_launch


class MeasurementError(RuntimeError):
    pass


class MeasurementTimeout(MeasurementError):
    """The run was killed at its time limit (its output is kept as ``.failed-*``)."""


def bed_tag(*parts) -> str:
    """A short tag (``^[a-z0-9]{8}$``) naming the namespaces/guests of one run."""
    return hashlib.sha256("/".join(map(str, parts)).encode()).hexdigest()[:8]


def context_for(study: dict, tb: dict, c: Configuration, rep: int, launch: Launch, raw: str,
                bed=None) -> dict:
    """Columns of the tidy table that the benchmark output cannot know."""
    runtime = tb.get("runtime", {"kind": "none"})
    image = runtime_provenance(runtime)
    ctx = {
        "run_id": f"{study['campaign']}/{c.testbed}/{c.benchmark}/{c.params}/rep-{rep}",
        "campaign": study["campaign"],
        "testbed": c.testbed,
        "testbed_kind": tb["kind"],
        "virtualization": testbed_kind(tb, bed).virtualization(),   # for guests: the accelerator used
        "interconnect": launch.interconnect,
        "link": link_label(tb.get("network")) if KINDS[tb["kind"]].own_link else "",
        "stack": image["stack"],
        "image_digest": image["image_digest"],
        "spack_lock": image["spack_lock"],
        "mpi": launch.mpi,
        "ranks": launch.ranks,
        "nodes": launch.nodes,
        "ranks_per_node": launch.ranks_per_node,
        "placement": launch.expected.get("placement", "intra-node" if launch.nodes == 1 else "inter-node"),
        "variant": launch.expected.get("variant", ""),
        "rep": rep,
        "warmup": launch.expected.get("warmup", "benchmark-internal"),
        "raw_path": raw,
        "expected": launch.expected,
        "testbed_info": getattr(bed, "info", None),
    }
    if runtime.get("kind") in APPTAINER_KINDS:
        # which Apptainer (version, source checksum when built here) and whether it ran with --userns, and why
        ctx["container_runtime"] = apptainer.provenance(runtime)
    return ctx


def _tail(path: Path, n: int = 15) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join("    " + line for line in lines[-n:])


def ensure_binary(tb: dict, c: Configuration) -> dict | None:
    """Build what the testbed names as the workflow's own build, on first
    use: a pinned suite under ``.hpcvirt/suites/`` (:mod:`hpcvirt.build`,
    cached per build key; its build record goes into the provenance), or a
    benchmark compiled from ``workflow/src/`` (its binary matches the
    declaration's ``host_binary``, e.g. ``.hpcvirt/bin/advect-<mpi>``) when it
    is missing or older than its source or build script; return its path and
    sha256 for the provenance.  (Guests carry the same suite builds under
    ``/opt/hpcvirt/suites/``, copied into the guest image, whose key includes
    the build keys: their record is the host build's.  A container image has
    Spack's own install of them there: the record is the image's,
    :func:`hpcvirt.image.record`.  The placement
    benchmark is compiled into the image.)  Paths are relative to the workflow's working directory, where
    every job runs and where the launch finds the binary."""
    bench = REGISTRY[c.benchmark]
    entry = tb["mpi"][c.settings["mpi"]] if bench.mpi else tb
    binary = entry.get(bench.name, {}).get("binary")
    if binary is None:
        return None
    keep = ("suite", "source", "recipe", "spack", "compilers", "mpi", "mpi_version", "key", "built_at", "dir")
    if isinstance(bench.build, PinnedSource) and (which := project_build(binary)) and \
            (rec := image_record(tb.get("runtime") or {}, *which)):
        return {"path": binary, "build": {k: rec[k] for k in keep if k in rec}}   # Spack's install in the image
    if isinstance(bench.build, PinnedSource) and (which := project_build(binary)):
        try:
            rec = ensure_build(*which)
        except (BuildError, SourceError) as exc:
            raise MeasurementError(f"could not build {bench.name} ({binary}): {exc}") from None
        # the program: the first word of the argv inside the build (after e.g. `env LD_PRELOAD=...`)
        argv = bench.job(c.settings, entry[bench.name]).argv
        program = next((w for w in argv if w.startswith(binary.rstrip("/"))), argv[0])
        if not in_guest(binary) and not Path(program).is_file():
            raise MeasurementError(f"{c.testbed}: the project's build of {which[0]} ({rec['dir']}) has no {program}; "
                                   f"it builds {', '.join(rec['recipe']['targets'])} (a testbed may name a site's "
                                   f"build instead)")
        return {"path": binary, "build": {k: rec[k] for k in keep if k in rec}}
    m = re.match(bench.build.host_binary, binary) if isinstance(bench.build, Compiled) else None
    if not m:
        return {"path": binary}
    out, script, src = Path(binary), Path(bench.build.script), Path(bench.build.source)
    # the compiler wrapper the build script takes (a site's, or Debian's): a binary built with another is rebuilt
    mpi, built_with = m.group(1), out.with_name(out.name + ".cc")
    wrapper = os.environ.get(f"HPCVIRT_MPICC_{mpi.upper()}") or f"mpicc.{mpi}"
    if (not out.exists() or out.stat().st_mtime < max(src.stat().st_mtime, script.stat().st_mtime)
            or not built_with.exists() or built_with.read_text() != wrapper):
        cp = subprocess.run([f"./{script}", mpi, str(out)], capture_output=True, text=True, timeout=300)
        if cp.returncode != 0:
            raise MeasurementError(f"could not build {bench.name} ({binary}):\n{cp.stderr[-2000:]}")
        print(cp.stdout.strip(), file=sys.stderr)
        write_text(built_with, wrapper)
    return {"path": binary, "sha256": hashlib.sha256(out.read_bytes()).hexdigest(), "cc": wrapper}


def record_testbed(campaign: str, tb: dict) -> None:
    """Keep the testbed's settings beside the campaign's raw outputs
    (``data/raw/<campaign>/<testbed>/testbed.json``, written once, never
    replaced): the workflow refuses to add measurements made with other
    settings to the campaign (:func:`hpcvirt.rawfiles.check_campaign_testbeds`)."""
    path = paths.raw_output(Path(paths.RAW_ROOT) / campaign / tb["name"] / "testbed.json")
    if path.exists():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".testbed.", suffix=".tmp", dir=path.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump({"testbed_hash": testbed_hash(tb), "testbed": tb}, fh, indent=2, sort_keys=True)
    try:
        os.link(tmp, path)      # no-clobber: a concurrent writer's record wins
    except FileExistsError:
        pass
    finally:
        os.unlink(tmp)


def host_identity(host: dict) -> dict:
    """What tells two hosts apart in a provenance record's ``host``: its
    :func:`hpcvirt.provenance.host_id` where recorded (records before it
    have none), its name and CPU model, and its cores and caches (hwloc's
    synthetic topology without memory sizes): machines cloned from one
    image share a machine id, and a cloud's "same" instance type may land on
    another processor."""
    cpu = host.get("cpu") or {}
    topology = cpu.get("hwloc_synthetic")
    return {"host_id": host.get("host_id"), "hostname": host.get("hostname"), "cpu": cpu.get("model"),
            "topology": re.sub(r"\(memory=\d+\)", "", topology) if isinstance(topology, str) else None}


def same_host(a: dict, b: dict) -> bool:
    if a.get("topology") and b.get("topology") and a["topology"] != b["topology"]:
        return False
    if a.get("host_id") and b.get("host_id"):
        return a["host_id"] == b["host_id"]
    return (a.get("hostname"), a.get("cpu")) == (b.get("hostname"), b.get("cpu"))


def recorded_host(campaign: str) -> tuple[dict, Path] | None:
    """The host that measured ``campaign``, from the first provenance record
    of a testbed with the local executor (``testbed.json``; a Slurm
    testbed's runs are on its nodes), and that record; None if it has none."""
    top = Path(paths.RAW_ROOT) / campaign
    for record in sorted(top.glob("*/testbed.json")):
        try:
            if json.loads(record.read_text())["testbed"].get("executor", "local") != "local":
                continue
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue
        for prov in sorted(record.parent.glob("*/*/rep-*.json")):
            try:
                return host_identity(json.loads(prov.read_text()).get("host") or {}), prov
            except (OSError, ValueError, AttributeError):
                continue
    return None


def check_host(study: dict) -> None:
    """Refuse to add measurements to a campaign that another host measured
    with the local executor (its raw outputs would mix two machines), unless
    the study says ``extend_on_other_host: true``.  A Slurm testbed's job
    runs this on its first node: a site's nodes never join a laptop's
    campaign (the archive) by mistake, while the project's own Slurm cluster,
    on the host that measured the campaign, may."""
    if study.get("extend_on_other_host"):
        return
    found = recorded_host(study["campaign"])
    if found is None:
        return
    old, where = found
    new = host_identity(provenance.host_facts())
    if not same_host(old, new):
        raise MeasurementError(
            f"campaign {study['campaign']!r} was measured on host {old} ({where}); this host is {new}. A campaign "
            "is extended only on the host that measured it: measure a new campaign (--config campaign=<new name>), "
            "or add to this one on purpose with --config extend_on_other_host=True")


def run_measurement(study: dict, tb: dict, c: Configuration, rep: int, raw_out: str, prov_out: str,
                    bed=None) -> dict:
    """Measure one configuration once (one raw output and its provenance).
    An experiment may ask for a run killed at its time limit to be run again
    (``retries_after_timeout``: MPICH's NetPIPE sometimes hangs in
    MPI_Finalize after a complete sweep).  Every killed attempt's output is
    kept as ``.failed-*``; a retry on a namespace testbed gets namespaces of
    its own, and in guests what the killed attempt left is killed first."""
    try:
        for path in (raw_out, prov_out):
            paths.raw_output(path)
    except paths.RawPathError as exc:
        raise MeasurementError(str(exc)) from None
    if Path(raw_out).exists():
        raise MeasurementError(f"{raw_out} exists: a raw output is never replaced (delete it to measure it again)")
    check_host(study)
    retries = int(c.settings.get("retries_after_timeout", 0))
    earlier: list[str] = []
    while True:
        try:
            return _in_bed(study, tb, c, rep, raw_out, prov_out, bed, earlier)
        except MeasurementTimeout as exc:
            if len(earlier) >= retries:
                raise
            earlier.append(str(exc.failed))
            print(f"retry {len(earlier)} of {retries}: {c.benchmark}/{c.params} rep {rep} was killed at its time "
                  f"limit; its output is kept at {exc.failed}", file=sys.stderr, flush=True)
            if bed is not None and hasattr(bed, "kill_strays"):
                bed.kill_strays(STRAYS + ((Path(exc.program).name,) if exc.program else ()))


#: Launchers' and daemons' process names a killed run may leave in guests (a launcher started by
#: a link's name keeps that name: Debian's mpiexec.mpich and mpirun.openmpi).
STRAYS = ("mpirun", "orterun", "orted", "prted", "mpiexec", "mpiexec.hydra", "hydra_pmi_proxy",
          "mpiexec.mpich", "mpirun.openmpi", "mpiexec.openmpi")


def _in_bed(study: dict, tb: dict, c: Configuration, rep: int, raw_out: str, prov_out: str, bed,
            earlier: list[str]) -> dict:
    if KINDS[tb["kind"]].hosts_per_run and bed is None:
        from .netns import NetnsBridge

        net = tb.get("network", {})
        # the namespaces (and everything in them) go when the attempt ends: a retry starts clean
        with NetnsBridge(bed_tag(study["campaign"], c.key, rep), hosts=tb["nodes"],
                         subnet=net.get("subnet", "198.18.0.0/24"), mtu=net.get("mtu", 1500),
                         rate=net.get("rate"), delay_us=net.get("delay_us"), path=net.get("path", "bridge"),
                         underlay=net.get("underlay", UNDERLAY)) as bed:
            return _attempt(study, tb, c, rep, raw_out, prov_out, bed, earlier)
    return _attempt(study, tb, c, rep, raw_out, prov_out, bed, earlier)


def _attempt(study: dict, tb: dict, c: Configuration, rep: int, raw_out: str, prov_out: str, bed,
             earlier: list[str]) -> dict:
    binary = ensure_binary(tb, c)
    launch = build_launch(c, tb, bed)
    timeout = int(c.settings.get("timeout_s") or study.get("timeout_s", 300))    # the experiment's, or the study's
    raw_out_p = Path(raw_out)
    raw_out_p.parent.mkdir(parents=True, exist_ok=True)
    record_testbed(study["campaign"], tb)
    ctx = context_for(study, tb, c, rep, launch, raw_out, bed)
    ctx["timeout_s"] = timeout          # the time limit the run had (the experiment's or the study's)
    if earlier:
        ctx["earlier_attempts"] = list(earlier)     # outputs of the attempts killed at the time limit
    if binary:
        ctx["benchmark_binary"] = binary
        if "build" in binary:
            ctx["source_sha256"] = binary["build"]["source"]["sha256"]
    ctx["testbed_hash"] = testbed_hash(tb)
    digest = provenance.config_hash(study, tb)
    clear_partials(raw_out_p)
    tmp_out = new_partial(raw_out_p)
    # where each rank ran: the ranks' wrapper writes one file per rank here (beside the raw
    # output, on the file system a job's nodes share); MPI launches only
    rank_dir = Path(tmp_out + RANKS_SUFFIX) if launch.mpi not in ("", "none") else None
    try:
        if rank_dir is not None:
            try:
                rank_dir.mkdir()
            except OSError:         # e.g. a full disk: the run goes on, its ranks' hosts are not recorded
                rank_dir = None
        status = execute(launch, tmp_out, timeout, rank_hosts_dir=rank_dir)
        spec, runner_err = status.pop("spec"), status.pop("runner_stderr")
        if rank_dir is not None:
            ctx["rank_hosts"] = read_rank_hosts(rank_dir, launch.ranks)
        untrusted = disk_full(raw_out_p.parent) or misplaced(ctx.get("rank_hosts"), launch.nodes)
        if untrusted and succeeded(status):
            # the benchmark's writes may have failed silently, or its ranks ran elsewhere than meant: its
            # output cannot be trusted
            status["note"] = untrusted
        rec = provenance.record(launch=spec, status=status, config_digest=digest, context=ctx)
        if succeeded(status) and not untrusted:
            os.chmod(tmp_out, 0o444)
            try:
                publish(tmp_out, raw_out)
                write_json(prov_out, rec)
            except FileExistsError:
                raise MeasurementError(f"{raw_out} appeared while {ctx['run_id']} ran (another writer?); "
                                       f"it is kept as it is and this run's output is dropped") from None
            except OSError as exc:      # e.g. no space left for the provenance: the measurement is not complete
                for path in (raw_out, prov_out):
                    if Path(path).exists():
                        os.chmod(path, 0o644)
                        os.unlink(path)
                raise MeasurementError(f"measurement {ctx['run_id']}: could not write {prov_out} ({exc}); "
                                       f"nothing is kept, measure it again when there is room") from None
            return rec
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
        failed = raw_out_p.with_name(f"{raw_out_p.stem}.failed-{stamp}.out")
        os.replace(tmp_out, failed)     # a rename: needs no space
        try:
            write_json(failed.with_suffix(".json"), rec)
        except OSError as exc:
            print(f"could not write the record of {failed}: {exc}", file=sys.stderr)
    finally:
        if os.path.exists(tmp_out):
            os.unlink(tmp_out)
        if rank_dir is not None:
            shutil.rmtree(rank_dir, ignore_errors=True)
    why = status.get("note") or f"exit code {status.get('exit_code')}"
    exc = (MeasurementTimeout if status.get("timed_out") else MeasurementError)(
        f"measurement {ctx['run_id']} failed ({why}); its output is kept at {failed}\n"
        f"  command: {' '.join(launch.argv)}\n  last lines:\n{_tail(failed)}"
        + (f"\n  runner: {runner_err[-500:]}" if runner_err else "")
    )
    exc.failed, exc.program = failed, (binary or {}).get("path")
    raise exc


def run_round(study: dict, tb: dict, items: list[tuple[Configuration, str, str]], rep: int) -> list[dict]:
    """One interleaved round on a qemu testbed: boot the guests once, run
    ``items`` (configuration, raw path, provenance path) in the given order,
    tear everything down whatever happens.  Every configuration is attempted;
    the first failure is raised at the end."""
    from .qemu import QemuCluster

    pending = []
    for c, raw, prov in items:
        # a journal link is left only by an attempt of this round that did not end
        # (whether or not the workflow manager removed the output it had finished)
        interrupted = kept(raw, prov)
        if restore_kept(raw, prov):
            why = "finished by an earlier, interrupted attempt of this round" if interrupted else \
                "measured before, in this round of a campaign the study has grown since"
            print(f"kept: {c.benchmark}/{c.params} rep {rep} ({why})", file=sys.stderr)
        else:
            pending.append((c, raw, prov))
    if not pending:
        drop_kept(items)
        return []
    check_host(study)             # before the guests boot
    vm, net = tb.get("vm", {}), tb.get("network", {})
    records, errors = [], []
    with QemuCluster(bed_tag(study["campaign"], tb["name"], rep), guests=tb["nodes"], vcpus=vm.get("vcpus", 1),
                     memory_mb=vm.get("memory_mb", 1024), accel=vm.get("accel", "auto"),
                     boot_timeout_s=vm.get("boot_timeout_s", 240), subnet=net.get("subnet", "198.18.1.0/24"),
                     mtu=net.get("mtu", 1500), rate=net.get("rate"), delay_us=net.get("delay_us"),
                     path=net.get("path", "bridge")) as cluster:
        print(f"guests up ({cluster.accel}): {', '.join(cluster.guests)}", file=sys.stderr)
        for i, (c, raw, prov) in enumerate(pending, 1):
            line = f"[{i}/{len(pending)}] {c.benchmark}/{c.params} rep {rep}"
            print(line, file=sys.stderr, flush=True)
            print(f"hpcvirt: {tb['name']} round {rep} ({cluster.accel}): {line}", flush=True)  # the terminal
            try:
                records.append(run_measurement(study, tb, c, rep, raw, prov, bed=cluster))
                keep(raw, prov)
                print(f"ok: {c.benchmark}/{c.params} rep {rep}", file=sys.stderr, flush=True)
            except MeasurementError as exc:
                errors.append(exc)
                cluster.check_alive()  # a dead guest ends the round with its own error
    if errors:
        raise errors[0]
    drop_kept(items)
    return records


# Less free space than this where the raw output was written: the disk was
# full, and the benchmark's writes may have failed without it noticing.
FULL_BYTES = 64 * 1024


def disk_full(directory: Path) -> str:
    """A note if the filesystem holding ``directory`` is (nearly) full, else ''."""
    st = os.statvfs(directory)
    free = st.f_bavail * st.f_frsize
    if free < FULL_BYTES:
        return (f"the filesystem holding {directory} was full when the run ended ({free} bytes free): "
                f"its output may be cut and is not used")
    return ""


@contextmanager
def job_log(path: str, what: str):
    """The body of a measurement job, with stderr in the job's log.  An error
    goes to the log (with its traceback) and to the terminal, where it is not
    lost with the redirected stderr, and the job exits 1."""
    terminal = sys.stderr
    with open(path, "w") as log:
        sys.stderr = log
        try:
            yield log
        except BaseException as exc:
            traceback.print_exc(file=log)
            print(f"{what}: {exc}", file=terminal)
            raise SystemExit(1) from None
        finally:
            sys.stderr = terminal
