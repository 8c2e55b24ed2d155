"""Container runtimes as a wrapper around the ranks (hybrid MPI model).

In the hybrid model the launcher stays on the host (``srun --mpi=pmix`` or the
host's ``mpirun``) and every rank is started *through* a container runtime, so
the application links the MPI library inside the image while the host's
process manager provides PMIx.  :mod:`hpcvirt.preflight` checks that host and
image agree before a benchmark runs; :mod:`hpcvirt.stack` identifies them.

Testbed runtime settings (``runtime`` dicts) look like::

    {"kind": "none"}
    {"kind": "charliecloud", "image": "/path/img.sqfs",
     "join": True, "join_ct": None, "bind": ["/scratch"], "env": {"K": "V"}}
    {"kind": "apptainer", "image": "/path/img.sif", "bind": ["/scratch:/scratch"],
     "env": {"K": "V"}, "flags": ["--nv"], "userns": "auto"}

A site's SingularityCE is ``kind: apptainer`` with ``exe: singularity`` (the
same command line).
"""

from __future__ import annotations

import getpass
import os
from typing import Any, Mapping

NATIVE_KINDS = {"none"}
APPTAINER_KINDS = {"apptainer"}


def _image(runtime: Mapping[str, Any]) -> str:
    image = runtime.get("image")
    if not image:
        raise ValueError(f"container runtime {runtime.get('kind')!r} needs an 'image'")
    return os.fspath(image)


def apptainer_exe() -> str:
    """The Apptainer a testbed without ``runtime.exe`` uses: the site's on PATH, else the one the
    installer built (:func:`hpcvirt.apptainer.find`)."""
    from .apptainer import ApptainerError, find
    try:
        return find()["exe"]
    except ApptainerError as exc:
        raise ValueError(f"runtime.kind apptainer: {exc}") from None


