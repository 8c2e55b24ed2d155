"""The placement experiment without running it: configurations, the exact
launch on every testbed kind, the paired analysis and the paper's macros."""

from __future__ import annotations

import copy
from pathlib import Path

import pandas as pd
import pytest
import yaml

from hpcvirt import matrix, numbers
from hpcvirt.testbeds import launch
from hpcvirt.analysis import summarize_tidy
from hpcvirt.benchmarks import REGISTRY
from hpcvirt.benchmarks.advect import placement_pairs, placement_summary
from hpcvirt.config import load_study
from hpcvirt.netns import Testbed
from hpcvirt.tables import placement_tex
from hpcvirt.qemu import Cluster

ROOT = Path(__file__).resolve().parents[1]
STUDY_FILE = yaml.safe_load((ROOT / "config/config.yaml").read_text())


def _study(**placement):
    cfg = copy.deepcopy(STUDY_FILE)
    cfg["experiments"]["placement"].update(placement)
    return load_study(cfg, config_path="config/config.yaml", testbed_dir=ROOT / "config/testbeds")


def _advect(study, testbed):
    return [c for c in matrix.configurations(study) if c.benchmark == "advect" and c.testbed == testbed]


def test_configurations_only_on_testbeds_with_two_hosts():
    study, _ = _study()
    assert {c.testbed for c in matrix.configurations(study) if c.benchmark == "advect"} == {"bridge", "vm"}
    blocks = [c.settings["block"] for c in _advect(study, "bridge")]
    assert blocks == study["experiments"]["placement"]["ranks_per_block"]
    # one raw path per placement, so a changed parameter never reuses an old output
    assert len({c.params for c in _advect(study, "bridge")}) == len(blocks)


def test_blocks_at_least_ranks_are_one_configuration():
    study, _ = _study(ranks=4, ranks_per_block=[8, 4, 2])
    assert [c.settings["block"] for c in _advect(study, "bridge")] == [4, 2]


def test_bridge_launch_places_ranks_and_expects_their_messages():
    study, tbs = _study()
    bed = Testbed(kind="netns-bridge", tag="t", hosts=["hv-t-h0", "hv-t-h1"], addresses=["198.18.0.1", "198.18.0.2"],
                  subnet="198.18.0.0/24", mtu=1500)
    by_block = {c.settings["block"]: c for c in _advect(study, "bridge")}
    mixed = launch(by_block[2], tbs["bridge"], bed)
    argv = mixed.argv
    # rank i on the host of its block: Open MPI's sequential mapper with one host per rank
    assert argv[argv.index("--host") + 1] == "hv-t-h0,hv-t-h0,hv-t-h1,hv-t-h1"
    assert "seq" in argv and argv[argv.index("mpi_yield_when_idle") + 1] == "1"
    assert "btl" not in argv  # the MPI picks shared memory inside a host, TCP across
    assert argv[-2:] == ["-w", "10"] and ".hpcvirt/bin/advect-openmpi" in argv
    steps = study["experiments"]["placement"]["steps"]
    assert mixed.expected["messages"] == 2 * 3 * steps and mixed.expected["messages_network"] == 2 * steps
    assert (mixed.nodes, mixed.ranks_per_node, mixed.interconnect) == (2, 2, "shm+tcp")
    intra = launch(by_block[4], tbs["bridge"], bed)
    assert intra.argv[intra.argv.index("--host") + 1] == ",".join(["hv-t-h0"] * 4)
    assert (intra.nodes, intra.expected["messages_network"], intra.expected["placement"]) == (1, 0, "intra-node")
    inter = launch(by_block[1], tbs["bridge"], bed)
    assert inter.expected["messages_network"] == inter.expected["messages"]


def test_qemu_launch_runs_the_launcher_in_the_first_guest():
    study, tbs = _study()
    c = Cluster(kind="qemu", tag="t", guests=["g0", "g1"], addresses=["198.18.1.1", "198.18.1.2"],
                subnet="198.18.1.0/24", accel="tcg", ns="hv-t", key=Path("/k"), known_hosts=Path("/kh"),
                run_dir=Path("/r"), serial_logs=[])
    cfg = next(x for x in _advect(study, "vm") if x.settings["block"] == 1)
    argv = launch(cfg, tbs["vm"], c).argv
    assert argv[:3] == ["ip", "netns", "exec"]
    assert argv[4] == "ssh" and "root@198.18.1.1" in argv  # into guest 0
    remote = argv[-1]
    assert "--host g0,g1,g0,g1" in remote and "/usr/local/bin/hpcvirt-advect-openmpi" in remote


