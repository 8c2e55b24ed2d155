"""Nanos et al.'s streams per data path: the labels of the data paths from
the tidy columns and the summary the figure and the macros read
(hpcvirt.benchmarks.iperf3.streams_summary, hpcvirt.paper.streams_numbers and the declared hvStreams numbers)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from hpcvirt import numbers
from hpcvirt.benchmarks.iperf3 import streams_summary
from hpcvirt.labels import datapath_label
from hpcvirt.paper import streams_numbers

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("virt,link,label", [
    ("none", "", "loopback"),
    ("none+apptainer", "", "loopback"),
    ("netns-bridge", "", "bridge"),
    ("netns-bridge", None, "bridge"),
    ("netns-bridge", "rate 1gbit", "bridge, 1 Gbit/s"),
    ("netns-bridge", "macvlan", "direct (macvlan)"),
    ("netns-bridge", "vxlan, rate 1gbit", "VXLAN tunnel, 1 Gbit/s"),
    ("netns-bridge", "gretap", "GRE tunnel"),
    ("qemu-tcg", "rate 10gbit", "guests, 10 Gbit/s"),
    ("qemu-kvm", "macvtap", "guests, direct (macvtap)"),
])
def test_datapath_labels(virt, link, label):
    assert datapath_label(virt, link) == label


def rows(testbed, virt, link, aggregate, streams=4):
    out = []
    for rep, total in enumerate(aggregate, start=1):
        base = dict(testbed=testbed, virtualization=virt, link=link, benchmark="iperf3", interconnect="tcp", rep=rep,
                    run_id=f"c/{testbed}/iperf3/rep-{rep}")
        out.append(dict(base, metric="bandwidth", unit="MB/s", value=total, variant=f"{streams} streams"))
        out.append(dict(base, metric="retransmits", unit="count", value=float(rep), variant=f"{streams} streams"))
        out += [dict(base, metric="stream_bandwidth", unit="MB/s", value=total / streams, variant=f"stream {i + 1}")
                for i in range(streams)]
    return out


def test_summary_order_units_and_macros():
    tidy = pd.DataFrame(rows("bridge-gbe", "netns-bridge", "rate 1gbit", [110, 115, 112])
                        + rows("local", "none", "", [2500, 2600, 2400])
                        + rows("bridge", "netns-bridge", "", [1800, 1900, 2000])
                        + rows("bridge-macvlan", "netns-bridge", "macvlan", [2000, 2100, 2200])
                        # other benchmarks are not streams
                        + [dict(testbed="local", virtualization="none", link="", benchmark="netpipe", rep=1,
                                metric="bandwidth", unit="Mbit/s", value=1.0, variant="", interconnect="shm")])
    s = streams_summary(tidy)
    assert list(s["path"]) == ["loopback", "bridge", "direct (macvlan)", "bridge, 1 Gbit/s"]
    local = s.set_index("testbed").loc["local"]
    assert local["gbits"] == pytest.approx(2500 * 8e-3)            # MB/s -> Gbit/s, median of the rounds
    assert (local["gbits_lo"], local["gbits_hi"]) == pytest.approx((2400 * 8e-3, 2600 * 8e-3))
    assert local["streams"] == 4 and local["stream_gbits"] == pytest.approx([5.0] * 4)
    assert local["retransmits"] == 2.0 and local["n"] == 3
    macros = streams_numbers(tidy)
    assert macros["hvStreamsCount"] == "4"
    # the aggregate the text cites, declared (workflow/numbers.yaml): the summary's median
    declared = numbers.macros(tidy, numbers.load(ROOT / "workflow/numbers.yaml"), latency_bytes=8)
    assert declared["hvStreamsBridge"] == "15.2" and declared["hvStreamsLocal"] == "20.0"
    assert (declared["hvStreamsLocalLo"], declared["hvStreamsLocalHi"]) == ("19.2", "20.8")
    assert macros["hvStreamsPathBridgeMacvlan"] == "direct (macvlan)"
    assert streams_numbers(tidy[tidy["benchmark"] != "iperf3"]) == {}
