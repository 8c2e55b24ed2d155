"""Process placement over hosts (or guests), in the style of Nanos et al.

Ranks are placed like Slurm's *plane* distribution: blocks of ``block``
consecutive ranks, block ``b`` on host ``b % len(hosts)``.  One knob spans
the three placements of the experiment:

``intra-node`` (``block >= ranks``)
    every rank on the first host or guest: no message crosses the network;
``inter-node`` (``block == 1``)
    round-robin: every chain neighbour sits on another host, so every message
    crosses the network;
``mixed`` (anything between)
    neighbours inside a block talk locally, block boundaries cross.

The benchmark (``workflow/src/advect.c``) is a chain of ranks (a 1-D domain
decomposition) where each rank exchanges one halo with each neighbour per
step.  The share of its messages that cross the network is the share of
chain links whose two ranks sit on different hosts: with 16 ranks on two
hosts, blocks of 8, 2 and 1 give 1/15 (6.7 %), 7/15 (46.7 %) and 100 % --
the 6 %, 46 % and 100 % of Nanos et al.

Everything here is pure; :mod:`hpcvirt.testbeds` hands the per-rank host
list to the testbed's launcher as ``{rank_hosts}`` (Open MPI's sequential
mapper: ``--host h0,h0,h1 --mca rmaps seq``) or ``{host_counts}`` (MPICH
hydra: ``-hosts h0:2,h1:1``, see :func:`run_length`).
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction


def plane_hosts(hosts: Sequence[str], ranks: int, block: int) -> list[str]:
    """Host of every rank (index = rank): blocks of ``block`` consecutive
    ranks, block b on ``hosts[b % len(hosts)]``."""
    hosts = list(hosts)
    if not hosts:
        raise ValueError("need at least one host")
    if len(set(hosts)) != len(hosts):
        raise ValueError(f"duplicate host names in {hosts}")
    for name, v in (("ranks", ranks), ("block", block)):
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v!r}")
    return [hosts[(i // block) % len(hosts)] for i in range(ranks)]


def placement_label(ranks: int, block: int) -> str:
    """intra-node, inter-node or mixed (see the module docstring)."""
    if block >= ranks:
        return "intra-node"
    return "inter-node" if block == 1 else "mixed"


def hosts_used(rank_hosts: Sequence[str]) -> int:
    return len(set(rank_hosts))


def misplaced(rank_hosts: str | None, nodes: int) -> str:
    """A note when the hosts the ranks recorded (``a,b,...``, :func:`hpcvirt.rawfiles.read_rank_hosts`) are
    not as many as the launch meant: e.g. both ranks of a path between nodes on one node, which measures
    shared memory under the label of the network.  '' when they are, or when not every rank recorded."""
    hosts = (rank_hosts or "").split(",")
    if not rank_hosts or "?" in hosts or len(set(hosts)) == nodes:
        return ""
    return (f"its {len(hosts)} ranks ran on {len(set(hosts))} host(s) ({rank_hosts}), where the launch meant "
            f"{nodes}: it did not measure the path it is labelled with")


def chain_crossing(rank_hosts: Sequence[str]) -> Fraction:
    """Share of the chain's messages (halo exchanges between ranks i and
    i+1, one each way per step) whose two ranks sit on different hosts."""
    links = len(rank_hosts) - 1
    if links < 1:
        return Fraction(0)
    crossing = sum(1 for a, b in zip(rank_hosts, rank_hosts[1:]) if a != b)
    return Fraction(crossing, links)


def chain_messages(rank_hosts: Sequence[str], steps: int) -> tuple[int, int]:
    """(messages sent, messages sent to another host) by the whole chain in
    ``steps`` timed steps: every link carries one message each way per step."""
    links = len(rank_hosts) - 1
    crossing = sum(1 for a, b in zip(rank_hosts, rank_hosts[1:]) if a != b)
    return 2 * links * steps, 2 * crossing * steps


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
