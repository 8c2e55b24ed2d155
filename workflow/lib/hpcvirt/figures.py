"""The paper's figures, as declarations: each names its notebook and the
benchmarks (and testbed kinds) it needs.  The workflow builds a figure only
when the campaign has a configuration it needs; the paper includes the parts
that show it only then (:func:`hpcvirt.paper.parts_tex`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Figure:
    name: str                    # paper/figures/<name>.pdf, rule figure_<name>, LaTeX label fig:<name>
    notebook: str                # notebooks/<notebook>.ipynb
    benchmark: str               # a configuration of this benchmark is needed ...
    kinds: tuple[str, ...] = ()  # ... on a testbed of one of these kinds (empty: any)
    also: tuple[str, ...] = ()   # and configurations of these benchmarks (anywhere)

    def wanted(self, configurations, testbeds: dict) -> bool:
        have = {c.benchmark for c in configurations}
        return all(b in have for b in self.also) and any(
            c.benchmark == self.benchmark and (not self.kinds or testbeds[c.testbed]["kind"] in self.kinds)
            for c in configurations)


FIGURES = (
    Figure("pingpong", "01-pingpong", "netpipe", ("native",)),
    Figure("datapaths", "02-datapaths", "netpipe"),
    Figure("placement", "03-placement", "advect"),
    Figure("npb", "04-npb", "npb"),
    Figure("npbnorm", "05-npbnorm", "npb", ("netns-bridge", "qemu")),
    Figure("osu", "06-osu", "osu"),
    Figure("agreement", "07-agreement", "imb", (), ("netpipe",)),
    Figure("commprof", "08-commprof", "commprof"),
)


def for_campaign(configurations, testbeds: dict) -> list[Figure]:
    return [f for f in FIGURES if f.wanted(configurations, testbeds)]
