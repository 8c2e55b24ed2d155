"""Slurm settings of a measurement, from its testbed file (never from rules)."""

from __future__ import annotations


def resources(tb: dict, benchmark: str) -> dict:
    """sbatch resources for one measurement on testbed ``tb``."""
    s = tb.get("slurm", {})
    out = {"runtime": int(s.get("runtime_min", 30))}
    if s.get("partition"):
        out["slurm_partition"] = s["partition"]
    if s.get("account"):
        out["slurm_account"] = s["account"]
    if s.get("constraint"):
        out["constraint"] = s["constraint"]
    if s.get("qos"):
        out["qos"] = s["qos"]
    return out


def group(tb: dict, benchmark: str) -> str:
    """One allocation per testbed, node count and benchmark family."""
    return f"{tb['name']}.n{tb['nodes']}.{benchmark}"
