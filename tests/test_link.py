"""Link settings of the two-host testbeds (hpcvirt.link): a rate limit that
really caps the bandwidth, a setting the kernel lacks refused before any job,
and nothing left behind."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from hpcvirt import link
from hpcvirt.config import ConfigError, load_testbed
from hpcvirt.netns import NetnsBridge

sys.path.insert(0, str(Path(__file__).parent))
from test_netns import _leftovers, needs_netns, tag  # noqa: E402,F401 (tag: the fixture)

ROOT = Path(__file__).resolve().parents[1]
NETEM = link.probe("netem") if shutil.which("tc") else "no tc"


def qperf(tb, *args: str) -> str:
    """qperf from host 0 against a qperf server on host 1: its output."""
    srv = subprocess.Popen(tb.exec_prefix(1) + ["qperf", "-lp", "19799"], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    client = tb.exec_prefix(0) + ["qperf", "-lp", "19799"]
    try:
        for _ in range(50):
            if subprocess.run(client + ["-t", "1", tb.addresses[1], "conf"], capture_output=True,
                              timeout=20).returncode == 0:
                break
            time.sleep(0.1)
        return subprocess.run(client + [*args[:-1], tb.addresses[1], args[-1]], capture_output=True, text=True,
                              timeout=60).stdout
    finally:
        srv.kill()
        srv.wait(timeout=10)


def qperf_bw(tb) -> float:
    """qperf tcp_bw (streaming, 64 KiB messages) from host 0 to host 1, in bit/s."""
    out = qperf(tb, "-t", "3", "-m", "64K", "-uu", "tcp_bw")
    m = re.search(r"bw\s*=\s*([0-9.]+) bytes/sec", out)
    assert m, out
    return float(m.group(1)) * 8


def qperf_pingpong_bw(tb) -> float:
    """1 MiB ping-pong (qperf tcp_lat: one-way time) from host 0 to host 1, in bit/s."""
    out = qperf(tb, "-t", "2", "-m", "1M", "-vu", "-uu", "tcp_lat")
    m = re.search(r"latency\s*=\s*([0-9.]+) ns", out)
    assert m, out
    return 2**20 * 8 / (float(m.group(1)) * 1e-9)


@pytest.mark.vm
@needs_netns
@pytest.mark.skipif(shutil.which("qperf") is None, reason="qperf not installed")
def test_a_rate_limit_caps_the_measured_bandwidth_and_goes_with_the_testbed(tag):
    with NetnsBridge(tag, subnet="198.18.7.0/24", rate="1gbit") as tb:
        qd = subprocess.run(["tc", "-n", tb.switch_ns, "qdisc", "show"], capture_output=True, text=True,
                            timeout=10).stdout
        assert qd.count("qdisc tbf") == 2 and "rate 1Gbit" in qd, qd
        assert tb.info["link"] == "rate 1gbit"
        capped = qperf_bw(tb)
        pingpong = qperf_pingpong_bw(tb)
    assert _leftovers(tag) == []
    # never above the limit (15 % for the token bucket's burst); below it by what a loaded 2-core host
    # costs a 3 s stream (a CI run measured 0.81 Gbit/s); that the limit is what holds it there is shown
    # by the same stream without the limit, below
    assert 0.7e9 <= capped <= 1.15e9, capped
    # a 1 MiB message one way, then the reply: never faster than the link; each turn-around (and, on a
    # loaded 2-core host, the scheduler) costs time that a stream does not pay, so the floor is lower
    assert 0.6e9 <= pingpong <= 1.15e9, pingpong
    with NetnsBridge(tag, subnet="198.18.7.0/24") as tb:
        free = qperf_bw(tb)
    assert free > 1.5 * capped, (free, capped)
    assert _leftovers(tag) == []


@pytest.mark.vm
@needs_netns
@pytest.mark.skipif(NETEM is None, reason="this kernel has netem: the refusal cannot be shown here")
def test_a_setting_the_kernel_lacks_fails_before_any_job_naming_the_option(tmp_path):
    with pytest.raises(link.LinkError, match=r"config/testbeds/x.yaml: network.delay_us needs the kernel's netem "
                                             r"qdisc \(CONFIG_NET_SCH_NETEM\), which this host does not provide"):
        link.check({"delay_us": 100}, "config/testbeds/x.yaml")
    link.check({"rate": "1gbit"}, "config/testbeds/x.yaml")   # tbf is there
    # through the workflow (not a dry run): a study on a testbed with a delay stops at load, nothing written
    from test_workflow import PROFILE, fresh_copy, snakemake

    work = fresh_copy(tmp_path / "repo")
    (work / "config/testbeds/bridge-slow.yaml").write_text(yaml.safe_dump(
        {"name": "bridge-slow", "extends": "bridge", "network": {"subnet": "198.18.2.0/24", "delay_us": 500}}))
    res = snakemake(*PROFILE, "--config", "campaign=never", "testbeds=[bridge-slow]", "skip_unoffered=True",
                    cwd=work, check=False)
    assert res.returncode != 0
    assert ("config/testbeds/bridge-slow.yaml: network.delay_us needs the kernel's netem qdisc "
            "(CONFIG_NET_SCH_NETEM)") in res.stderr, res.stderr[-2000:]
    assert not (work / "data/raw/never").exists() and not (work / "logs").exists()


def test_a_host_that_cannot_probe_gets_no_kernel_verdict(monkeypatch):
    """Without namespaces (no root rights, a restricted container) the probe says nothing about the kernel:
    the workflow still loads (e.g. to redraw figures), and a measurement on the testbed fails on its own."""
    monkeypatch.setattr(link, "probe", lambda kind: "cannot create a network namespace to probe the kernel: x")
    link.check({"rate": "1gbit", "delay_us": 5}, "config/testbeds/x.yaml")
    monkeypatch.setattr(link, "probe", lambda kind: "Error: Specified qdisc kind is unknown.")
    with pytest.raises(link.LinkError, match="CONFIG_NET_SCH_NETEM"):
        link.check({"delay_us": 5}, "config/testbeds/x.yaml")


def test_qdisc_commands_and_labels():
    assert link.qdisc_argv("sw", "p0", rate="1gbit") == [
        ["tc", "-n", "sw", "qdisc", "add", "dev", "p0", "root", "handle", "10:", "tbf", "rate", "1gbit",
         "burst", "32768", "latency", "50ms", "peakrate", "1001000kbit", "mtu", "9000"]]
    both = link.qdisc_argv("sw", "p0", rate="10gbit", delay_us=250)
    assert both[0][-3:] == ["netem", "delay", "250us"] and both[1][7:9] == ["parent", "1:1"]
    assert both[1][both[1].index("burst") + 1] == str(5_000_000) and "peakrate" not in both[1]
    assert link.label({"rate": "1gbit", "delay_us": 250}) == "rate 1gbit, delay 250 us"
    assert link.label(None) == "" and link.label({"mtu": 1500}) == ""
    with pytest.raises(ValueError, match="rate '1tbit'"):
        link.rate_bits("1tbit")


def test_a_testbed_extends_another_and_bad_settings_name_the_key(tmp_path):
    tb = load_testbed(ROOT / "config/testbeds/bridge-gbe.yaml")
    base = load_testbed(ROOT / "config/testbeds/bridge.yaml")
    assert tb["network"] == {**base["network"], "subnet": "198.18.2.0/24", "rate": "1gbit"}
    assert tb["kind"] == "netns-bridge" and tb["mpi"]["openmpi"]["launcher"] == base["mpi"]["openmpi"]["launcher"]
    # keys set to null are removed: the variant offers ping-pong, raw TCP, OSU and the applications only
    assert sorted(k for k in tb["mpi"]["openmpi"] if k not in ("launcher", "env", "paths")) == [
        "lammps", "milc", "netpipe", "openfoam", "osu", "qe"]
    assert "mpich" not in tb["mpi"] and "mpich" in base["mpi"]     # a mapping set to null is removed whole
    d = tmp_path
    shutil.copy(ROOT / "config/testbeds/bridge.yaml", d / "bridge.yaml")
    cases = {
        "a.yaml": ({"name": "a", "extends": "nosuch"}, r"a.yaml: extends: 'nosuch' is not a testbed file"),
        "b.yaml": ({"name": "b", "extends": "bridge", "network": {"rate": "1tbit"}}, r"b.yaml: network.rate"),
        "c.yaml": ({"name": "c", "extends": "a"}, r"c.yaml: extends: .*a.yaml must be a testbed that extends no"),
    }
    (d / "a.yaml").write_text(yaml.safe_dump(cases["a.yaml"][0]))
    for f, (content, needle) in cases.items():
        (d / f).write_text(yaml.safe_dump(content))
        with pytest.raises(ConfigError, match=needle):
            load_testbed(d / f)
    local = yaml.safe_load((ROOT / "config/testbeds/local.yaml").read_text())
    local["network"] = {"rate": "1gbit"}
    (d / "local.yaml").write_text(yaml.safe_dump(local))
    with pytest.raises(ConfigError, match=r"local.yaml: network.rate: a link setting of the two-host kinds"):
        load_testbed(d / "local.yaml")


@needs_netns
def test_the_limit_applies_to_a_tap_as_the_qemu_testbed_makes_it(tag):
    """QemuCluster puts the qdiscs on the guests' taps in its namespace (no guest needed to show it)."""
    ns, tap = f"hv-{tag}-q", f"hv{tag}t0"
    subprocess.run(["ip", "netns", "add", ns], check=True, timeout=10)
    try:
        subprocess.run(["ip", "-n", ns, "tuntap", "add", "dev", tap, "mode", "tap"], check=True, timeout=10)
        for argv in link.qdisc_argv(ns, tap, rate="10gbit"):
            subprocess.run(argv, check=True, timeout=10)
        qd = subprocess.run(["tc", "-n", ns, "qdisc", "show", "dev", tap], capture_output=True, text=True,
                            timeout=10).stdout
        assert "qdisc tbf 10: root" in qd and "rate 10Gbit" in qd, qd
    finally:
        subprocess.run(["ip", "netns", "del", ns], timeout=10)
    assert _leftovers(tag) == []


