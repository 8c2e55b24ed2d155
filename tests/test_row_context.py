"""What a run's provenance record gives its tidy rows (hpcvirt.analysis.row_context): the testbed kind, the
guests' accelerator and the Spack hash of the build, read from the record, never parsed by analysis code."""

from __future__ import annotations

import pytest

from hpcvirt.analysis import row_context
from hpcvirt.tidy import COLUMNS, Measurement, to_rows


def record(kind: str, virtualization: str, build: dict | None = None) -> dict:
    ctx = {"run_id": "c/t/b/p/rep-1", "testbed": "t", "testbed_kind": kind, "virtualization": virtualization,
           "benchmark_binary": {"path": "x", **({"build": build} if build is not None else {})}}
    return {"context": ctx, "started_at": "2026-11-27T00:00:00Z", "host": {"host_id": "abc", "hostname": "h"}}


@pytest.mark.parametrize("kind, virt, accel", [
    ("native", "none", ""), ("native", "none+apptainer", ""), ("netns-bridge", "netns-bridge", ""),
    ("qemu", "qemu-tcg", "tcg"), ("qemu", "qemu-kvm", "kvm"), ("qemu", "qemu-kvm+charliecloud", "kvm")])
def test_kind_and_accelerator_come_from_the_record(kind, virt, accel):
    ctx = row_context(record(kind, virt))
    assert (ctx["kind"], ctx["accel"], ctx["virtualization"]) == (kind, accel, virt)
    assert ctx["host"] == "abc" and ctx["started_at"] == "2026-11-27T00:00:00Z"


def test_the_spack_hash_is_the_builds_and_empty_for_other_builds():
    h = "a7c32lfmxjvmakiyvitwe2mef2j3h35k"
    assert row_context(record("native", "none", {"spack": {"hash": h}}))["spack_hash"] == h
    assert row_context(record("native", "none", {"source": {"sha256": "0" * 64}}))["spack_hash"] is None
    assert row_context(record("native", "none"))["spack_hash"] is None


def test_the_rows_carry_them():
    ctx = row_context(record("qemu", "qemu-tcg", {"spack": {"hash": "b" * 32}}))
    [row] = to_rows([Measurement("imb", "latency", "us", 1.0, msg_bytes=8)], ctx)
    assert list(row) == list(COLUMNS)
    assert (row["kind"], row["accel"], row["spack_hash"]) == ("qemu", "tcg", "b" * 32)
