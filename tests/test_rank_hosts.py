"""Where the ranks ran (tidy column ``rank_hosts``): every rank's wrapper
(``workflow/scripts/rank0-stdout``) writes its host into a directory the
measurement names; the measurement reads it into the provenance and the
rows.  The wrapper's own job (rank 0's output only) is unchanged."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import uuid
from pathlib import Path

import pytest

from hpcvirt import matrix
from hpcvirt.config import load_study
from hpcvirt.measure import RANKS_SUFFIX, clear_partials, read_rank_hosts, run_measurement
from hpcvirt.tidy import COLUMNS, to_rows
from studies import study_for

ROOT = Path(__file__).resolve().parents[1]
WRAPPER = ROOT / "workflow/scripts/rank0-stdout"
BASE_ENV = {"PATH": os.environ["PATH"]}


def wrapped(rank_env: dict, directory: Path | None, prefix: list[str] | None = None) -> str:
    env = dict(BASE_ENV, **rank_env)
    if directory is not None:
        env["HPCVIRT_RANK_HOSTS"] = str(directory)
    cp = subprocess.run([*(prefix or []), str(WRAPPER), "sh", "-c", "echo out; echo err >&2"], env=env,
                        capture_output=True, text=True, timeout=30, check=True)
    return cp.stdout + "|" + cp.stderr


@pytest.mark.parametrize("var", ["OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"])
def test_each_rank_records_its_host_under_its_rank(tmp_path, var):
    assert wrapped({var: "0"}, tmp_path) == "out\nerr\n|"       # rank 0: both streams, as one
    assert wrapped({var: "3"}, tmp_path) == "|err\n"            # the others: standard error only
    host = socket.gethostname()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["0", "3"]
    assert (tmp_path / "0").read_text() == (tmp_path / "3").read_text() == f"{host}\n"


def test_without_the_directory_nothing_is_recorded(tmp_path):
    assert wrapped({"PMI_RANK": "1"}, None) == "|err\n"
    assert wrapped({"PMI_RANK": "0"}, tmp_path / "missing") == "out\nerr\n|"   # cannot write: output untouched
    assert not (tmp_path / "missing").exists()


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("ip") is None, reason="creating a network namespace needs root")
def test_a_rank_in_a_named_network_namespace_records_the_namespace(tmp_path):
    """The project's namespace hosts share this machine's host name: their name is the namespace's."""
    ns = f"hvtest-{uuid.uuid4().hex[:8]}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        wrapped({"PMIX_RANK": "1"}, tmp_path, ["ip", "netns", "exec", ns])
    finally:
        subprocess.run(["ip", "netns", "delete", ns], check=True)
    assert (tmp_path / "1").read_text() == f"{ns}\n"


def test_read_rank_hosts(tmp_path):
    assert read_rank_hosts(tmp_path, 2) is None                        # no rank wrote (guests, no wrapper)
    (tmp_path / "1").write_text("n2\n")
    (tmp_path / "0").write_text("n1\n")
    (tmp_path / "7").write_text("stray\n")                              # not a rank of this run
    assert read_rank_hosts(tmp_path, 2) == "n1,n2"
    assert read_rank_hosts(tmp_path, 3) == "n1,n2,?"                    # rank 2 recorded nothing


def test_the_column_comes_from_the_context():
    from hpcvirt.tidy import Measurement

    rows = to_rows([Measurement("netpipe", "latency", "us", 1.0, msg_bytes=8)],
                   {"run_id": "c/t/netpipe/p/rep-1", "rank_hosts": "n1,n2"})
    assert COLUMNS.index("rank_hosts") == COLUMNS.index("placement") + 1
    assert rows[0]["rank_hosts"] == "n1,n2"
    assert to_rows([Measurement("qperf", "latency", "us", 1.0)], {"run_id": "x"})[0]["rank_hosts"] is None


def test_a_killed_runs_rank_directory_is_cleared(tmp_path):
    raw = tmp_path / "rep-1.out"
    stale = tmp_path / f".rep-1.out.abc.partial{RANKS_SUFFIX}"
    stale.mkdir()
    (stale / "0").write_text("n1\n")
    other = tmp_path / f".rep-11.out.abc.partial{RANKS_SUFFIX}"
    other.mkdir()
    assert stale in clear_partials(raw)
    assert not stale.exists() and other.exists()