# ------------------------------------------------ data paths: tunnel and direct path
def _bytes(ns: str, dev: str) -> tuple[int, int]:
    """(rx, tx) bytes of an interface in a namespace."""
    out = subprocess.run(["ip", "-n", ns, "-s", "-j", "link", "show", "dev", dev], capture_output=True, text=True,
                         timeout=10, check=True).stdout
    stats = __import__("json").loads(out)[0]["stats64"]
    return stats["rx"]["bytes"], stats["tx"]["bytes"]


def _netpipe(tb, tmp_path, mpi: str = "openmpi") -> int:
    """A NetPIPE ping-pong to 1 MiB between the two hosts; the payload bytes rank 0 sent."""
    from test_netns import launcher

    out = tmp_path / f"np-{mpi}.out"
    exe = {"openmpi": "NPopenmpi", "mpich": "NPmpich2"}[mpi]
    cp = subprocess.run(launcher(tb, mpi) + [exe, "-l", "1", "-u", str(2**20), "-p", "0", "-o", str(out)],
                        capture_output=True, text=True, timeout=240)
    assert cp.returncode == 0, cp.stderr[-2000:]
    rows = [line.split() for line in out.read_text().splitlines() if line.strip()]
    assert rows and int(float(rows[-1][0])) == 2**20
    return sum(int(float(r[0])) for r in rows)        # one message of each size at least (NetPIPE repeats)


