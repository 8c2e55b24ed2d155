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

    def wanted(self, configurations, testbeds: dict) -> bool:
        return any(c.benchmark == self.benchmark and (not self.kinds or testbeds[c.testbed]["kind"] in self.kinds)
                   for c in configurations)


FIGURES = (
    Figure("pingpong", "01-pingpong", "netpipe", ("native",)),
    Figure("datapaths", "02-datapaths", "netpipe"),
    Figure("placement", "03-placement", "advect"),
)


def for_campaign(configurations, testbeds: dict) -> list[Figure]:
    return [f for f in FIGURES if f.wanted(configurations, testbeds)]
