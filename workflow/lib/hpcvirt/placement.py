"""Process placement over hosts (or guests), in the style of Nanos et al.

Three placements of ``ranks`` MPI processes over ``hosts`` machines:

``intra``
    every rank on the first host: all messages stay inside one
    (virtual) machine (shared memory or loopback).
``inter``
    round-robin, rank ``i`` on host ``i % len(hosts)``: with 2 ranks on
    2 hosts this is "one rank per host", every ping-pong crosses the network.
``mixed``
    block distribution, ``ceil(ranks / len(hosts))`` consecutive ranks per
    host: neighbours inside a block talk locally, block boundaries cross the
    network (a ring over 4 ranks on 2 hosts sends half its messages across).
    Needs more ranks than hosts (otherwise it is ``inter``).

Communication patterns for :func:`crossing_fraction`:

``pingpong``
    disjoint pairs ``(0,1), (2,3), ...`` (an odd last rank is idle);
``ring``
    rank ``i`` sends to ``(i + 1) % ranks`` (every rank sends one message);
``alltoall``
    every ordered pair ``(i, j)``, ``i != j``.

Everything here is pure; the launchers in :mod:`hpcvirt.netns` and
:mod:`hpcvirt.qemu` turn the per-rank host list into ``--host``/``-hosts``.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

PLACEMENTS = ("intra", "inter", "mixed")
PATTERNS = ("pingpong", "ring", "alltoall")


def placement_hosts(placement: str, hosts: Sequence[str], ranks: int) -> list[str]:
    """Host of every rank (index = rank) for ``placement``."""
    hosts = list(hosts)
    if placement not in PLACEMENTS:
        raise ValueError(f"unknown placement {placement!r}; expected one of {PLACEMENTS}")
    if not hosts:
        raise ValueError("need at least one host")
    if len(set(hosts)) != len(hosts):
        raise ValueError(f"duplicate host names in {hosts}")
    if not isinstance(ranks, int) or ranks < 1:
        raise ValueError(f"ranks must be a positive integer, got {ranks!r}")
    if placement == "intra":
        return [hosts[0]] * ranks
    if len(hosts) < 2:
        raise ValueError(f"placement {placement!r} needs at least 2 hosts, got {hosts}")
    if placement == "inter":
        return [hosts[i % len(hosts)] for i in range(ranks)]
    # mixed: blocks of consecutive ranks
    if ranks <= len(hosts):
        raise ValueError(
            f"placement 'mixed' needs more ranks than hosts ({ranks} ranks, "
            f"{len(hosts)} hosts); use 'inter'")
    per_host = -(-ranks // len(hosts))
    return [hosts[i // per_host] for i in range(ranks)]


def message_pairs(pattern: str, ranks: int) -> list[tuple[int, int]]:
    """(sender, receiver) rank pairs exchanged once per step of ``pattern``."""
    if pattern not in PATTERNS:
        raise ValueError(f"unknown pattern {pattern!r}; expected one of {PATTERNS}")
    if ranks < 2:
        raise ValueError(f"pattern {pattern!r} needs at least 2 ranks, got {ranks}")
    if pattern == "pingpong":
        pairs = []
        for a in range(0, ranks - 1, 2):
            pairs += [(a, a + 1), (a + 1, a)]
        return pairs
    if pattern == "ring":
        return [(i, (i + 1) % ranks) for i in range(ranks)]
    return [(i, j) for i in range(ranks) for j in range(ranks) if i != j]


def crossing_fraction(rank_hosts: Sequence[str], pattern: str) -> Fraction:
    """Fraction of the messages of ``pattern`` whose two ranks sit on
    different hosts, for a per-rank host list from :func:`placement_hosts`."""
    pairs = message_pairs(pattern, len(rank_hosts))
    crossing = sum(1 for s, r in pairs if rank_hosts[s] != rank_hosts[r])
    return Fraction(crossing, len(pairs))


def run_length(rank_hosts: Sequence[str]) -> list[tuple[str, int]]:
    """Compress a per-rank host list to ``[(host, count), ...]`` keeping order
    (``a,a,b,a`` -> ``[(a,2),(b,1),(a,1)]``); MPICH hydra's ``-hosts h:n,...``
    assigns ranks in exactly this order."""
    out: list[tuple[str, int]] = []
    for h in rank_hosts:
        if out and out[-1][0] == h:
            out[-1] = (h, out[-1][1] + 1)
        else:
            out.append((h, 1))
    return out


def mpi_host_args(mpi: str, rank_hosts: Sequence[str]) -> list[str]:
    """Launcher arguments that put rank ``i`` on ``rank_hosts[i]``.

    Open MPI 4: the sequential mapper (``--mca rmaps seq``) with the per-rank
    list as ``--host``; MPICH hydra: ``-hosts h:n,...`` in run-length order.
    Both were checked with 4 ranks placed ``h0,h1,h1,h0``.
    """
    n = len(rank_hosts)
    if n < 1:
        raise ValueError("empty rank placement")
    if mpi == "openmpi":
        return ["-np", str(n), "--host", ",".join(rank_hosts), "--mca", "rmaps", "seq"]
    if mpi == "mpich":
        hosts = ",".join(f"{h}:{c}" for h, c in run_length(rank_hosts))
        return ["-hosts", hosts, "-n", str(n)]
    raise ValueError(f"unknown MPI {mpi!r}; expected 'openmpi' or 'mpich'")
