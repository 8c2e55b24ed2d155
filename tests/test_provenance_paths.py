"""Provenance records no absolute path of the machine that measured (paths
relative to the clone, or to a named root: the source mirror, the build
cache, the work directory) and nothing of the process environment; the
archived records were rewritten so (workflow/scripts/migrate-provenance.py)
and stay so."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

from hpcvirt import paths, provenance

ROOT = Path(__file__).resolve().parents[1]
MIGRATE = ROOT / "workflow/scripts/migrate-provenance.py"


def test_paths_under_a_root_are_written_relative_to_it(tmp_path, monkeypatch):
    clone, work, cache, mirror = tmp_path / "clone", tmp_path / "w", tmp_path / "clone/.hpcvirt/s", tmp_path / "m"
    monkeypatch.setenv("HPCVIRT_ROOT", str(clone))
    monkeypatch.setenv("HPCVIRT_WORKDIR", str(work))
    monkeypatch.setenv("HPCVIRT_BUILD_CACHE", str(cache))
    monkeypatch.setenv("HPCVIRT_SOURCE_MIRROR", str(mirror))
    rec = {"argv": ["ssh", "-i", f"{work}/guest/k/ssh/id_ed25519", f"-i{work}/x", f"{clone}/workflow/scripts/a",
                    "--mca", f"plm_rsh_agent={clone}/workflow/scripts/netns-rsh", "/dev/null", f"{clone}2/x"],
           "build": {"dir": f"{cache}/osu-openmpi-1", "source": {"from": f"{mirror}/osu.tar.gz"}},
           "image": str(work), "n": 3}
    assert provenance.portable(rec) == {
        "argv": ["ssh", "-i", "$HPCVIRT_WORKDIR/guest/k/ssh/id_ed25519", "-i$HPCVIRT_WORKDIR/x",
                 "workflow/scripts/a", "--mca", "plm_rsh_agent=workflow/scripts/netns-rsh", "/dev/null",
                 f"{clone}2/x"],
           "build": {"dir": "$HPCVIRT_BUILD_CACHE/osu-openmpi-1",
                     "source": {"from": "$HPCVIRT_SOURCE_MIRROR/osu.tar.gz"}},
           "image": "$HPCVIRT_WORKDIR", "n": 3}


def test_a_record_holds_no_machine_path_and_no_process_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("HPCVIRT_ROOT", str(tmp_path))
    monkeypatch.delenv("HPCVIRT_WORKDIR", raising=False)
    monkeypatch.delenv("HPCVIRT_BUILD_CACHE", raising=False)
    agent = paths.script("netns-rsh")
    rec = provenance.record(
        launch={"argv": ["mpirun", "--mca", f"plm_rsh_agent={agent}", "ch-run", "img.sqfs", "--", "NPmpich2"],
                "env": {"UCX_TLS": "tcp,self", "USER": "someone"}, "mpi": "none"},
        status={"exit_code": 0}, config_digest="sha256:0",
        context={"testbed_info": {"agent": str(agent), "image": str(paths.workdir() / "guest/k")}})
    assert rec["command"]["env"] == {"UCX_TLS": "tcp,self"}
    assert rec["command"]["argv"][2] == "plm_rsh_agent=workflow/scripts/netns-rsh"
    assert rec["context"]["testbed_info"] == {"agent": "workflow/scripts/netns-rsh", "image": "$HPCVIRT_WORKDIR/guest/k"}
    assert str(tmp_path) not in json.dumps(rec)


def test_a_record_names_the_tuning_variables_a_run_inherits_and_nothing_else(monkeypatch):
    """A site's module or a user's shell may set MPI, fabric or OpenMP tuning variables that the runner
    passes on: they are recorded (inherited_env); the rest of the environment is not."""
    monkeypatch.setenv("OMPI_MCA_btl_tcp_if_include", "ib0")
    monkeypatch.setenv("OMP_NUM_THREADS", "4")
    monkeypatch.setenv("UCX_TLS", "rc")                 # the testbed sets it too: recorded as the command's
    monkeypatch.setenv("SECRET_TOKEN", "x")
    rec = provenance.record(launch={"argv": ["true"], "env": {"UCX_TLS": "tcp,self"}, "mpi": "none"},
                            status={"exit_code": 0}, config_digest="sha256:0", context={})
    assert rec["command"]["inherited_env"] == {"OMPI_MCA_btl_tcp_if_include": "ib0", "OMP_NUM_THREADS": "4"}
    assert rec["command"]["env"] == {"UCX_TLS": "tcp,self"} and "SECRET_TOKEN" not in json.dumps(rec)


MACHINE_PATH = re.compile(r'"/(work|tmp)')


def test_the_archived_provenance_holds_no_machine_path():
    """What `grep -r '"/work\\|"/tmp' data/raw --include=*.json` checks, and no USER of the process."""
    found = [str(p.relative_to(ROOT)) for p in (ROOT / "data/raw").rglob("*.json")
             if MACHINE_PATH.search(p.read_text(encoding="utf-8"))]
    assert found == [], f"{len(found)} records, e.g. {found[:3]}"
    with_user = [str(p.relative_to(ROOT)) for p in (ROOT / "data/raw").rglob("*.json") if '"USER"' in p.read_text()]
    assert with_user == []
    res = subprocess.run([sys.executable, str(MIGRATE), "--check"], cwd=ROOT, capture_output=True, text=True)
    assert res.returncode == 0 and ", 0 would change" in res.stdout, res.stdout + res.stderr


def test_the_migration_rewrites_records_once_and_never_a_raw_output(tmp_path):
    raw = tmp_path / "data/raw/c/vm/netpipe/p"
    raw.mkdir(parents=True)
    rec = {"command": {"argv": ["ssh", "-i", "/tmp/fresh/.hpcvirt/guest/k/ssh/id_ed25519"],
                       "env": {"USER": "root", "UCX_TLS": "tcp"}},
           "context": {"benchmark_binary": {"build": {"dir": "/work/main/.hpcvirt/suites/osu-openmpi-1",
                                                      "source": {"from": "/work/shared/sources/osu.tar.gz"}}},
                       "testbed_info": {"agent": "/tmp/fresh/workflow/scripts/netns-rsh"}}}
    (raw.parents[1] / "preflight.json").write_text(json.dumps({"wireup": [{"env": {"USER": "root"}}]}, indent=2,
                                                              sort_keys=True) + "\n")
    (raw / "rep-1.json").write_text(json.dumps(rec, indent=2, sort_keys=True) + "\n")
    (raw / "rep-1.out").write_text('"/tmp/fresh/x" stays\n')
    (raw / "rep-1.out").chmod(0o444)
    res = subprocess.run([sys.executable, str(MIGRATE), str(tmp_path / "data/raw")], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert "2 records, 2 rewritten" in res.stdout
    assert json.loads((raw.parents[1] / "preflight.json").read_text()) == {"wireup": [{"env": {}}]}
    assert json.loads((raw / "rep-1.json").read_text()) == {
        "command": {"argv": ["ssh", "-i", "$HPCVIRT_WORKDIR/guest/k/ssh/id_ed25519"], "env": {"UCX_TLS": "tcp"}},
        "context": {"benchmark_binary": {"build": {"dir": "$HPCVIRT_BUILD_CACHE/osu-openmpi-1",
                                                   "source": {"from": "$HPCVIRT_SOURCE_MIRROR/osu.tar.gz"}}},
                    "testbed_info": {"agent": "workflow/scripts/netns-rsh"}}}
    assert (raw / "rep-1.out").read_text() == '"/tmp/fresh/x" stays\n'
    again = subprocess.run([sys.executable, str(MIGRATE), str(tmp_path / "data/raw")], capture_output=True, text=True)
    assert "2 records, 0 rewritten" in again.stdout, again.stdout + again.stderr
    shutil.rmtree(tmp_path / "data")