@pytest.mark.vm
@needs_netns
@pytest.mark.skipif(shutil.which("NPopenmpi") is None, reason="needs NetPIPE (netpipe-openmpi)")
@pytest.mark.parametrize("path", ["vxlan", "macvlan"])
def test_mpi_traffic_takes_the_declared_data_path(tag, tmp_path, path):
    """The tunnel: MPI's bytes cross eth0 (the VXLAN device) and, encapsulated, the underlay and the
    switch.  The direct path: they cross eth0 (a macvlan) and no bridge exists at all."""
    if link.probe(path):
        pytest.skip(f"this kernel has no {path}")
    with NetnsBridge(tag, subnet="198.18.8.0/24", path=path, rate="10gbit") as tb:
        assert tb.info["path"] == path and tb.info["link"] == f"{path}, rate 10gbit"
        kind = subprocess.run(["ip", "-n", tb.hosts[0], "-d", "link", "show", "dev", "eth0"], capture_output=True,
                              text=True, timeout=10).stdout
        assert f" {path} " in kind, kind
        links = subprocess.run(["ip", "-n", tb.switch_ns, "-d", "link", "show"], capture_output=True, text=True,
                               timeout=10).stdout
        before = {h: _bytes(h, "eth0") for h in tb.hosts}
        under = {h: _bytes(h, link.UNDERLAY_IFACE) for h in tb.hosts} if path == "vxlan" else {}
        sent = _netpipe(tb, tmp_path)
        after = {h: _bytes(h, "eth0") for h in tb.hosts}
        tx0 = after[tb.hosts[0]][1] - before[tb.hosts[0]][1]
        rx1 = after[tb.hosts[1]][0] - before[tb.hosts[1]][0]
        assert tx0 >= sent and rx1 >= sent, (tx0, rx1, sent)
        if path == "vxlan":
            assert tb.mtu == 1450 and tb.info["underlay"] == link.UNDERLAY
            # every overlay byte crossed the underlay with its 50-byte VXLAN header
            utx = _bytes(tb.hosts[0], link.UNDERLAY_IFACE)[1] - under[tb.hosts[0]][1]
            assert utx > tx0, (utx, tx0)
            assert " bridge " in links and "vxlan" not in links       # the switch sees only the underlay
            qd = subprocess.run(["tc", "-n", tb.switch_ns, "qdisc", "show"], capture_output=True, text=True,
                                timeout=10).stdout
            assert qd.count("qdisc tbf") == 2, qd                      # the limit is on the underlay's ports
        else:
            assert " bridge " not in links and tb.bridge == ""         # no software switch on the path
            qd = subprocess.run(["tc", "-n", tb.hosts[0], "qdisc", "show", "dev", "eth0"], capture_output=True,
                                text=True, timeout=10).stdout
            assert "qdisc tbf" in qd, qd                                # the limit sits at the host's egress
    assert _leftovers(tag) == []


