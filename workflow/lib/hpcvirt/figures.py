"""The paper's figures, as declarations: each names its notebook and the
benchmarks (and testbed kinds) it needs.  The workflow builds a figure only
when the campaign has a configuration it needs; the paper includes the parts
that show it only then (:func:`hpcvirt.paper.parts_tex`)."""

from __future__ import annotations

import os

from dataclasses import dataclass


@dataclass(frozen=True)
class Figure:
    name: str                    # paper/figures/<name>.pdf, rule figure_<name>, LaTeX label fig:<name>
    notebook: str                # notebooks/<notebook>.ipynb
    benchmark: str               # a configuration of this benchmark is needed ...
    kinds: tuple[str, ...] = ()  # ... on a testbed of one of these kinds (empty: any)
    also: tuple[str, ...] = ()   # and configurations of these benchmarks (anywhere)
    what: str = ""               # what it shows (the HTML report's caption)

    def wanted(self, configurations, testbeds: dict) -> bool:
        have = {c.benchmark for c in configurations}
        return all(b in have for b in self.also) and any(
            c.benchmark == self.benchmark and (not self.kinds or testbeds[c.testbed]["kind"] in self.kinds)
            for c in configurations)


FIGURES = (
    Figure("pingpong", "01-pingpong", "netpipe", ("native",), what=(
        "MPI ping-pong (NetPIPE) and raw TCP (qperf) on the native testbeds: half round-trip latency and bandwidth "
        "over the message size, per MPI library and data path (shared memory, TCP loopback).")),
    Figure("datapaths", "02-datapaths", "netpipe", what=(
        "Every data path side by side: latency at the paper's message size and peak bandwidth, per MPI library and "
        "for raw TCP, natively, across the software bridge and between the QEMU guests.")),
    Figure("placement", "03-placement", "advect", what=(
        "Process placement (Nanos et al.): time per step of the project's advection stencil and its halo-exchange "
        "part against the share of messages that crossed the network, for intra-node, mixed and inter-node "
        "placement on two hosts and two guests.")),
    Figure("npb", "04-npb", "npb", what=(
        "NAS Parallel Benchmarks kernels in the layout of Expósito et al.'s Fig. 6: total Mop/s of verified runs "
        "against the number of processes, per testbed and class.")),
    Figure("npbnorm", "05-npbnorm", "npb", ("netns-bridge", "qemu"), what=(
        "NPB run times relative to the native testbed in the layout of Atif et al.'s Fig. 2: per kernel at the "
        "largest process count, each testbed's time over the native time, paired by round.")),
    Figure("osu", "06-osu", "osu", what=(
        "OSU Micro-Benchmarks in the layout of Atif et al.'s Fig. 1: osu_latency and osu_bw between two processes "
        "per testbed and data path, and osu_allreduce latency.")),
    Figure("agreement", "07-agreement", "imb", (), ("netpipe",), what=(
        "Method check: IMB PingPong and NetPIPE on the same testbed, MPI library and data path, latency at the "
        "paper's message size and peak bandwidth.")),
    Figure("commprof", "08-commprof", "commprof", what=(
        "Communication profiles of NPB kernels after Atif et al.'s Fig. 3 (the project's PMPI profiler, a stand-in "
        "for IPM): bytes sent per rank pair, and the share of run time inside MPI, natively and across the bridge.")),
    Figure("apps", "09-apps", "lammps", what=(
        "The studies' applications over the interconnect classes in the layout of Ramakrishnan et al.'s Fig. 1: "
        "performance relative to the native shared-memory run at the lowest rank count, paired by round, over the "
        "rank count (log-log, with ideal scaling), per interconnect class: shared memory, TCP loopback, the bridge "
        "unlimited and limited to 10 and 1 Gbit/s; below, the guests' small input beside the namespace hosts on "
        "the same input (under TCG the guests measure the emulator).")),
    Figure("speedup", "10-speedup", "lammps", ("native",), ("milc",), what=(
        "Speed-up T(1)/T(n) of LAMMPS (NAMD's stand-in) and MILC (lattice QCD) per transport, in the layout of "
        "Atif et al.'s speed-up panels: shared memory (RDMA's stand-in), TCP loopback and TCP across two hosts.")),
    Figure("streams", "12-streams", "iperf3", what=(
        "Nanos et al.'s network benchmark: the aggregate bandwidth of four concurrent TCP streams (iperf3) from one "
        "host to the other per data path (loopback in one namespace as the baseline, the software bridge, the "
        "direct path that bypasses it, the VXLAN tunnel, and links limited to 10 and 1 Gbit/s), medians with "
        "confidence intervals over rounds, and each stream's median.")),
)

ACCELERATORS = {
    "qemu-tcg": "qemu-tcg (software emulation: the VM numbers measure the emulator, not a hypervisor)",
    "qemu-kvm": "qemu-kvm (hardware-assisted)",
}


def for_campaign(configurations, testbeds: dict) -> list[Figure]:
    return [f for f in FIGURES if f.wanted(configurations, testbeds)]


def by_name(name: str) -> Figure:
    return next(f for f in FIGURES if f.name == name)


def report_labels(name: str, tables) -> dict[str, str]:
    """The HTML report's labels of a figure, from the campaign's tables (read
    when the report is made): its campaign, the testbeds its data come from
    with their virtualization, and the accelerator of the VM testbeds."""
    import pandas as pd

    fig = by_name(name)
    benchmarks = (fig.benchmark, *fig.also)
    cols = {"campaign", "run_id", "testbed", "virtualization", "benchmark"}
    df = pd.concat([pd.read_csv(t, usecols=lambda c: c in cols) for t in tables])
    if "campaign" not in df:
        df["campaign"] = df["run_id"].str.split("/").str[0]
    df = df[df["benchmark"].map(lambda b: any(b == x or b.startswith((f"{x}-", f"{x}_")) for x in benchmarks))]
    pairs = sorted(set(zip(df["testbed"], df["virtualization"])))
    accels = sorted({ACCELERATORS.get(v.split("+")[0], "") for _, v in pairs} - {""})
    return {
        "figure": name,
        "campaign": ", ".join(sorted(set(df["campaign"]))),
        "testbeds (virtualization)": ", ".join(f"{t} ({v})" for t, v in pairs),
        "VM accelerator": "; ".join(accels) or "no VM in this figure",
    }


def use_jupyter_settings(folder: str) -> None:
    """Put ``folder`` first on ``JUPYTER_CONFIG_PATH`` for the notebook jobs this process starts
    (workflow/jupyter/: how long nbconvert waits for a kernel to exit)."""
    rest = [p for p in os.environ.get("JUPYTER_CONFIG_PATH", "").split(os.pathsep) if p and p != folder]
    os.environ["JUPYTER_CONFIG_PATH"] = os.pathsep.join([folder, *rest])
