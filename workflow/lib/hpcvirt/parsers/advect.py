"""Parser for the placement benchmark ``hpcvirt-advect`` (workflow/src/advect.c).

The output is one ``key value...`` per line (rank 0 only)::

    hpcvirt-advect 1
    ranks 4
    grid 32 32 64
    steps 1000
    warmup 20
    halo_bytes 8192
    node 0 h0/net:[4026532301]
    ...
    messages 6000
    messages_network 2000
    time_total_s 0.30823           (max over ranks)
    time_compute_s 0.1266 0.1212   (max, mean over ranks)
    time_comm_s 0.1890 0.1867      (max, mean over ranks)
    checksum 0a65789e51d81d28
    reference 0a65789e51d81d28
    verification SUCCESSFUL
    end

Emitted metrics (``msg_bytes`` = the halo message size):

``time_per_step`` (us)        slowest rank's timed steps / steps
``compute_per_step`` (us)     slowest rank's stencil updates / steps
``comm_per_step`` (us)        slowest rank's halo exchanges / steps
``messages`` (count)          halo messages sent in the timed steps
``messages_network`` (count)  those sent to a rank on another node
``network_share`` (fraction)  messages_network / messages

ParseError for: launcher/MPI errors, a missing ``end`` (truncated), a failed
verification, and -- with ``expected`` from the launch -- a different rank
or step count or message counts that differ from the requested placement
(the ranks did not land where they were meant to).
"""

from __future__ import annotations

from ..tidy import Measurement, ParseError
from .common import check_no_mpi_error, read_text

SINGLE = ("ranks", "steps", "warmup", "halo_bytes", "messages", "messages_network", "time_total_s")


def parse(path, expected: dict | None = None) -> list[Measurement]:
    text = read_text(path)
    check_no_mpi_error(path, text)
    lines = [ln.split() for ln in text.splitlines() if ln.strip()]
    start = next((i for i, w in enumerate(lines) if w[0] == "hpcvirt-advect"), None)
    if start is None:
        raise ParseError(path, "no 'hpcvirt-advect' header: not an output of the placement benchmark")
    if lines[start][1:] != ["1"]:
        raise ParseError(path, f"unknown output format {' '.join(lines[start][1:])!r} (expected 1)")
    fields: dict[str, list[str]] = {}
    nodes: dict[int, str] = {}
    for w in lines[start + 1:]:
        if w[0] == "node" and len(w) == 3:
            nodes[int(w[1])] = w[2]
        else:
            fields[w[0]] = w[1:]
    if "end" not in fields:
        raise ParseError(path, "no 'end' line: the output was cut (the run did not complete)")
    missing = [k for k in (*SINGLE, "time_compute_s", "time_comm_s", "verification", "checksum") if k not in fields]
    if missing:
        raise ParseError(path, f"missing fields {missing}: the output is incomplete")
    verification = fields["verification"][0]
    if verification == "FAILED":
        ref = " ".join(fields.get("reference", ["?"]))
        raise ParseError(path, f"verification FAILED: checksum {fields['checksum'][0]} != serial reference {ref}")
    if verification not in ("SUCCESSFUL", "SKIPPED"):
        raise ParseError(path, f"unknown verification result {verification!r}")
    try:
        v = {k: float(fields[k][0]) for k in SINGLE}
        compute, comm = float(fields["time_compute_s"][0]), float(fields["time_comm_s"][0])
    except (ValueError, IndexError) as exc:
        raise ParseError(path, f"a field is not a number: {exc}") from None
    ranks, steps = int(v["ranks"]), int(v["steps"])
    if len(nodes) != ranks:
        raise ParseError(path, f"{len(nodes)} node lines for {ranks} ranks: the output is incomplete")
    if expected:
        for key, got in (("ranks", ranks), ("steps", steps), ("messages", int(v["messages"])),
                         ("messages_network", int(v["messages_network"]))):
            if key in expected and int(expected[key]) != got:
                raise ParseError(
                    path,
                    f"{key} = {got}, but the requested placement ({expected.get('placement', '?')}, "
                    f"{expected.get('block', '?')} ranks per block) means {expected[key]}: the ranks did not "
                    f"run where they were placed (nodes: {sorted(set(nodes.values()))})",
                )
    if v["messages"] <= 0 and ranks > 1:
        raise ParseError(path, "no halo messages were sent")
    verified = True if verification == "SUCCESSFUL" else None
    common = dict(msg_bytes=int(v["halo_bytes"]), iteration_count=steps, ranks=ranks, verified=verified)
    share = v["messages_network"] / v["messages"] if v["messages"] else 0.0
    if steps < 1:
        raise ParseError(path, f"steps = {steps}: nothing was timed")
    us = 1e6 / steps
    return [
        Measurement("advect", "time_per_step", "us", v["time_total_s"] * us, **common),
        Measurement("advect", "compute_per_step", "us", compute * us, **common),
        Measurement("advect", "comm_per_step", "us", comm * us, **common),
        Measurement("advect", "messages", "count", v["messages"], **common),
        Measurement("advect", "messages_network", "count", v["messages_network"], **common),
        Measurement("advect", "network_share", "fraction", share, **common),
    ]