@pytest.mark.e2e
@pytest.mark.skipif(os.geteuid() != 0, reason="the local testbed runs in a private network namespace (root)")
@pytest.mark.skipif(shutil.which("NPopenmpi") is None, reason="needs NetPIPE (netpipe-openmpi)")
def test_a_measurement_records_where_its_ranks_ran(tmp_path, monkeypatch):
    """A real 2-rank NetPIPE on this host: both ranks name it, in the
    provenance and the rows; the directory is gone after the run.  (MPICH,
    and ranks in namespaces and on Slurm nodes: the end-to-end tests.)"""
    mpi = "openmpi"
    study, testbeds = load_study(
        study_for(["local"], pingpong={"mpis": [mpi], "paths": ["shm"], "min_bytes": 1, "max_bytes": 64}),
        testbed_dir=ROOT / "config/testbeds")
    (tmp_path / "workflow").symlink_to(ROOT / "workflow")      # the launch runs workflow/scripts/ from here
    monkeypatch.chdir(tmp_path)
    study = dict(study, campaign="ranks")
    c = next(c for c in matrix.configurations(study) if c.benchmark == "netpipe")
    raw, prov = matrix.raw_path("ranks", c, 1), matrix.raw_path("ranks", c, 1, "json")
    rec = run_measurement(study, testbeds["local"], c, 1, raw, prov)
    host = socket.gethostname()
    assert rec["context"]["rank_hosts"] == f"{host},{host}"
    assert json.loads(Path(prov).read_text())["context"]["rank_hosts"] == f"{host},{host}"
    assert "HPCVIRT_RANK_HOSTS" not in json.dumps(rec["command"])          # not a setting of the testbed
    assert sorted(p.name for p in Path(raw).parent.iterdir()) == ["rep-1.json", "rep-1.out"]


def test_ranks_on_fewer_hosts_than_meant_are_noted():
    from hpcvirt.placement import misplaced

    assert misplaced("n1,n2", 2) == misplaced("n1,n1", 1) == ""
    assert misplaced(None, 2) == misplaced("n1,?", 2) == ""              # not every rank recorded: no judgement
    assert misplaced("n1,n1", 2) == ("its 2 ranks ran on 1 host(s) (n1,n1), where the launch meant 2: it did "
                                     "not measure the path it is labelled with")


@pytest.mark.e2e
@pytest.mark.skipif(os.geteuid() != 0, reason="the local testbed runs in a private network namespace (root)")
@pytest.mark.skipif(shutil.which("NPopenmpi") is None, reason="needs NetPIPE (netpipe-openmpi)")
def test_a_run_whose_ranks_shared_a_node_meant_to_be_two_is_kept_as_failed(tmp_path, monkeypatch):
    """A real 2-rank NetPIPE on this host whose launch meant two nodes (as a site's srun might put both ranks
    on one node of a path between nodes): the run's output is kept as failed with the note, never parsed."""
    import dataclasses

    from hpcvirt import measure

    study, testbeds = load_study(
        study_for(["local"], pingpong={"mpis": ["openmpi"], "paths": ["shm"], "min_bytes": 1, "max_bytes": 64}),
        testbed_dir=ROOT / "config/testbeds")
    (tmp_path / "workflow").symlink_to(ROOT / "workflow")
    monkeypatch.chdir(tmp_path)
    real = measure.build_launch
    monkeypatch.setattr(measure, "build_launch", lambda *a: dataclasses.replace(real(*a), nodes=2))
    study = dict(study, campaign="ranks")
    c = next(c for c in matrix.configurations(study) if c.benchmark == "netpipe")
    raw, prov = matrix.raw_path("ranks", c, 1), matrix.raw_path("ranks", c, 1, "json")
    with pytest.raises(Exception, match=r"ran on 1 host\(s\) .*where the launch meant 2"):
        run_measurement(study, testbeds["local"], c, 1, raw, prov)
    assert not Path(raw).exists() and not Path(prov).exists()
    assert [p.name.split(".failed-")[0] for p in Path(raw).parent.glob("rep-1.failed-*.out")] == ["rep-1"]