@pytest.mark.vm
@needs_netns
def test_a_data_path_the_kernel_lacks_fails_before_any_job_naming_the_option():
    missing = [p for p in ("gretap", "vxlan", "macvlan") if link.probe(p)]
    if not missing:
        pytest.skip("this kernel has every data path: the refusal cannot be shown here")
    p = missing[0]
    with pytest.raises(link.LinkError, match=rf"config/testbeds/x.yaml: network.path {p} needs the kernel's {p} "
                                             rf"devices \({link.KERNEL_OPTION[p]}\), which this host does not provide"):
        link.check({"path": p}, "config/testbeds/x.yaml")


def test_data_path_settings_are_checked_and_named(tmp_path):
    assert link.label({"path": "vxlan", "rate": "1gbit"}) == "vxlan, rate 1gbit"
    assert link.label({"path": "bridge"}) == ""
    assert link.needed({"path": "macvlan", "rate": "1gbit"}) == ["tbf", "macvlan"]
    assert link.needed({"path": "macvtap"}) == ["macvtap"] and link.label({"path": "macvtap"}) == "macvtap"
    assert link.tunnel_argv("gretap", "h0", "eth0", "ul0", "198.19.254.1", ["198.19.254.2"]) == [
        ["ip", "-n", "h0", "link", "add", "eth0", "type", "gretap", "local", "198.19.254.1", "remote", "198.19.254.2"]]
    for base in ("vm", "bridge"):
        (tmp_path / f"{base}.yaml").write_text((ROOT / f"config/testbeds/{base}.yaml").read_text())
    bad = {"v.yaml": ({"extends": "vm", "network": {"path": "macvlan"}},
                       "network.path: 'macvlan' is a data path of netns-bridge testbeds (this testbed is 'qemu')"),
           "b.yaml": ({"extends": "bridge", "network": {"path": "macvlan", "delay_us": 5}},
                      "network.delay_us: macvlan has no switch port for a delay"),
           "c.yaml": ({"extends": "bridge", "network": {"underlay": "198.19.3.0/24"}},
                      "network.underlay: the underlay of a tunnel"),
           "d.yaml": ({"extends": "bridge", "network": {"path": "tunnel"}}, "network.path"),
           "e.yaml": ({"extends": "bridge", "network": {"path": "macvtap"}},
                      "network.path: 'macvtap' is a data path of qemu testbeds (this testbed is 'netns-bridge'); "
                      "allowed here: bridge, vxlan, gretap, macvlan"),
           "f.yaml": ({"extends": "vm", "network": {"path": "macvtap", "delay_us": 5}},
                      "network.delay_us: macvtap has no switch port for a delay")}
    for name, (doc, message) in bad.items():
        (tmp_path / name).write_text(yaml.safe_dump({"name": name[:-5], **doc}))
        with pytest.raises(ConfigError, match=re.escape(message)):
            load_testbed(tmp_path / name)
