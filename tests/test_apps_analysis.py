"""The applications' comparisons (hpcvirt.apps.app_scaling, app_vm_ratio)
on a small tidy table: the reference of each input, pairing by round, and
the VM/native ratio on the guests' input."""

from pathlib import Path

import pandas as pd
import pytest

from hpcvirt.analysis import summarize_tidy
from hpcvirt.apps import app_scaling, app_vm_ratio
from hpcvirt.paper import campaign_numbers
from hpcvirt.tidy import COLUMNS

ROOT = Path(__file__).resolve().parents[1]


def rows(testbed, virt, ic, link, ranks, variant, times):
    return [dict(benchmark="milc", variant=variant, mpi="openmpi", metric="wall_time", unit="s", value=t,
                 testbed=testbed, virtualization=virt, interconnect=ic, link=link, ranks=ranks, rep=r,
                 kind="qemu" if virt.startswith("qemu-") else "netns-bridge" if virt == "netns-bridge" else "native",
                 accel=virt.removeprefix("qemu-") if virt.startswith("qemu-") else "",
                 nodes=2 if ic == "tcp" else 1, run_id=f"c/{testbed}/{r}")
            for r, t in enumerate(times, 1)]


BIG, SMALL = "8x8x8x8 x1", "4x4x4x6 x1 (2 steps)"
TIDY = pd.DataFrame(
    rows("local", "none", "shm", "", 1, BIG, [20, 22, 21])
    + rows("local", "none", "shm", "", 2, BIG, [10, 11, 12])
    + rows("bridge", "netns-bridge", "tcp", "", 2, BIG, [12, 11, 14])
    + rows("bridge", "netns-bridge", "tcp", "", 2, SMALL, [1.0, 1.1, 0.9])
    + rows("bridge-gbe", "netns-bridge", "tcp", "rate 1gbit", 2, SMALL, [2.0, 2.2, 1.8])
    + rows("vm", "qemu-tcg", "tcp", "", 2, SMALL, [40.0, 55.0, 36.0]))


def test_each_input_has_its_reference():
    r = app_scaling(TIDY).set_index(["variant", "testbed", "ranks"])
    # the large input: native shared memory at one rank, paired by round
    assert r.loc[(BIG, "local", 2), "reference"] == "local, shared memory, 1 rank"
    assert r.loc[(BIG, "local", 2), "perf"] == pytest.approx(pd.Series([20 / 10, 22 / 11, 21 / 12]).median())
    # the guests' input ran only across hosts: the unlimited bridge at its lowest rank count
    assert r.loc[(SMALL, "vm", 2), "reference"] == "bridge, unlimited bridge, 2 ranks"
    assert r.loc[(SMALL, "bridge", 2), "perf"] == pytest.approx(1.0)
    assert r.loc[(SMALL, "bridge-gbe", 2), "perf"] == pytest.approx(0.5)
    assert r.loc[(SMALL, "vm", 2), "klass"] == "guests (TCG)"


def test_the_figure_draws_per_application_the_input_most_testbeds_ran():
    """app_panels: the rows the applications' figure draws.  A second native input that fewer testbeds ran
    (only the reference host) is not drawn; the guests' input is, in its own panel."""
    from hpcvirt.apps import app_panels

    other = pd.DataFrame(rows("local", "none", "shm", "", 1, "2x2x2x2 x1", [1, 1, 1])
                         + rows("local", "none", "shm", "", 2, "2x2x2x2 x1", [1, 1, 1]))
    p = app_panels(pd.concat([other, TIDY], ignore_index=True))
    assert set(p.loc[p["panel"] == "scaling", "variant"]) == {BIG}
    assert set(p.loc[p["panel"] == "scaling", "testbed"]) == {"local", "bridge"}
    assert set(p.loc[p["panel"] == "guests", "variant"]) == {SMALL}
    assert set(p.loc[p["panel"] == "guests", "testbed"]) == {"bridge", "bridge-gbe", "vm"}
    # the guests' input that no other testbed ran is no panel; a campaign without native runs draws its inputs
    assert set(app_panels(TIDY[TIDY["testbed"].isin(["local", "vm"])])["panel"]) == {"scaling"}
    alone = app_panels(TIDY[TIDY["variant"] == SMALL])
    assert set(alone["panel"]) == {"scaling"} and set(alone["testbed"]) == {"bridge", "bridge-gbe", "vm"}


