"""Parser of the placement benchmark against captured outputs
(tests/fixtures/advect/README.md says how each was made)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcvirt.benchmarks import advect
from hpcvirt.tidy import UNITS, ParseError

FIX = Path(__file__).resolve().parent / "fixtures" / "advect"


def _by_metric(ms):
    return {m.metric: m for m in ms}


@pytest.mark.parametrize("name,network,share", [
    ("bridge-intra-n4-b4.out", 0, 0.0),
    ("bridge-mixed-n4-b2.out", 400, 1 / 3),
    ("vm-inter-n4-b1.out", 1200, 1.0),
])
def test_parses_captured_runs(name, network, share):
    ms = advect.parse(FIX / name)
    m = _by_metric(ms)
    assert set(m) == {"time_per_step", "compute_per_step", "comm_per_step", "messages", "messages_network",
                      "network_share"}
    assert all(x.unit in UNITS and x.ranks == 4 and x.iteration_count == 200 for x in ms)
    assert all(x.msg_bytes == 32 * 32 * 8 and x.verified is True for x in ms)
    assert m["messages"].value == 1200 and m["messages_network"].value == network
    assert m["network_share"].value == pytest.approx(share)
    assert 0 < m["compute_per_step"].value <= m["time_per_step"].value
    assert 0 < m["comm_per_step"].value <= m["time_per_step"].value


def test_expected_placement_is_checked():
    # the mixed run is what a mixed placement must produce ...
    expected = {"ranks": 4, "steps": 200, "messages": 1200, "messages_network": 400,
                "placement": "mixed", "block": 2}
    assert advect.parse(FIX / "bridge-mixed-n4-b2.out", expected=expected)
    # ... and an intra-node run is rejected when an inter-node placement was asked for
    expected.update(messages_network=1200, placement="inter-node", block=1)
    with pytest.raises(ParseError) as exc:
        advect.parse(FIX / "bridge-intra-n4-b4.out", expected=expected)
    assert "bridge-intra-n4-b4.out" in str(exc.value)
    assert "messages_network = 0" in exc.value.reason and "did not run where they were placed" in exc.value.reason
    with pytest.raises(ParseError, match="steps = 200"):
        advect.parse(FIX / "bridge-mixed-n4-b2.out", expected={"steps": 1000})


@pytest.mark.parametrize("name,needle", [
    ("openmpi-n4-bad-argument-abort.out", "MPI_ABORT was invoked"),
    ("openmpi-n4-sigint-killed.out", "is empty"),
    ("bridge-mixed-n4-b2-truncated.out", "no 'end' line"),
    ("bridge-mixed-n4-b2-verification-failed.out", "verification FAILED"),
])
def test_failed_outputs_are_rejected_with_their_path(name, needle):
    with pytest.raises(ParseError) as exc:
        advect.parse(FIX / name)
    assert str(FIX / name) in str(exc.value)
    assert needle in str(exc.value)


def test_other_benchmark_output_is_not_taken_for_advect():
    other = FIX.parent / "qperf"
    path = sorted(other.glob("*.out"))[0]
    with pytest.raises(ParseError, match="no 'hpcvirt-advect' header"):
        advect.parse(path)


def test_skipped_verification_is_flagged_not_verified(tmp_path):
    text = (FIX / "bridge-mixed-n4-b2.out").read_text()
    text = text.replace("reference 0a65789e51d81d28\nverification SUCCESSFUL", "verification SKIPPED")
    p = tmp_path / "skipped.out"
    p.write_text(text)
    assert all(m.verified is None for m in advect.parse(p))


# ------------------------------------------------------------------ the benchmark itself
ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.e2e
@pytest.mark.skipif(not Path("/usr/bin/mpicc.openmpi").exists(), reason="needs Open MPI's compiler wrapper")
def test_benchmark_result_does_not_depend_on_rank_count(tmp_path):
    """The field after the steps is the same for 1, 2 and 3 ranks (the
    checksum equals the serial reference), and the messages are counted."""
    import os
    import subprocess

    binary = tmp_path / "advect"
    subprocess.run([str(ROOT / "workflow/scripts/build-advect.sh"), "openmpi", str(binary)], check=True,
                   capture_output=True)
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    sums = set()
    for ranks in (1, 2, 3):
        out = tmp_path / f"n{ranks}.out"
        with open(out, "w") as fh:
            subprocess.run(["mpirun", "--oversubscribe", "-np", str(ranks), "--bind-to", "none",
                            "--mca", "mpi_yield_when_idle", "1", str(ROOT / "workflow/scripts/rank0-stdout"),
                            str(binary), "-x", "8", "-y", "8", "-z", "4", "-s", "20", "-w", "1"],
                           stdout=fh, stderr=subprocess.STDOUT, env=env, timeout=120, check=True)
        m = _by_metric(advect.parse(out, expected={"ranks": ranks, "steps": 20, "messages": 2 * (ranks - 1) * 20,
                                                    "messages_network": 0}))
        assert m["time_per_step"].verified is True
        sums.add(next(line for line in out.read_text().splitlines() if line.startswith("checksum")))
    assert len(sums) == 3  # the global grid grows with the rank count (z_per_rank)

    # a build whose halo exchange is broken is caught by the verification
    broken = tmp_path / "advect-broken"
    subprocess.run(["mpicc.openmpi", "-O2", "-std=c11", "-D_POSIX_C_SOURCE=200809L", "-DADVECT_FAULT_STALE_HALO",
                    "-o", str(broken), str(ROOT / "workflow/src/advect.c")], check=True, capture_output=True)
    out = tmp_path / "broken.out"
    with open(out, "w") as fh:
        subprocess.run(["mpirun", "--oversubscribe", "-np", "2", "--bind-to", "none", str(broken), "-x", "8",
                        "-y", "8", "-z", "4", "-s", "20"], stdout=fh, stderr=subprocess.STDOUT, env=env,
                       timeout=120, check=True)
    with pytest.raises(ParseError, match="verification FAILED"):
        advect.parse(out)
