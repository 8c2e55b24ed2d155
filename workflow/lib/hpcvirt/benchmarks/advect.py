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

import re

from ..placement import chain_crossing, chain_messages, placement_label, plane_hosts
from ..tidy import Measurement, ParseError
from .base import Benchmark, Job
from .common import check_no_mpi_error, read_text
from .parts import Bool, Compiled, Counterpart, Group, Int, Ints, Mpis, View

#: Nanos et al.'s placements as the method section gives them: their 16 ranks on two hosts in blocks of
#: 8, 2 and 1 ranks; the shares of the messages that cross the network are computed (hpcvirt.placement).
STUDY_RANKS, STUDY_BLOCKS = 16, (8, 2, 1)

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
        elif w[0] in fields:
            raise ParseError(path, f"a second {w[0]!r} line: two runs' outputs in one")
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


#: The benchmark's name: its tidy rows' benchmark column.
NAME = "advect"


# ------------------------------------------------------------------- views
PLACEMENT_ORDER = {"intra-node": 0, "mixed": 1, "inter-node": 2}
PLACEMENT_METRICS = ("time_per_step", "compute_per_step", "comm_per_step", "network_share")


def placement_summary(summary: pd.DataFrame) -> pd.DataFrame:
    """One row per testbed, MPI and placement of the placement experiment:
    median [CI] per step of run, compute and communication time (us) and the
    measured share of messages that crossed the network."""
    import pandas as pd

    d = summary[(summary["benchmark"] == NAME) & summary["metric"].isin(PLACEMENT_METRICS)]
    if d.empty:
        return pd.DataFrame()
    keys = ["testbed", "virtualization", "mpi", "ranks", "placement", "variant"]
    rows = []
    for key, grp in d.groupby(keys, sort=False):
        rec = dict(zip(keys, key))
        for _, r in grp.iterrows():
            m = r["metric"]
            rec.update({m: r["median"], f"{m}_lo": r["ci_low"], f"{m}_hi": r["ci_high"], "n": int(r["n"]),
                        "ci_level": r["ci_level"]})
        rows.append(rec)
    out = pd.DataFrame(rows)
    out["block"] = out["variant"].str.extract(r"^(\d+)", expand=False).astype(int)
    out["order"] = out["placement"].map(PLACEMENT_ORDER)
    return out.sort_values(["testbed", "mpi", "order", "block"], ascending=[True, True, True, False]).reset_index(
        drop=True)


def placement_pairs(tidy: pd.DataFrame) -> list[dict]:
    """Every qemu testbed against the non-qemu testbeds (netns-bridge or a
    native cluster) for the same MPI, ranks and placement: the ratio of the
    time per step, paired by interleaved round (median [CI] over rounds)."""
    from .. import stats
    from ..kinds import Qemu

    d = tidy[(tidy["benchmark"] == NAME) & (tidy["metric"] == "time_per_step")]
    if d.empty:
        return []
    d = d.assign(variant=d["variant"].fillna(""))
    per = d.groupby(["testbed", "kind", "virtualization", "mpi", "ranks", "placement", "variant", "rep"])[
        "value"].median()
    per = per.reset_index()
    vms = per[per["kind"] == Qemu.name]
    refs = per[per["kind"] != Qemu.name]
    out = []
    for key, s in vms.groupby(["testbed", "virtualization", "mpi", "ranks", "placement", "variant"], sort=False):
        tb, virt, mpi, ranks, placement, variant = key
        ref_all = refs[(refs["mpi"] == mpi) & (refs["ranks"] == ranks) & (refs["variant"] == variant)]
        for (rtb, rvirt), r in ref_all.groupby(["testbed", "virtualization"], sort=True):
            a, b = s.set_index("rep")["value"], r.set_index("rep")["value"]
            both = a.index.intersection(b.index)
            if len(both):
                out.append(dict(subject=tb, subject_virtualization=virt, reference=rtb,
                                reference_virtualization=rvirt, mpi=mpi, ranks=int(ranks), placement=placement,
                                variant=variant, ratio=stats.median_ci((a[both] / b[both]).to_numpy())))
    return out