def container_prefix(runtime: Mapping[str, Any] | None, *, single: bool = False,
                     binds: list[str] | None = None, ranks_per_node: int | None = None) -> list[str]:
    """Argv that wraps ONE rank's command for the given testbed runtime.

    The result goes between the launcher and the program:
    ``[*launcher, *container_prefix(rt), prog, *args]``.  Never put an
    ``mpirun`` inside the container: the launcher is the host's.

    ``binds`` adds bind mounts (``host:image``) for this run only.
    ``single=True`` builds the prefix for a lone process (the preflight
    probes): Charliecloud's ``--join`` is left out because it needs a peer
    group that only exists under a launcher.

    Charliecloud (``ch-run`` 0.31, Debian ``charliecloud-runtime``):
      * ``--join`` makes all ranks of a node share one container (one mount
        and user namespace), which Open MPI needs for its shared-memory/CMA
        path; without it Open MPI cannot use CMA between ranks.
      * ``--join`` reads the peer-group size from the launcher
        (``OMPI_COMM_WORLD_LOCAL_SIZE`` under Open MPI, ``SLURM_*`` under
        srun).  MPICH's hydra does not export one it understands, so set
        ``join_ct`` there: ``auto`` yields ``--join-ct=N`` with N the run's
        ranks on one node (``ranks_per_node``, given by the caller), or a
        number, a fixed N.  A fixed N that differs from the ranks that start makes
        ch-run fail ("expected 0 peers left but found -1").
      * the image may be a SquashFS file (mounted by ch-run's built-in
        squashfuse; needs a usable /dev/fuse, so on hosts where it is mode
        0600 only root can use it) or an unpacked directory (``unsquashfs
        -d DIR IMG``), which works for root and unprivileged users.
      * ch-run refuses to start without ``$USER``: see :func:`launch_env`.

    Apptainer/Singularity: ``exec`` with ``--bind`` for each entry.  No
    ``--cleanenv``: the ranks need the launcher's ``PMIX_*``/``OMPI_*``/
    ``SLURM_*`` variables.  ``--userns`` is added when ``runtime.userns`` is
    true, or, with the default ``auto``, when a probe found that ``exec``
    fails without it for this user here (:func:`hpcvirt.apptainer.userns_probe`,
    cached with its reason).  Without ``runtime.exe`` the executable is the
    site's ``apptainer`` on PATH, else the one the installer built.  Apptainer
    binds the working directory itself (the run directory).
      * ``--sharens`` (``runtime.sharens``, default true for apptainer; left out with
        ``single=True``) makes the ranks started by one launcher process share
        one container and namespace, like ch-run's ``--join``.  Measured
        here with ``--userns``: without it every rank has its own user
        namespace, Open MPI warns ``cma-different-user-namespace`` and a
        NetPIPE sweep over shared memory stalled at 3 MiB (killed after 60 s);
        with it 4 MiB took 357 us (host 365 us).
    """
    rt = dict(runtime or {})
    kind = rt.get("kind", "none")
    if kind in NATIVE_KINDS:
        return []
    # the testbed's binds, then those of the run
    rt["bind"] = [*(rt.get("bind") or []), *(b for b in binds or [] if b not in (rt.get("bind") or []))]

    if kind == "charliecloud":
        argv = [str(rt.get("exe", "ch-run"))]
        if not single:
            join_ct = rt.get("join_ct")
            if join_ct == "auto":
                if not ranks_per_node:
                    raise ValueError("runtime.join_ct auto needs the same number of ranks on every node; "
                                     "this run places them unevenly (set a fixed join_ct, or join: true "
                                     "under a launcher that exports its local size)")
                join_ct = ranks_per_node
            if join_ct:
                argv.append(f"--join-ct={int(join_ct)}")
            elif rt.get("join", True):
                argv.append("--join")
            if rt.get("join_tag"):
                argv.append(f"--join-tag={rt['join_tag']}")
        for b in rt.get("bind", []) or []:
            argv.append(f"--bind={b}")
        for k, v in sorted((rt.get("env") or {}).items()):
            argv.append(f"--set-env={k}={v}")
        if rt.get("private_tmp"):
            argv.append("--private-tmp")
        argv.extend(str(f) for f in rt.get("flags", []) or [])
        argv += [_image(rt), "--"]
        return argv

    if kind in APPTAINER_KINDS:
        image = _image(rt)
        exe = str(rt.get("exe") or apptainer_exe())
        # --quiet: no INFO lines (e.g. "gocryptfs not found") in the benchmark's own output, which a
        # client/server benchmark prints unwrapped and its parser rightly rejects; warnings still show
        argv = [exe, "--quiet", "exec"]
        userns = rt.get("userns", "auto")
        if userns == "auto":
            from .apptainer import userns_probe
            from .paths import resolve
            userns = userns_probe(exe, resolve(image))["userns"]
        if userns:
            argv.append("--userns")
        # --sharens is Apptainer's (1.1 on): off by default for a SingularityCE (exe singularity)
        if not single and rt.get("sharens", os.path.basename(exe) != "singularity"):
            argv.append("--sharens")
        binds = [str(b) for b in rt.get("bind", []) or []]
        if binds:
            argv += ["--bind", ",".join(binds)]
        for k, v in sorted((rt.get("env") or {}).items()):
            argv += ["--env", f"{k}={v}"]
        argv.extend(str(f) for f in rt.get("flags", []) or [])
        argv.append(image)
        return argv

    raise ValueError(f"unknown container runtime kind {kind!r}")


#: What :func:`launch_env` takes from the process: never recorded in provenance.
PROCESS_ENV = ("USER",)


def launch_env(runtime: Mapping[str, Any] | None, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment variables to ADD to the launcher's environment.

    ``ch-run`` exits with ``$USER not set`` when USER is missing (as in some
    batch and CI environments); this returns ``{"USER": <name>}`` then.
    (What the MPI needs, e.g. Open MPI's ``OMPI_ALLOW_RUN_AS_ROOT*`` for
    ``mpirun`` as root, is the testbed file's ``mpi.<mpi>.env``.)
    """
    env = os.environ if environ is None else environ
    add: dict[str, str] = {}
    kind = (runtime or {}).get("kind", "none")
    if kind == "charliecloud" and not env.get("USER"):
        try:
            add["USER"] = getpass.getuser()
        except Exception:  # no passwd entry
            add["USER"] = str(os.getuid())
    return add
