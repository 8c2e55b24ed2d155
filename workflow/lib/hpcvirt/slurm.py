"""Slurm settings of a measurement, from its testbed file (never from rules).

The Snakemake Slurm executor (``workflow/profiles/slurm``) turns these
resources into sbatch options:

=====================  ==========================================
resource               sbatch
=====================  ==========================================
``slurm_partition``    ``-p``
``slurm_account``      ``-A``
``runtime``            ``-t`` (minutes, per measurement; summed per group job)
``constraint``         ``-C``
``qos``                ``--qos``
``nodes``              ``--nodes``
``tasks``              ``--ntasks``
``tasks_per_node``     ``--ntasks-per-node`` (multi-node testbeds)
``cpus_per_task``      ``--cpus-per-task``
``slurm_extra``        ``--exclusive`` (a measurement owns its nodes)
``mpi``                (no option) marks a job that starts its own ranks
=====================  ==========================================

Why ``mpi``: inside the allocation, the executor's job-step plugin wraps a
job without it in ``srun -n1 --cpus-per-task=...``; an ``srun`` of the MPI
launcher inside that step would wait for CPUs the step already holds.  With
``mpi`` set, the job runs directly in the batch step and the testbed's
launcher (``srun --mpi=... -n 2``) creates the step with both ranks.

Every measurement of a testbed asks for the same allocation shape (so the
measurements of one testbed can share one allocation: group resources that
are strings must be equal, and ``tasks`` and ``tasks_per_node`` must not be
mixed).  The shape is what the study's most demanding configuration on that
testbed needs, computed from the launches themselves: the most nodes any of
them uses and the most ranks any of them puts on one node (e.g. an
intra-node placement run, all ranks on one node).

Grouping (:func:`group`): all measurements of one testbed form one Slurm
group; ``--group-components <group>=N`` puts N of them into one allocation
(``workflow/profiles/slurm/config.yaml`` sets N for the shipped testbeds).
"""

from __future__ import annotations

import math
import re
import shutil
import subprocess
from pathlib import Path

from .benchmarks import REGISTRY
from .matrix import Configuration
from .testbeds import kind


def _launcher_names(tb: dict) -> str:
    """The launchers of the testbed's MPIs (``srun``), for the ``mpi`` resource.
    Identical for all measurements of a testbed, as group jobs require."""
    names = sorted({m["launcher"][0] for m in tb.get("mpi", {}).values() if m.get("launcher")})
    return "+".join(names) or "srun"


def allocation(tb: dict, configs: list[Configuration]) -> dict:
    """The allocation shape shared by the measurements ``configs`` of testbed ``tb``."""
    k = kind(tb)
    mine = [c for c in configs if c.testbed == tb["name"]]
    shapes = [k.shape(REGISTRY[c.benchmark], c.settings) for c in mine]
    over = [(c, p) for c, (_, _, p) in zip(mine, shapes) if p > int(tb["ranks_per_node"])]
    if over and tb.get("executor") == "slurm":     # this host's own testbeds may oversubscribe its cores
        c, p = over[0]
        raise ValueError(f"testbed {tb['name']}: {len(over)} measurement configuration"
                         f"{'s put' if len(over) > 1 else ' puts'} more ranks on one node than its ranks_per_node "
                         f"({tb['ranks_per_node']}), e.g. {c.benchmark} {c.params} with {p}: Slurm would not "
                         "start them (or oversubscribe the node); give the experiment fewer ranks on this testbed "
                         "(by_testbed) or raise ranks_per_node to what a node offers")
    nodes = min(int(tb["nodes"]), max([n for _, n, _ in shapes], default=1))
    per_node = max([p for _, _, p in shapes], default=1)
    if nodes == 1:
        shape = {"nodes": 1, "tasks": max([r for r, _, _ in shapes], default=1)}
    elif per_node > 1:
        shape = {"nodes": nodes, "tasks_per_node": per_node}
    else:  # the executor rejects tasks_per_node <= 1 for MPI jobs: use tasks then
        shape = {"nodes": nodes, "tasks": nodes}
    shape["cpus_per_task"] = 1
    shape["mpi"] = _launcher_names(tb)
    # Whole nodes: nothing else (other users' jobs, our own post-processing)
    # runs beside a measurement, as with the local executor.
    shape["slurm_extra"] = "--exclusive"
    return shape


def resources(tb: dict, configs: list[Configuration]) -> dict:
    """sbatch resources for one measurement on testbed ``tb`` (``configs``:
    the study's configurations, see :func:`allocation`).

    ``runtime`` (minutes) is the wall-time limit of one measurement; a group
    job asks for the sum over its measurements.  Keys that the testbed does not
    set are absent (the rule's resource functions return None for them, and
    Snakemake then leaves the option out of the sbatch call).
    """
    s = tb.get("slurm", {})
    out: dict = {"runtime": int(s.get("runtime_min", 30))}
    if s.get("partition"):
        out["slurm_partition"] = s["partition"]
    if s.get("account"):
        out["slurm_account"] = s["account"]
    if s.get("constraint"):
        out["constraint"] = s["constraint"]
    if s.get("qos"):
        out["qos"] = s["qos"]
    out.update(allocation(tb, configs))
    return out


def post_resources(testbeds: list[dict]) -> dict:
    """Where Slurm runs the jobs after the measurements (``parse`` of one testbed, ``aggregate`` of the
    campaign): the ``partition``, ``account`` and ``qos`` of the first of ``testbeds`` that sets them, so
    that on a site they go where its measurements went (the profile's default partition is the local
    cluster's).  Keys no testbed sets are absent: sbatch then takes the site's defaults."""
    s = next((tb.get("slurm", {}) for tb in testbeds if tb.get("executor") == "slurm"), {})
    keys = {"partition": "slurm_partition", "account": "slurm_account", "qos": "qos"}
    return {res: s[k] for k, res in keys.items() if s.get(k)}


