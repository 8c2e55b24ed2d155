"""The container section of the paper: paired ratios container / bare host
from tidy rows (hpcvirt.analysis.container_ratios), its macros and table
(hpcvirt.companions.containers_tex), and the archived companion campaign that
config/config.yaml names (paper.containers_campaign)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest
import yaml

from hpcvirt.analysis import bare_host_peaks, container_ratios
from hpcvirt.labels import runtime_of
from hpcvirt.companions import containers_tex, host_cores

ROOT = Path(__file__).resolve().parents[1]


def rows(testbed, virt, reps, *, lat, bw, npb=None, mpi="openmpi", path="shm"):
    """Tidy rows of NetPIPE (latency at 8 B and a 2-size bandwidth sweep) and
    NPB CG times, one set per repetition; lat/bw/npb: rep -> value."""
    out = []
    for rep in reps:
        base = dict(testbed=testbed, virtualization=virt, interconnect=path, mpi=mpi, rep=rep, ranks=2)
        out.append(dict(base, benchmark="netpipe", variant="", metric="latency", unit="us", value=lat[rep],
                        msg_bytes=8))
        out.append(dict(base, benchmark="netpipe", variant="", metric="latency", unit="us", value=9.0,
                        msg_bytes=1024))
        # peak over sizes: the larger value counts
        out.append(dict(base, benchmark="netpipe", variant="", metric="bandwidth", unit="Mbit/s",
                        value=bw[rep] / 2, msg_bytes=1024))
        out.append(dict(base, benchmark="netpipe", variant="", metric="bandwidth", unit="Mbit/s", value=bw[rep],
                        msg_bytes=4096))
        if npb:
            out.append(dict(base, benchmark="npb-cg", variant="W", metric="time", unit="s", value=npb[rep],
                            msg_bytes=None, ranks=4))
    return out


def test_runtime_of():
    assert runtime_of("none") == "none"
    assert runtime_of("none+apptainer") == "apptainer"
    assert runtime_of("none+charliecloud") == "charliecloud"


def test_ratios_are_paired_by_round():
    reps = [1, 2, 3, 4, 5]
    lat = {r: 1.0 + 0.5 * r for r in reps}            # the rounds differ a lot ...
    bw = {r: 1000.0 * r for r in reps}
    npb = {r: 2.0 + r for r in reps}
    tidy = pd.DataFrame(
        rows("local", "none", reps, lat=lat, bw=bw, npb=npb)
        # ... the container costs 20 % latency and half the bandwidth in every round;
        # its round 5 is missing, so it pairs 4 rounds
        + rows("local-container", "none+charliecloud", reps[:4], lat={r: 1.2 * v for r, v in lat.items()},
               bw={r: 0.5 * v for r, v in bw.items()}, npb={r: 1.1 * v for r, v in npb.items()})
        + rows("local-apptainer", "none+apptainer", reps, lat=lat, bw=bw, npb=npb))
    r = container_ratios(tidy, latency_bytes=8)
    cc = r[r["runtime"] == "charliecloud"].set_index("metric")
    assert cc.loc["latency", "ratio"] == pytest.approx(1.2)
    assert (cc.loc["latency", "ratio_lo"], cc.loc["latency", "ratio_hi"]) == pytest.approx((1.2, 1.2))
    assert cc.loc["peak_bandwidth", "ratio"] == pytest.approx(0.5)
    assert cc.loc["time", "ratio"] == pytest.approx(1.1)
    assert set(cc["n"]) == {4}
    assert set(cc["reference"]) == {"local"}
    ap = r[r["runtime"] == "apptainer"].set_index("metric")
    assert list(ap["ratio"]) == pytest.approx([1.0, 1.0, 1.0])
    assert set(ap["n"]) == {5}
    # unpaired, the rounds' spread would swamp the 20 %: the CI comes from the paired ratios only
    assert cc.loc["latency", "ci_level"] == pytest.approx(1 - 2 / 16)


def test_no_bare_host_or_two_of_them_gives_no_ratio():
    reps = [1, 2, 3]
    one = {r: 1.0 for r in reps}
    only_containers = pd.DataFrame(rows("local-container", "none+charliecloud", reps, lat=one, bw=one))
    assert container_ratios(only_containers).empty
    two_bare = pd.DataFrame(rows("local", "none", reps, lat=one, bw=one) + rows("other", "none", reps, lat=one, bw=one)
                            + rows("local-container", "none+charliecloud", reps, lat=one, bw=one))
    assert container_ratios(two_bare).empty


def test_guests_and_bridges_are_not_containers():
    reps = [1, 2, 3]
    one = {r: 1.0 for r in reps}
    tidy = pd.DataFrame(rows("local", "none", reps, lat=one, bw=one) + rows("vm", "qemu-tcg", reps, lat=one, bw=one)
                        + rows("bridge", "netns-bridge", reps, lat=one, bw=one))
    assert container_ratios(tidy).empty


def test_macros_and_table():
    reps = [1, 2, 3, 4, 5]
    lat = {r: 1.0 for r in reps}
    bw = {r: 1000.0 for r in reps}
    npb = {r: 2.0 for r in reps}
    tidy = pd.DataFrame(
        rows("local", "none", reps, lat=lat, bw=bw, npb=npb)
        + rows("local-container", "none+charliecloud", reps, lat={r: 1.5 for r in reps}, bw=bw, npb=npb)
        + rows("local-apptainer", "none+apptainer", reps, lat=lat, bw={r: 800.0 for r in reps},
               npb={r: 2.2 for r in reps}))
    tex = containers_tex(container_ratios(tidy), campaign="container-x", latency_bytes=8,
                         versions={"apptainer": "1.4.5", "charliecloud": "0.31"},
                         images={"apptainer": {"digest": "sha256:" + "a" * 64, "lock": "spack-envs/laptop/spack.lock",
                                               "lock_sha256": "c" * 64},
                                 "charliecloud": {"digest": "sha256:" + "b" * 64, "lock": "spack-envs/laptop/spack.lock",
                                                  "lock_sha256": "c" * 64}})
    macros = dict(re.findall(r"\\newcommand\{\\(hv\w+)\}\{([^\n]*)\}\n", tex))
    # which image each runtime ran, and the lock the image's suites were installed from
    assert macros["hvCtrImageApptainer"] == "a" * 16 and macros["hvCtrImageCharliecloud"] == "b" * 16
    assert "\\hvctrspacktrue" in tex and macros["hvCtrLock"] == "spack-envs/laptop/spack.lock"
    assert macros["hvCtrLockSha"] == "c" * 16
    # images without suites of their own (the host's builds were bound in) say nothing of a lock
    old = containers_tex(container_ratios(tidy), campaign="c", images={"apptainer": {"digest": "sha256:" + "a" * 64}})
    assert "\\hvctrspacktrue" not in old and "hvCtrLock" not in old
    assert "\\hvcontainerstrue" in tex
    assert macros["hvCtrCampaign"] == "container-x"
    assert macros["hvCtrCharliecloudNetpipeOpenmpiShmLat"] == "1.50"
    assert macros["hvCtrApptainerNetpipeOpenmpiShmBw"] == "0.800"
    assert macros["hvCtrVersionApptainer"] == "1.4.5" and macros["hvCtrVersionCharliecloud"] == "0.31"
    assert macros["hvCtrPairs"] == "4" and macros["hvCtrPairsWithOne"] == "2"
    assert macros["hvCtrMaxLat"] == "1.50" and "Charliecloud" in macros["hvCtrMaxLatCase"]
    assert macros["hvCtrMinBw"] == "0.800" and "Apptainer" in macros["hvCtrMinBwCase"]
    assert macros["hvCtrApptainerNpbMax"] == "1.10"
    assert "\\label{tab:containers}" in tex and "NetPIPE & Open MPI & shared memory" in tex
    # the table's columns: latency then bandwidth, Charliecloud before Apptainer
    assert "Charliecloud & Apptainer & Charliecloud & Apptainer & $n$" in tex


def test_the_hosts_cpus_come_from_the_records():
    def rec(cpus):
        return {"host": {"cpu": {"lscpu": {"CPU(s)": cpus}}}}
    assert host_cores([rec("2"), rec("2")]) == "2"
    assert host_cores([rec("16"), rec("4")]) == "4 or 16"
    assert host_cores([{"host": {"cpu": {}}}]) is None and host_cores([]) is None
    assert "hvCtrCores" not in containers_tex(pd.DataFrame(), campaign="c")
    assert "\\newcommand{\\hvCtrCores}{8}" in containers_tex(pd.DataFrame(), campaign="c", cores="8")
    # the section types no core count of its own
    section = (ROOT / "paper/sections/containers.tex").read_text()
    assert "\\hvCtrCores" in section and not re.search(r"\d-core|\b(one|two|four)[ -]cores?\b", section)
    # ... and names the host the companion campaign was measured on, which may be another machine
    from hpcvirt.compare import host_line

    name = yaml.safe_load((ROOT / "config/config.yaml").read_text())["paper"]["containers_campaign"]
    hosts = sorted((ROOT / "data/results" / name).glob("*/provenance.json"))
    line = host_line(hosts)
    assert line.startswith("AMD EPYC, 2 CPUs, L2 ") and "kernel 6." in line
    assert f"\\newcommand{{\\hvCtrHost}}{{{line}}}" in containers_tex(pd.DataFrame(), campaign="c", host=line)
    assert "\\hvCtrHost" in section


def test_without_a_campaign_the_section_says_so():
    tex = containers_tex(None, campaign="")
    assert "\\hvcontainersfalse" in tex and "\\newcommand" not in tex
    section = (ROOT / "paper/sections/containers.tex").read_text()
    assert "\\ifhvcontainers" in section and "\\else" in section


def test_the_archived_companion_campaign_is_committed():
    """config/config.yaml names a container campaign whose records and tables
    are in the repository, with all three runtimes."""
    name = yaml.safe_load((ROOT / "config/config.yaml").read_text())["paper"]["containers_campaign"]
    raw, results = ROOT / "data/raw" / name, ROOT / "data/results" / name
    testbeds = {p.parent.name for p in raw.glob("*/testbed.json")}
    assert testbeds == set(yaml.safe_load((ROOT / "config/container.yaml").read_text())["testbeds"])
    tidy = pd.concat([pd.read_csv(results / tb / "tidy.csv") for tb in sorted(testbeds)])
    assert set(tidy["virtualization"]) == {"none", "none+charliecloud", "none+apptainer"}
    for tb in testbeds - {"local"}:
        assert (raw / tb / "preflight.json").is_file()


def test_the_section_uses_only_macros_the_archived_companion_defines():
    name = yaml.safe_load((ROOT / "config/config.yaml").read_text())["paper"]["containers_campaign"]
    tidy = pd.concat([pd.read_csv(p, keep_default_na=False, na_values=[""])
                      for p in sorted((ROOT / "data/results" / name).glob("*/tidy.csv"))])
    images = {}
    for pf in (json.loads(p.read_text()) for p in sorted((ROOT / "data/raw" / name).glob("*/preflight.json"))):
        images[pf["runtime"]["kind"]] = {"digest": pf["image_digest"], **(pf.get("image_suites") or {})}
    cores = host_cores([json.loads(p.read_text()) for p in sorted((ROOT / "data/results" / name).glob("*/provenance.json"))])
    tex = containers_tex(container_ratios(tidy), campaign=name, versions={"apptainer": "a", "charliecloud": "c"},
                         images=images, bare_peaks=bare_host_peaks(tidy), cores=cores)
    defined = set(re.findall(r"\\newcommand\{\\(hv\w+)\}", tex))
    section = (ROOT / "paper/sections/containers.tex").read_text()
    used = set(re.findall(r"\\(hvCtr[A-Za-z]*)", section))
    if "\\hvctrspacktrue" not in tex:             # used only in the \ifhvctrspack branch
        used -= {"hvCtrLock", "hvCtrLockSha"}
    assert used and used <= defined, f"not defined by the archived companion campaign: {sorted(used - defined)}"


def test_bare_host_peaks_are_single_runs_in_gbits():
    reps = [1, 2, 3]
    tidy = pd.DataFrame(rows("local", "none", reps, lat={r: 1.0 for r in reps}, bw={1: 20e3, 2: 85e3, 3: 30e3})
                        + rows("local", "none", reps, lat={r: 1.0 for r in reps}, bw={r: 50e3 for r in reps},
                               mpi="mpich", path="tcp-loopback")
                        + rows("local-container", "none+charliecloud", reps, lat={r: 1.0 for r in reps},
                               bw={r: 1e6 for r in reps}))
    assert bare_host_peaks(tidy) == {"shm": pytest.approx((20.0, 85.0)), "tcp-loopback": pytest.approx((50.0, 50.0))}
