"""The state and configuration of the local Slurm clusters (hpcvirt.slurmstate),
without starting one: the port base, and the files a two-node cluster writes."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from hpcvirt import slurmstate


@pytest.mark.skipif(shutil.which("cksum") is None, reason="cksum (coreutils) missing")
@pytest.mark.parametrize("text", ["", "a", "/work/x/.hpcvirt/slurm", "/tmp/" + "d" * 300])
def test_cksum_is_the_tools(text):
    out = subprocess.run(["cksum"], input=text.encode(), capture_output=True, check=True, timeout=30).stdout
    assert slurmstate.cksum(text.encode()) == int(out.split()[0])


def test_port_base_from_the_state_directory(tmp_path, monkeypatch):
    monkeypatch.delenv("HPCVIRT_SLURM_PORT_BASE", raising=False)
    layout = slurmstate.Layout(str(tmp_path))
    assert layout.d == tmp_path / "slurm"
    assert 20000 <= layout.ctld_port <= 32159 - 63 and (layout.ctld_port - 20000) % 64 == 0
    monkeypatch.setenv("HPCVIRT_SLURM_PORT_BASE", "24000")
    assert slurmstate.Layout(str(tmp_path)).ctld_port == 24000


def test_two_nodes_files(tmp_path, monkeypatch):
    monkeypatch.setenv("HPCVIRT_SLURM_PORT_BASE", "24000")
    layout = slurmstate.Layout(str(tmp_path))
    layout.write_conf_many(2, 2, 8000, acct=True)
    conf = layout.conf.read_text()
    assert "SlurmctldHost=hvslurm-ctl(198.18.4.254)\nSlurmctldPort=24000\nSlurmdPort=24001\n" in conf
    assert "SrunPortRange=24016-24063\n" in conf and "AccountingStoragePort=24002\n" in conf
    assert "DefMemPerCPU=2000\n" in conf
    assert conf.endswith("PartitionName=local Nodes=hvslurm-n[1-2] Default=YES MaxTime=INFINITE State=UP "
                         "OverSubscribe=NO\n")
    assert layout.hosts.read_text().splitlines()[1:] == [
        "127.0.0.1 localhost", "198.18.4.254 hvslurm-ctl", "198.18.4.1 hvslurm-n1", "198.18.4.2 hvslurm-n2",
        "198.18.4.253 hvslurm-db"]
    assert layout.nodes() == 2 and layout.acct_file.exists()
    layout.write_dbd_conf()
    assert layout.dbd_conf.stat().st_mode & 0o777 == 0o600
    layout.write_conf_many(2, 1, 8000, acct=False)
    assert not layout.acct_file.exists() and "AccountingStorageType=accounting_storage/none\n" in layout.conf.read_text()