def placement_ratios(tidy: pd.DataFrame) -> pd.DataFrame:
    """:func:`placement_pairs` as a table: one row per guest testbed, MPI, placement and block, its time per
    step over the reference testbed's, paired by round (median, CI, rounds, coverage)."""
    import pandas as pd

    cols = ["subject", "subject_virtualization", "reference", "reference_virtualization", "mpi", "ranks", "placement",
            "variant", "ratio", "ratio_lo", "ratio_hi", "n", "ci_level"]
    return pd.DataFrame([{**{k: o[k] for k in cols[:8]}, "ratio": o["ratio"]["median"],
                          "ratio_lo": o["ratio"]["ci_low"], "ratio_hi": o["ratio"]["ci_high"], "n": o["ratio"]["n"],
                          "ci_level": o["ratio"]["ci_level"]} for o in placement_pairs(tidy)], columns=cols)


# ------------------------------------------------------------- declaration
class Advect(Benchmark):
    name = NAME
    experiment = "placement"
    title = ("Process placement (Nanos et al.): the project's 3-D advection-diffusion stencil "
             "(workflow/src/advect.c) on a chain of ranks, placed in blocks per host or guest")
    params = {
        "mpis": Mpis(default=["openmpi"]),
        "ranks": Int("Ranks of the chain (1-D decomposition along z).", 4, minimum=2, maximum=4096),
        "ranks_per_block": Ints(
            "One configuration each: blocks of this many consecutive ranks per host, round-robin over the hosts "
            "(Slurm's plane distribution). >= `ranks` = intra-node (no message crosses the network), 1 = "
            "inter-node (every message crosses), between = mixed. With 16 ranks on 2 hosts, `[8, 2, 1]` sends "
            "6.7 %, 46.7 % and 100 % of the messages across, the placements of Nanos et al.",
            [4, 2, 1], minimum=1, maximum=4096, sweep="block"),
        "grid": Group({
            "x": Int("Points of the halo plane along x (message size = x*y*8 bytes).", 32, minimum=1, maximum=4096),
            "y": Int("Points of the halo plane along y.", 32, minimum=1, maximum=4096),
            "z_per_rank": Int("Planes owned by each rank (compute per step).", 16, minimum=1, maximum=4096),
        }, "Points per rank: x and y span the halo plane, z_per_rank planes are owned by each rank."),
        "steps": Int("Timed steps (one halo exchange with each neighbour and one stencil update each).", 1000,
                     minimum=1, maximum=10_000_000),
        "warmup": Int("Untimed steps before them.", 20, minimum=0, maximum=1_000_000),
        "verify": Bool("After the timed steps rank 0 recomputes the domain serially; a different checksum "
                       "rejects the run.", True),
    }
    build = Compiled("workflow/src/advect.c", "workflow/scripts/build-advect.sh",
                     host_binary=r"^\.hpcvirt/bin/advect-(openmpi|mpich)$", packages=("gcc",))
    min_hosts = 2
    unoffered_hint = ("the placement experiment needs a testbed with two or more hosts or guests (nodes >= 2) and "
                      "mpi.<mpi>.advect; on one-host testbeds set experiments.placement.enabled: false")
    metrics = {"time_per_step": "us", "compute_per_step": "us", "comm_per_step": "us", "messages": "count",
               "messages_network": "count", "network_share": "fraction"}
    counterparts = (Counterpart("Stencil per placement", r"\citet{nanos2010}, advection code",
                                r"own stencil; \hvPlaceRanks{} ranks"),)
    success = ("an `end` line, verification SUCCESSFUL (or SKIPPED when verify is off), and rank, step and "
               "message counts equal to those the requested placement implies")
    views = (View("placement", "summary", placement_summary, "Per testbed, MPI and placement of the stencil: time, "
                  "computation and communication per step and the share of messages across the network."),
             View("placement_ratios", "tidy", placement_ratios, "Per guest testbed, MPI and placement: the time per "
                  "step over the non-guest testbed's, paired by round."))

    def check_testbed(self, tb: dict, entry: dict) -> str | None:
        from ..kinds import KINDS

        # a kind that names no host of a rank ({rank_hosts}: the project's own hosts and guests) places the
        # ranks through its launcher's arguments: a bare-metal cluster's and a VM cluster's srun
        by_launcher = "rank_hosts" not in KINDS[tb["kind"]].placeholders
        if by_launcher and tb["nodes"] > 1 and not any("{block}" in w for w in entry.get("args", [])):
            return (f"a {tb['kind']} testbed with several nodes places ranks through launcher arguments and needs "
                    "one with '{block}' (e.g. --distribution=plane={block}); without it every placement would "
                    "run the same command")
        return None

    def normalize(self, s: dict) -> dict:
        return {"mpi": s["mpi"], "ranks": s["ranks"], "block": min(s["block"], s["ranks"]),
                "grid": dict(s["grid"]), "steps": s["steps"], "warmup": s["warmup"], "verify": s["verify"]}

    def raw_params(self, s: dict) -> str:
        g = s["grid"]
        return (f"{s['mpi']}-n{s['ranks']}-b{s['block']}_{g['x']}x{g['y']}x{g['z_per_rank']}"
                f"_s{s['steps']}w{s['warmup']}" + ("" if s["verify"] else "-nv"))

    def job(self, s: dict, entry: dict) -> Job:
        g = s["grid"]
        argv = [entry["binary"], "-x", str(g["x"]), "-y", str(g["y"]), "-z", str(g["z_per_rank"]),
                "-s", str(s["steps"]), "-w", str(s["warmup"])] + ([] if s["verify"] else ["-n"])
        return Job(argv, mpi=s["mpi"], ranks=s["ranks"], block=s["block"])

    def expected(self, s: dict, rank_hosts: list[str]) -> dict:
        messages, network = chain_messages(rank_hosts, s["steps"])
        return {"ranks": s["ranks"], "steps": s["steps"], "messages": messages, "messages_network": network,
                "placement": placement_label(s["ranks"], s["block"]), "block": s["block"],
                "variant": f"{s['block']} per block", "warmup": f"{s['warmup']} untimed steps"}

    def numbers(self, rows) -> dict[str, str]:
        """The run's facts the placement section cites: time steps, halo size and the grid each rank owns
        (of the first run; the grid from its raw-output path, :meth:`raw_params`); and the
        study's placements (``STUDY_RANKS`` in blocks of ``STUDY_BLOCKS`` on two hosts) with the share of
        their messages that crosses the network, as the benchmark's check computes it."""
        from ..labels import and_list, fmt_bytes

        shares = (100 * float(chain_crossing(plane_hosts(("h0", "h1"), STUDY_RANKS, b))) for b in STUDY_BLOCKS)
        grid = re.search(r"_(\d+)x(\d+)x(\d+)_s", str(rows["run_id"].iloc[0])).groups()
        return {"hvPlaceSteps": str(int(rows["iteration_count"].iloc[0])),
                "hvPlaceGrid": "$" + "\\times".join(grid) + "$",
                "hvPlaceHalo": fmt_bytes(int(rows["msg_bytes"].iloc[0])),
                "hvPlaceStudyRanks": str(STUDY_RANKS), "hvPlaceStudyBlocks": and_list(map(str, STUDY_BLOCKS)),
                "hvPlaceStudyShares": and_list(f"{s:.1f}".removesuffix(".0") + "\\,\\%" for s in shares)}

    def parse(self, raw, expected: dict) -> list[Measurement]:
        return parse(raw, expected=expected)


BENCHMARK = Advect()
