"""Provenance records no absolute path of the machine that measured (paths
relative to the clone, or to a named root: the source mirror, the build
cache, the work directory) and nothing of the process environment."""

from __future__ import annotations

import json

from hpcvirt import paths, provenance



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