def test_the_vm_native_ratio_pairs_rounds_on_the_same_input():
    v = app_vm_ratio(TIDY)
    assert len(v) == 1
    x = v.iloc[0]
    assert (x["variant"], x["testbed"], x["native_testbed"], x["accelerator"]) == (SMALL, "vm", "bridge", "TCG")
    assert x["ratio"] == pytest.approx(40.0) and x["n"] == 3              # 40/1.0, 55/1.1, 36/0.9 -> median 40
    assert x["ratio_lo"] <= x["ratio"] <= x["ratio_hi"]
    # without the native run on the same input there is no ratio
    assert app_vm_ratio(TIDY[TIDY["testbed"] != "bridge"]).empty


def full_rows(tidy: pd.DataFrame) -> pd.DataFrame:
    """The small table with every tidy column, as the numbers rule reads it."""
    return tidy.reindex(columns=list(COLUMNS)).assign(stack="", placement="", warmup=0, iteration_count=1,
                                                      verified=True, image_digest="", spack_lock="",
                                                      started_at="", raw_path="", suite_version="",
                                                      source_sha256="")


def test_the_ratio_reaches_the_paper_as_macros():
    tidy = full_rows(TIDY)
    summary = summarize_tidy(tidy).assign(campaign="c")
    macros = campaign_numbers(summary, tidy)
    assert macros["hvAppVmMilcVm"] == "40.0" and macros["hvAppVmMilcVmAccel"] == "TCG"
    assert "\\newcommand{\\hvAppVmMilcVm}{40.0}\n" in macros.tex()


def test_the_guests_lammps_input_names_its_steps():
    """LAMMPS' variant names only its atoms: the paper's macro for the guests' input gives the steps too, the
    iteration count of its loop time (the other applications name theirs in the variant)."""
    lmp = TIDY.assign(benchmark="lammps", metric="loop_time", variant=TIDY["variant"].map({BIG: "32000 atoms",
                                                                                           SMALL: "4000 atoms"}))
    tidy = pd.concat([TIDY, lmp]).reindex(columns=list(COLUMNS)).assign(
        stack="", placement="", warmup=0, verified=True, image_digest="", spack_lock="", started_at="",
        raw_path="", suite_version="", source_sha256="")
    tidy["iteration_count"] = [700 if v == "32000 atoms" else 100 if v == "4000 atoms" else 1
                               for v in tidy["variant"]]
    macros = campaign_numbers(summarize_tidy(tidy).assign(campaign="c"), tidy)
    assert macros["hvAppVmLammpsVmInput"] == "4000 atoms" and macros["hvAppVmLammpsVmSteps"] == "100"
    assert "hvAppVmMilcVmSteps" not in macros


def test_the_applications_ranks_per_host_come_from_their_rows():
    """The method's "the rank counts stop at two per host" is the most ranks an application ran on one host."""
    tidy = full_rows(TIDY)
    summary = summarize_tidy(tidy).assign(campaign="c")
    assert "hvAppRanksPerHost" not in campaign_numbers(summary, tidy)        # no rows say it
    for per_host, text in ((1, "one"), (2, "two"), (16, "16")):
        rows = tidy.assign(ranks_per_node=[1] * (len(tidy) - 1) + [per_host])
        assert campaign_numbers(summary, rows)["hvAppRanksPerHost"] == text
    part = (ROOT / "paper/sections/parts/method-apps.tex").read_text()
    assert "stop at \\hvAppRanksPerHost{} per host" in part and "two per host" not in part


def test_the_table_says_the_guests_measure_the_emulator_only_where_they_ran_emulated():
    from hpcvirt.tables import apps_tex

    tidy = full_rows(TIDY)
    assert (tidy["accel"] == "tcg").any()
    assert "under TCG emulation they measure the emulator" in apps_tex(tidy)
    kvm = apps_tex(tidy.assign(accel=tidy["accel"].replace({"tcg": "kvm"}),
                               virtualization=tidy["virtualization"].replace({"qemu-tcg": "qemu-kvm"})))
    assert "\\label{tab:apps}" in kvm and "TCG" not in kvm