def test_native_cluster_places_ranks_with_srun_plane_distribution():
    cfg = copy.deepcopy(STUDY_FILE)
    cfg.update(testbeds=["example-site"])
    study, tbs = load_study(cfg, config_path="config/config.yaml", testbed_dir=ROOT / "config/testbeds")
    by_block = {c.settings["block"]: c for c in _advect(study, "example-site")}
    mixed = launch(by_block[2], tbs["example-site"])
    assert mixed.argv[:6] == ["srun", "--mpi=pmix", "-N", "2", "-n", "4"]
    assert "--distribution=plane=2" in mixed.argv and "--cpu-bind=cores" in mixed.argv
    intra = launch(by_block[4], tbs["example-site"])
    assert intra.argv[:6] == ["srun", "--mpi=pmix", "-N", "1", "-n", "4"]


def _tidy(values: dict) -> pd.DataFrame:
    """Synthetic tidy rows: values[(testbed, block)] = per-round times per step."""
    rows = []
    label = {4: "intra-node", 2: "mixed", 1: "inter-node"}
    share = {4: 0.0, 2: 1 / 3, 1: 1.0}
    for (tb, block), times in values.items():
        virt = "qemu-tcg" if tb == "vm" else "netns-bridge"
        for rep, t in enumerate(times, 1):
            for metric, unit, v in (("time_per_step", "us", t), ("comm_per_step", "us", t / 2),
                                    ("compute_per_step", "us", t / 2), ("network_share", "fraction", share[block])):
                rows.append(dict(run_id=f"c/{tb}/advect/openmpi-n4-b{block}_32x32x16_s200w10/rep-{rep}", testbed=tb, virtualization=virt,
                                 kind="qemu" if tb == "vm" else "netns-bridge", accel="tcg" if tb == "vm" else "",
                                 interconnect="shm+tcp", stack="host", mpi="openmpi", benchmark="advect",
                                 variant=f"{block} per block", metric=metric, unit=unit, value=v, msg_bytes=8192,
                                 ranks=4, nodes=2, ranks_per_node=2, placement=label[block], rep=rep,
                                 iteration_count=200))
    return pd.DataFrame(rows)


def test_pairs_are_by_round_and_per_placement():
    tidy = _tidy({("bridge", 4): [100, 200, 100], ("vm", 4): [1000, 2000, 1000],
                  ("bridge", 1): [100, 110, 120], ("vm", 1): [5000, 5500, 6000]})
    pairs = {(o["subject"], o["placement"]): o for o in placement_pairs(tidy)}
    assert set(pairs) == {("vm", "intra-node"), ("vm", "inter-node")}
    # round by round the VM is exactly 10x (intra) and 50x (inter): no spread in the paired ratio,
    # although the rounds themselves differ by a factor of 2
    assert pairs[("vm", "intra-node")]["ratio"]["median"] == pytest.approx(10)
    assert pairs[("vm", "intra-node")]["ratio"]["ci_low"] == pytest.approx(10)
    assert pairs[("vm", "inter-node")]["ratio"]["median"] == pytest.approx(50)
    assert pairs[("vm", "inter-node")]["reference"] == "bridge"


def test_summary_and_macros():
    tidy = _tidy({("bridge", 4): [100, 100, 100], ("bridge", 2): [150, 150, 150], ("bridge", 1): [200, 200, 200],
                  ("vm", 4): [1000, 1000, 1000], ("vm", 2): [3000, 3000, 3000], ("vm", 1): [8000, 8000, 8000]})
    summary = summarize_tidy(tidy)
    ps = placement_summary(summary)
    assert list(ps.loc[ps.testbed == "bridge", "placement"]) == ["intra-node", "mixed", "inter-node"]
    macros, table = placement_tex(summary, tidy)
    # the shares, steps and ratios the text cites are declared (workflow/numbers.yaml)
    macros |= numbers.macros(tidy, numbers.load(ROOT / "workflow/numbers.yaml"), latency_bytes=8)
    # the time steps and the halo size: the stencil's own numbers (Benchmark.numbers, written by paper.campaign_numbers)
    stencil = REGISTRY["advect"]
    macros |= stencil.numbers(tidy[tidy["benchmark"].map(stencil.owns)])
    macros = macros.tex()
    for line in ("\\hvPlaceShareBridgeOpenmpiMixed}{33.3}", "\\hvPlaceStepVmOpenmpiInterNode}{8000}",
                 "\\hvPlaceRatioVmOpenmpiInterNodeVsBridge}{40.0}", "\\hvPlaceRatioVmOpenmpiMixedVsBridge}{20.0}",
                 "\\hvPlaceCommPctVmOpenmpiMixed}{50}", "\\hvPlaceRanks}{4}", "\\hvPlaceHalo}{8\\,KiB}",
                 "\\hvPlaceGrid}{$32\\times32\\times16$}"):
        assert line in macros, line
    assert "vm (qemu-tcg) & inter-node (1) & 100 &" in table
    # no placement in a campaign: no macros, and the table says so
    none_macros, none_table = placement_tex(summary[summary.benchmark != "advect"], tidy)
    assert none_macros == {} and "no placement runs" in none_table


