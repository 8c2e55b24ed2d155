"""Concurrent TCP streams with iperf3 (``-J``, JSON): the aggregate bandwidth
of ``streams`` parallel connections from one host (or guest) to another,
Nanos et al.'s network benchmark (four streams, NATIVE / BRIDGED / IOV
data paths).

The client's JSON report holds ``start.test_start`` (streams, duration,
omitted warm-up seconds), one ``end.streams`` entry per connection and the
sums ``end.sum_sent`` / ``end.sum_received``.  Emitted:

* ``bandwidth`` (MB/s, 10^6 bytes/s): the receiver's aggregate
  (``sum_received``, bytes the server got in the timed seconds);
* ``stream_bandwidth`` (MB/s): each stream's received rate (``variant``
  ``stream <i>``), so an unfair split shows;
* ``retransmits`` (count): the sender's TCP retransmissions.

ParseError for iperf3's own ``error`` (a refused connection, a server that
went away), a report cut before its ``end`` block (truncated JSON), or a
report of another stream count, duration or warm-up than declared.
"""

from __future__ import annotations

import json

from ..tidy import Measurement, ParseError
from .base import ClientServer, Job, listening_probe
from .common import read_text
from .parts import Counterpart, Int, Package, View


def parse(path, *, streams: int | None = None, seconds: int | None = None, omit: int | None = None
          ) -> list[Measurement]:
    text = read_text(path)
    try:
        report = json.loads(text)
    except ValueError as exc:
        raise ParseError(path, f"not a complete iperf3 JSON report (cut off?): {exc}") from None
    if not isinstance(report, dict):
        raise ParseError(path, "not an iperf3 JSON report")
    if report.get("error"):
        raise ParseError(path, f"iperf3 failed: {report['error']!r}")
    start, end = report.get("start") or {}, report.get("end") or {}
    test = start.get("test_start") or {}
    received, sent = end.get("sum_received"), end.get("sum_sent")
    if not received or not sent or "streams" not in end:
        raise ParseError(path, "the report has no end block (the run was cut before it finished)")
    for key, want in (("num_streams", streams), ("duration", seconds), ("omit", omit)):
        if want is not None and test.get(key) != want:
            raise ParseError(path, f"test_start.{key} is {test.get(key)!r}, but {want} was declared")
    if test.get("protocol") != "TCP":
        raise ParseError(path, f"protocol {test.get('protocol')!r}, not TCP")
    per_stream = [s.get("receiver") or {} for s in end["streams"]]
    if len(per_stream) != test.get("num_streams") or not all("bits_per_second" in s for s in per_stream):
        raise ParseError(path, f"{len(per_stream)} stream results for {test.get('num_streams')} streams")
    n = test["num_streams"]
    common = dict(benchmark="iperf3", ranks=2, extra={"streams": str(n), "seconds": str(test.get("duration")),
                                                      "omit": str(test.get("omit"))})
    out = [Measurement(metric="bandwidth", unit="MB/s", value=received["bits_per_second"] / 8e6,
                       variant=f"{n} streams", iteration_count=n, **common),
           Measurement(metric="retransmits", unit="count", value=float(sent.get("retransmits", 0)),
                       variant=f"{n} streams", iteration_count=n, **common)]
    out += [Measurement(metric="stream_bandwidth", unit="MB/s", value=s["bits_per_second"] / 8e6,
                        variant=f"stream {i}", iteration_count=1, **common) for i, s in enumerate(per_stream, 1)]
    return out


#: The benchmark's name: its tidy rows' benchmark column.
NAME = "iperf3"