def allocation_note(testbeds: dict[str, dict], missing: list[str]) -> list[str]:
    """Per Slurm testbed with measurements to run (``missing``: raw-output paths
    ``data/raw/<campaign>/<testbed>/...``), what its queue will be asked for: the measurements, their
    time in all, and how Snakemake's group components share allocations among them (the dry run prints
    it; the components themselves are not known while the workflow is read)."""
    out = []
    for name, tb in testbeds.items():
        n = sum(1 for p in missing if Path(p).parts[3:4] == (name,))
        if tb.get("executor") != "slurm" or not n:
            continue
        minutes, grp = int(tb.get("slurm", {}).get("runtime_min", 30)), group(tb)
        limit = partition_limit(tb.get("slurm", {}).get("partition"))
        fits = ("choose K for the partition's time limit" if limit is None
                else "the partition has no time limit (sinfo)" if math.isinf(limit)
                else f"the partition's time limit, {limit} min (sinfo), allows K up to {limit // minutes}"
                if limit >= minutes else
                f"the partition's time limit, {limit} min (sinfo), is below one measurement's: lower slurm.runtime_min")
        out.append(f"{name}: {n} measurements under Slurm, {minutes} min each (slurm.runtime_min), "
                   f"{n * minutes / 60:.1f} h in all; group-components {grp}=K puts K of them in one allocation "
                   f"of -t K x {minutes} min ({fits}; without an entry each is an allocation of its own)")
        absent = absent_paths(tb)
        if absent:
            out.append(f"{name}: {len(absent)} path{'s' if len(absent) > 1 else ''} of its testbed file "
                       f"{'are' if len(absent) > 1 else 'is'} not on this machine: " + "; ".join(absent)
                       + " (replace the placeholders; a measurement whose binary the nodes lack fails there, "
                       "after its wait in the queue)")
    return out


def limit_minutes(text: str) -> float:
    """Minutes of a Slurm time limit as ``sinfo -o %l`` prints it (``infinite``, ``30:00``,
    ``2:00:00``, ``1-12:00:00``; whole minutes, seconds dropped); ``inf`` without a limit."""
    t = text.strip().lower()
    if t in ("infinite", "unlimited"):
        return math.inf
    m = re.fullmatch(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?", t)
    if not m:
        raise ValueError(f"not a Slurm time limit: {text!r}")
    days, a, b, c = (int(x) if x else 0 for x in m.groups())
    if m.group(1):                      # days-hours[:minutes[:seconds]]
        return days * 1440 + a * 60 + b
    if m.group(4):                      # hours:minutes:seconds
        return a * 60 + b
    return a                            # minutes[:seconds]


def partition_limit(partition: str | None) -> float | None:
    """The time limit (minutes, ``inf`` for none) of ``partition`` (None: the cluster's default one) as
    ``sinfo`` on this machine reports it; None where it cannot tell (no ``sinfo``, no controller, no
    such partition)."""
    if not shutil.which("sinfo"):
        return None
    try:
        out = subprocess.run(["sinfo", "-h", "-o", "%P %l"], capture_output=True, text=True, timeout=10,
                             check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    for line in out.splitlines():
        name, _, limit = line.strip().partition(" ")
        if (name.rstrip("*") == partition) if partition else name.endswith("*"):
            try:
                return limit_minutes(limit)
            except ValueError:
                return None
    return None


def absent_paths(tb: dict) -> list[str]:
    """The absolute paths a Slurm testbed's file names (binaries, their inputs, environment values) that
    this machine lacks, as ``<key> <path>``: a login node that shares the nodes' file systems sees them,
    so each is a placeholder left or a typo; a binary named by a relative path (the clone's, which the
    nodes share) that the clone lacks, but for what the workflow builds into ``.hpcvirt/`` on first use;
    and a binary named alone (found on the nodes' PATH) that this machine's PATH lacks (a hint only: the
    nodes' software may differ from this machine's).
    None for a testbed whose ranks run in an image (its paths are the image's)."""
    from . import paths

    out: list[str] = []
    root = paths.root()

    def walk(value, key: str) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, f"{key}.{k}" if key else str(k))
        elif isinstance(value, list):
            for v in value:
                walk(v, key)
        elif isinstance(value, str) and value.startswith("/") and not Path(value).exists():
            out.append(f"{key} {value}")
        elif (isinstance(value, str) and key.endswith(".binary") and "/" in value and not value.startswith(".hpcvirt/")
              and not (root / value).exists()):
            out.append(f"{key} {value} (relative to the clone)")
        elif isinstance(value, str) and key.endswith(".binary") and "/" not in value and not shutil.which(value):
            out.append(f"{key} {value} (not on this machine's PATH)")

    if tb.get("executor") == "slurm" and tb.get("runtime", {}).get("kind", "none") == "none":
        walk({k: v for k, v in tb.items() if k != "description"}, "")
    return out


def group(tb: dict) -> str:
    """One Slurm group per testbed and node count: ``<testbed>.n<nodes>``.

    Every benchmark shares it, so an allocation that holds all measurements
    of a testbed runs them in the study's interleaved order (inside a group
    job Snakemake follows the job priorities, see
    :func:`hpcvirt.matrix.priorities`); separate groups per benchmark would
    run all ping-pongs first and all raw TCP tests after them.
    """
    return f"{tb['name']}.n{tb['nodes']}"