@pytest.mark.skipif(not Path("/usr/bin/mpicc.openmpi").exists(), reason="needs Open MPI's compiler wrapper")
def test_host_binary_is_compiled_on_first_use_and_after_source_changes(tmp_path, monkeypatch):
    import os
    import shutil

    from hpcvirt.measure import ensure_binary

    for rel in ("workflow/src/advect.c", "workflow/scripts/build-advect.sh"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, tmp_path / rel)
    study, tbs = _study()
    in_guests = _advect(study, "vm")[0]      # the archive's (in this working directory: its guests ran it)
    monkeypatch.chdir(tmp_path)  # jobs run in the workflow's working directory
    c = _advect(study, "bridge")[0]
    out = tmp_path / ".hpcvirt/bin/advect-openmpi"
    first = ensure_binary(tbs["bridge"], c)
    assert out.exists() and first["path"] == ".hpcvirt/bin/advect-openmpi" and len(first["sha256"]) == 64
    mtime = out.stat().st_mtime_ns
    assert ensure_binary(tbs["bridge"], c) == first and out.stat().st_mtime_ns == mtime  # reused
    src = tmp_path / "workflow/src/advect.c"
    os.utime(src, ns=(mtime + 10**9, mtime + 10**9))
    ensure_binary(tbs["bridge"], c)
    assert out.stat().st_mtime_ns > mtime  # rebuilt after the source changed
    # and after the MPI's compiler wrapper changed (a site's named after a first build with Debian's)
    os.utime(src, ns=(out.stat().st_mtime_ns - 10**9,) * 2)       # the source older than the binary again
    assert first["cc"] == "mpicc.openmpi" and (out.parent / "advect-openmpi.cc").read_text() == "mpicc.openmpi"
    site = tmp_path / "site-mpicc"
    site.write_text("#!/bin/sh\nexec mpicc.openmpi \"$@\"\n")
    site.chmod(0o755)
    monkeypatch.setenv("HPCVIRT_MPICC_OPENMPI", str(site))
    mtime = out.stat().st_mtime_ns
    assert ensure_binary(tbs["bridge"], c)["cc"] == str(site) and out.stat().st_mtime_ns > mtime
    mtime = out.stat().st_mtime_ns
    ensure_binary(tbs["bridge"], c)
    assert out.stat().st_mtime_ns == mtime      # the same wrapper: reused
    # guests bring their own build; packaged benchmarks are only named
    assert ensure_binary(tbs["vm"], in_guests) == {"path": "/usr/local/bin/hpcvirt-advect-openmpi"}
    pp = next(x for x in matrix.configurations(study) if x.benchmark == "netpipe" and x.testbed == "local")
    assert ensure_binary(tbs[pp.testbed], pp) == {"path": "NPopenmpi"}


def test_the_studys_placements_in_the_method_are_computed_as_the_check_computes_them(monkeypatch):
    """The method's worked example (Nanos et al.'s 16 ranks on two hosts in blocks of 8, 2 and 1) states the
    shares of messages that cross the network as hpcvirt.placement computes them for a run's check."""
    from hpcvirt.benchmarks import advect

    rows = pd.DataFrame({"iteration_count": [200], "msg_bytes": [8192],
                         "run_id": ["c/local/advect/openmpi-n16-b8_32x32x16_s200w10/rep-1"]})
    got = REGISTRY["advect"].numbers(rows)
    assert (got["hvPlaceStudyRanks"], got["hvPlaceStudyBlocks"]) == ("16", "8, 2 and 1")
    assert got["hvPlaceStudyShares"] == "6.7\\,\\%, 46.7\\,\\% and 100\\,\\%"
    monkeypatch.setattr(advect, "STUDY_BLOCKS", (4, 16))         # 3 of 15 links cross; none
    assert REGISTRY["advect"].numbers(rows)["hvPlaceStudyShares"] == "20\\,\\% and 0\\,\\%"
    method = (ROOT / "paper/sections/parts/method-placement.tex").read_text()
    assert "\\hvPlaceStudyShares{}" in method and "46.7" not in method