# ------------------------------------------------------------------- views
def streams_summary(tidy: pd.DataFrame, level: float = 0.95) -> pd.DataFrame:
    """Nanos et al.'s network benchmark per testbed: the receiver's aggregate
    bandwidth of the concurrent TCP streams (Gbit/s), median [CI] over the
    rounds, each stream's median, retransmissions (median), and the data
    path's label; ordered as :data:`DATAPATH_ORDER`, unlimited links first."""
    import pandas as pd

    from .. import stats
    from ..labels import DATAPATH_ORDER, TO_GBITS, datapath_label, normalize_units

    d = normalize_units(tidy[tidy["benchmark"] == NAME].replace({"metric": {"stream_bandwidth": "bandwidth_s"}}))
    if d.empty:
        return pd.DataFrame()
    rows = []
    for (tb, virt), g in d.groupby(["testbed", "virtualization"], sort=True):
        link = g["link"].iloc[0]
        agg = g[g["metric"] == "bandwidth"].groupby("rep")["value"].median()
        if agg.empty:
            continue
        ci = stats.median_ci(agg.to_numpy(), level)
        per = g[g["metric"] == "bandwidth_s"]
        streams = (per.groupby("variant")["value"].median() * TO_GBITS["MB/s"]).sort_index()
        label = datapath_label(virt, link)
        rows.append(dict(testbed=tb, virtualization=virt, link=link if isinstance(link, str) else "", path=label,
                         streams=len(streams), gbits=ci["median"], gbits_lo=ci["ci_low"], gbits_hi=ci["ci_high"],
                         n=ci["n"], ci_level=ci["ci_level"], stream_gbits=list(streams.round(4)),
                         retransmits=float(g[g["metric"] == "retransmits"]["value"].median())))
    out = pd.DataFrame(rows)
    base = out["path"].str.split(",").str[0]
    out["o"] = base.map({p: i for i, p in enumerate(DATAPATH_ORDER)}).fillna(len(DATAPATH_ORDER))
    out["limited"] = out["path"].str.contains(",")
    return out.sort_values(["limited", "o", "path"]).drop(columns=["o", "limited"]).reset_index(drop=True)


def streams_view(tidy: pd.DataFrame, level: float = 0.95) -> pd.DataFrame:
    """:func:`streams_summary` without the list of each stream's bandwidth (the ``stream_each`` view)."""
    s = streams_summary(tidy, level)
    return s.drop(columns=["stream_gbits"]) if len(s) else s


def stream_each(tidy: pd.DataFrame) -> pd.DataFrame:
    """One row per data path and stream: the stream's median bandwidth (Gbit/s)."""
    import pandas as pd

    s = streams_summary(tidy)
    if s.empty:
        return s
    return pd.DataFrame([dict(testbed=r["testbed"], path=r["path"], stream=i + 1, gbits=g)
                         for _, r in s.iterrows() for i, g in enumerate(r["stream_gbits"])])


class Iperf3(ClientServer):
    name = NAME
    experiment = "streams"
    port = 19801  # the server's default listen port (testbed key `port`)
    title = "Concurrent TCP streams with iperf3 3.12: aggregate and per-stream bandwidth (Nanos et al.)"
    params = {
        "streams": Int("Parallel TCP connections (iperf3 `-P`); Nanos et al. used 4.", 4, minimum=1, maximum=128),
        "seconds": Int("Timed seconds (iperf3 `-t`).", 5, minimum=1, maximum=600),
        "omit": Int("Warm-up seconds before the timed ones, not counted (iperf3 `-O`: TCP slow start).", 1,
                    minimum=0, maximum=60),
    }
    raw_template = "P{streams}_t{seconds}_o{omit}"
    build = Package(("iperf3",))
    metrics = {"bandwidth": "MB/s", "stream_bandwidth": "MB/s", "retransmits": "count"}
    success = ("a complete JSON report (its end block) of the declared streams, seconds and warm-up, a result "
               "for every stream, and no iperf3 error")
    views = (View("streams", "tidy", streams_view, "Per data path: the aggregate bandwidth of the concurrent TCP "
                  "streams, median and CI over rounds, and retransmissions."),
             View("stream_each", "tidy", stream_each, "Per data path and stream: the stream's median bandwidth."))
    counterparts = (Counterpart(r"iperf3, \hvStreamsCount{} streams", r"\citet{nanos2010}, streams between "
                                "hosts", "namespaces, not guests"),)

    def job(self, s: dict, entry: dict) -> Job:
        port = str(entry["port"])
        client = ["-c", "{peer}", "-p", port, "-P", str(s["streams"]), "-t", str(s["seconds"]), "-O", str(s["omit"]),
                  "-J"]
        # the server is ready when its socket listens, checked where it runs: a bare connect as the
        # probe is taken for a client, which the server drops, and a client that connects while it
        # does is reset ("unable to receive control message: Connection reset by peer"); a short
        # test as the probe would load the link before the timed one
        return self.client_server(entry, client, ["-s", "-p", port], listening_probe(int(port)), probe_on_server=True)

    def expected(self, s: dict, rank_hosts: list[str]) -> dict:
        return {"streams": s["streams"], "seconds": s["seconds"], "omit": s["omit"],
                "warmup": f"{s['omit']} s omitted before the timed ones (-O)"}

    def parse(self, raw, expected: dict) -> list[Measurement]:
        return parse(raw, streams=expected.get("streams"), seconds=expected.get("seconds"),
                     omit=expected.get("omit"))


BENCHMARK = Iperf3()
