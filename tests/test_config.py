"""Config and testbed validation: bad input fails before any job, naming the
file, the key and what is allowed."""

import copy
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from hpcvirt.config import ConfigError, load_schema, load_study, load_testbed
from studies import study_for

ROOT = Path(__file__).resolve().parents[1]
STUDY = yaml.safe_load((ROOT / "config/config.yaml").read_text())
LOCAL = yaml.safe_load((ROOT / "config/testbeds/local.yaml").read_text())
# The study restricted to the local testbed (for tests that rewrite local.yaml).
LOCAL_STUDY = study_for(["local"], {"local": LOCAL})


def test_shipped_configs_are_valid():
    study, testbeds = load_study(config_path=ROOT / "config/config.yaml", testbed_dir=ROOT / "config/testbeds")
    assert set(testbeds) == set(study["testbeds"])
    assert study["repetitions"] >= 1


def test_every_testbed_file_is_valid():
    for path in sorted((ROOT / "config/testbeds").glob("*.yaml")):
        tb = load_testbed(path)   # with the file it extends, if any
        study = study_for([path.stem], {path.stem: tb})
        _, testbeds = load_study(study, config_path="config/config.yaml", testbed_dir=ROOT / "config/testbeds")
        assert testbeds[path.stem]["name"] == path.stem


def test_defaults_are_applied():
    study = copy.deepcopy(STUDY)
    del study["seed"], study["timeout_s"]
    out, _ = load_study(study, testbed_dir=ROOT / "config/testbeds")
    assert out["seed"] == 20261121 and out["timeout_s"] == 300


BAD_STUDY = [
    # (mutation, substrings the message must contain)
    (lambda c: c.update(campaign="bad campaign;rm -rf"), ["config/config.yaml", "campaign", "pattern"]),
    (lambda c: c.update(repetitions=0), ["repetitions", "minimum"]),
    (lambda c: c.update(repetitions="six"), ["repetitions", "not of type 'integer'"]),
    (lambda c: c["experiments"]["pingpong"].update(mpis=["openmpi", "intelmpi"]),
     ["experiments.pingpong.mpis[1]", "'intelmpi' is not one of ['openmpi', 'mpich']"]),
    (lambda c: c["experiments"]["pingpong"].update(paths=["infiniband"]),
     ["experiments.pingpong.paths[0]", "['shm', 'tcp', 'net']"]),
    (lambda c: c["experiments"]["pingpong"].update(min_bytes=64, max_bytes=8), ["min_bytes", "max_bytes"]),
    (lambda c: c["experiments"]["tcp"].update(seconds_per_size=0.5), ["seconds_per_size", "integer"]),
    (lambda c: c.update(repetitons=3), ["Additional properties", "repetitons", "allowed keys", "repetitions"]),
    (lambda c: c.update(testbeds=["Local!"]), ["testbeds[0]", "pattern"]),
    (lambda c: c.update(testbeds=["nosuchtestbed"]), ["nosuchtestbed.yaml", "not found; testbeds: bridge, bridge-10g,", "local, local-apptainer,"]),
    (lambda c: c.pop("experiments"), ["'experiments' is a required property"]),
    (lambda c: c["experiments"]["placement"].update(ranks_per_block=[4, 0]),
     ["experiments.placement.ranks_per_block[1]", "minimum"]),
    (lambda c: c["experiments"]["placement"].update(ranks=1), ["experiments.placement.ranks", "minimum"]),
    (lambda c: c["experiments"]["placement"].update(mpis=["mpich"]),
     ["experiments.placement: mpich is offered by none", "nodes >= 2", "mpi.mpich.advect"]),
    # one-host testbeds cannot place ranks on two hosts: the message says what to do
    (lambda c: c.update(testbeds=["local"], experiments=dict(c["experiments"], pingpong=dict(
        c["experiments"]["pingpong"], paths=["shm", "tcp"]))),
     ["experiments.placement: openmpi is offered by none", "experiments.placement.enabled: false"]),
    (lambda c: c["experiments"]["placement"].update(grid={"x": 32, "w": 2}), ["placement.grid", "'w'"]),
    # the pinned suites
    (lambda c: c["experiments"]["imb"].update(tests=["Barrier"]),
     ["experiments.imb.tests[0]", "'Barrier' is not one of ['PingPong', 'PingPing']"]),
    (lambda c: c["experiments"]["imb"].update(min_log2=10, max_log2=4),
     ["experiments.imb", "min_log2 (10) must not exceed max_log2 (4)"]),
    (lambda c: c["experiments"]["imb"].update(iterations=0), ["experiments.imb.iterations", "minimum of 1"]),
    (lambda c: c["experiments"]["imb"].update(repetitions=0), ["experiments.imb.repetitions", "minimum of 1"]),
    (lambda c: c["experiments"]["osu"].update(tests=["osu_put_latency"]),
     ["experiments.osu.tests[0]", "'osu_put_latency' is not one of", "osu_alltoall"]),
    (lambda c: c["experiments"]["osu"].update(ranks=1), ["experiments.osu.ranks", "minimum of 2"]),
    (lambda c: c["experiments"]["osu"].update(min_bytes=0), ["experiments.osu.min_bytes", "minimum of 1"]),
    (lambda c: c["experiments"]["npb"].update(kernels=["bt"]),
     ["experiments.npb.kernels[0]", "'bt' is not one of ['cg', 'ep', 'ft', 'is', 'lu', 'mg']"]),
    (lambda c: c["experiments"]["npb"].update(classes=["Z"]), ["experiments.npb.classes[0]", "'S', 'W', 'A'"]),
    (lambda c: c["experiments"]["npb"].update(ranks=[3]),
     ["experiments.npb: ranks [3]", "power-of-two", "(EP runs on any)"]),
    (lambda c: c["experiments"]["npb"].update(by_kind={"xen": {"ranks": [4]}}),
     ["experiments.npb.by_kind", "'xen' was unexpected", "['native', 'netns-bridge', 'qemu', 'vm-cluster']"]),
    (lambda c: c["experiments"]["npb"]["by_kind"]["qemu"].update(colour="red"),
     ["experiments.npb.by_kind.qemu", "'colour' was unexpected", "allowed keys"]),
    (lambda c: c["experiments"]["profile"].update(mpis=["mpich"]),
     ["experiments.profile.mpis[0]", "'mpich' is not one of ['openmpi']"]),
    (lambda c: c["experiments"]["profile"].update(ranks=[6]), ["experiments.profile: ranks [6]", "power-of-two"]),
    # top-level keys, raw TCP, the paper
    (lambda c: c.update(timeout_s=5), ["timeout_s", "minimum of 10"]),
    (lambda c: c.update(seed="abc"), ["seed", "'abc' is not of type 'integer'"]),
    (lambda c: c.update(skip_unoffered="yes"), ["skip_unoffered", "not of type 'boolean'"]),
    (lambda c: c.update(testbeds=["local", "local"]), ["testbeds", "non-unique"]),
    (lambda c: c.update(testbeds=[]), ["testbeds", "non-empty"]),
    (lambda c: c["experiments"].update(hpl={"enabled": True}),
     ["experiments", "'hpl' was unexpected", "allowed keys", "'npb'"]),
    (lambda c: c["experiments"]["tcp"].update(enabled="no"), ["experiments.tcp.enabled", "boolean"]),
    (lambda c: c["experiments"]["tcp"].update(tests=["udp_lat"]),
     ["experiments.tcp.tests[0]", "['tcp_lat', 'tcp_bw']"]),
    (lambda c: c["experiments"]["tcp"].update(factor=1), ["experiments.tcp.factor", "minimum of 2"]),
    (lambda c: c["paper"].update(latency_bytes=0), ["paper.latency_bytes", "minimum of 1"]),
    (lambda c: c["paper"].update(quick_look="yes"), ["paper.quick_look", "boolean"]),
    (lambda c: c["paper"].update(font="x"), ["paper", "'font' was unexpected",
                                             "['containers_campaign', 'datapaths_campaign', 'latency_bytes', 'quick_look']"]),
    (lambda c: c["paper"].update(containers_campaign="../x"), ["paper.containers_campaign", "pattern"]),
    (lambda c: c["paper"].update(datapaths_campaign="a b"), ["paper.datapaths_campaign", "pattern"]),
    (lambda c: c["experiments"]["placement"]["by_kind"]["qemu"].update(repetitions=0),
     ["experiments.placement.by_kind.qemu.repetitions", "minimum of 1"]),
    # the testbeds an experiment is not run on
    (lambda c: c["experiments"]["openfoam"].update(skip_testbeds=["bridge-vxln"]),
     ["config/config.yaml: experiments.openfoam.skip_testbeds", "['bridge-vxln'] are not testbeds", "allowed",
      "'bridge-vxlan'"]),
    (lambda c: c["experiments"]["openfoam"].update(skip_testbeds=["Bridge;x"]),
     ["experiments.openfoam.skip_testbeds[0]", "pattern"]),
    (lambda c: c["experiments"]["tcp"].update(skip_testbeds=list(c["testbeds"])),
     ["experiments.tcp: every testbed of the study", "is in its skip_testbeds"]),
    # settings of one testbed
    (lambda c: c["experiments"]["milc"].update(by_testbed={"bridge-1g": {"inputs": [{}]}}),
     ["config/config.yaml: experiments.milc.by_testbed", "['bridge-1g'] are not testbeds", "allowed",
      "'bridge-gbe'"]),
    (lambda c: c["experiments"]["milc"].update(by_testbed={"Bridge;x": {}}),
     ["experiments.milc.by_testbed", "'Bridge;x'", "pattern"]),
    (lambda c: c["experiments"]["milc"]["by_testbed"]["bridge"].update(inputs=[{"lattice": "5x5x5x5"}]),
     ["experiments.milc.by_testbed.bridge.inputs[0].lattice", "'5x5x5x5'"]),
    (lambda c: c["experiments"]["qe"]["by_testbed"]["bridge"].update(enabled=False),
     ["experiments.qe.by_testbed.bridge", "'enabled' was unexpected"]),
    (lambda c: c.update(emulated_guests={"experiments": ["pingpong", "netpipe"]}),
     ["config/config.yaml: emulated_guests.experiments[1]", "'netpipe' is not one of", "'pingpong'", "'tcp'"]),
    (lambda c: c.update(emulated_guests={"experiments": ["tcp"], "rounds": 1}),
     ["emulated_guests", "'rounds' was unexpected"]),
]


@pytest.mark.parametrize("mutate,needles", BAD_STUDY)
def test_bad_study(mutate, needles):
    study = copy.deepcopy(STUDY)
    mutate(study)
    with pytest.raises(ConfigError) as exc:
        load_study(study, config_path="config/config.yaml", testbed_dir=ROOT / "config/testbeds")
    for needle in needles:
        assert needle in str(exc.value)


BAD_TESTBED = [
    (lambda t: t["mpi"]["openmpi"].update(launcher=["mpirun", "-np", "2;", "rm", "-rf", "/"]),
     ["local.yaml", "mpi.openmpi.launcher[2]", "pattern"]),
    (lambda t: t["mpi"]["openmpi"].update(launcher=["mpirun $(id)"]), ["launcher[0]", "pattern"]),
    (lambda t: t["mpi"]["mpich"]["paths"]["tcp"]["env"].update({"UCX_TLS": "tcp self"}), ["UCX_TLS", "pattern"]),
    (lambda t: t["mpi"]["mpich"]["paths"]["tcp"]["env"].update({"bad-name": "x"}), ["bad-name"]),
    (lambda t: t["mpi"]["mpich"]["paths"]["tcp"]["env"].update({"X; rm": "x"}), ["X; rm"]),
    (lambda t: t.update(kind="xen"), ["kind", "'xen' is not one of ['native', 'vm-cluster', 'netns-bridge', 'qemu']"]),
    # a value that reaches a command line as a value may not start with "-" (it would become an option)
    (lambda t: t["qperf"].update(server_host="--help"), ["qperf.server_host", "'--help' does not match"]),
    (lambda t: t["mpi"]["openmpi"]["netpipe"].update(binary="-x"), ["netpipe.binary", "a value, not an option"]),
    (lambda t: t.update(hypervisor="kvm"), ["hypervisor: 'kvm' is not allowed here (a key of kind vm-cluster only)"]),
    (lambda t: t.update(executor="pbs"), ["executor", "['local', 'slurm']"]),
    (lambda t: t.update(name="other"), ["name", "must equal the file name"]),
    (lambda t: t["mpi"].pop("mpich"), ["experiments.imb: mpich over path 'shm' is offered by none"]),
    (lambda t: t["mpi"]["openmpi"]["paths"].pop("tcp"), ["openmpi over path 'tcp' is offered by none", "openmpi/shm"]),
    (lambda t: t["mpi"]["openmpi"].pop("launcher"), ["mpi.openmpi", "'launcher' is a required property"]),
    (lambda t: t.update(runtime={"kind": "charliecloud"}), ["runtime.image", "required"]),
    (lambda t: t.update(ranks_per_node=0), ["ranks_per_node", "minimum"]),
    # a native cluster places the ranks of the placement runs with launcher arguments
    (lambda t: (t.update(nodes=2), t["mpi"]["openmpi"].update(advect={"binary": "advect", "args": ["-m", "block"]})),
     ["mpi.openmpi.advect.args", "{block}"]),
    (lambda t: t["mpi"]["openmpi"].update(advect={"binary": "adv ect"}), ["mpi.openmpi.advect.binary", "pattern"]),
    (lambda t: t["mpi"]["openmpi"].update(advect={"args": []}), ["'binary' is a required property"]),
    (lambda t: t["mpi"]["openmpi"].update(imb={"binary": "IMB MPI1"}), ["mpi.openmpi.imb.binary", "pattern"]),
    (lambda t: t["mpi"]["openmpi"].update(npb={"binary": "/opt/npb;rm"}), ["mpi.openmpi.npb.binary", "pattern"]),
    (lambda t: t["mpi"]["openmpi"].update(osu={"binary": "osu", "args": ["$(reboot)"]}),
     ["mpi.openmpi.osu.args[0]", "pattern"]),
    (lambda t: t.update(isolation="chroot"), ["isolation", "'chroot' is not one of ['none', 'netns']"]),
    (lambda t: t.update(runtime={"kind": "docker"}),
     ["runtime.kind", "'docker' is not one of ['none', 'charliecloud', 'apptainer']"]),
]

# Testbed files of the other kinds: the software bridge and the QEMU guests.
BAD_OTHER_TESTBED = [
    ("vm", lambda t: t["vm"].update(vcpus=0), ["vm.yaml: vm.vcpus", "minimum of 1"]),
    ("vm", lambda t: t["vm"].update(memory_mb=16), ["vm.yaml: vm.memory_mb", "minimum of 256"]),
    ("vm", lambda t: t["vm"].update(accel="hvf"), ["vm.yaml: vm.accel", "['auto', 'kvm', 'tcg']"]),
    ("vm", lambda t: t["vm"].update(boot_timeout_s=1), ["vm.yaml: vm.boot_timeout_s", "minimum of 10"]),
    ("vm", lambda t: t["network"].update(subnet="10.0.0.0/24"),
     ["vm.yaml: network.subnet", "'10.0.0.0/24'", "benchmarking range 198.18.0.0/15"]),
    ("vm", lambda t: t["network"].update(mtu=100), ["vm.yaml: network.mtu", "minimum of 576"]),
    ("vm", lambda t: t.update(runtime={"kind": "charliecloud", "image": "x.sqfs"}),
     ["vm.yaml: runtime.kind", "kind 'native' or 'vm-cluster' only", "'qemu'"]),
    ("vm", lambda t: t.update(executor="slurm"), ["vm.yaml: executor", "local executor only"]),
    ("vm", lambda t: t["qperf"].update(port=80), ["vm.yaml: qperf.port", "minimum of 1024"]),
    ("vm", lambda t: t["mpi"]["openmpi"].update(launcher=["mpirun", "-np", "{cores}"]),
     ["vm.yaml: mpi.openmpi.launcher[2]", "placeholder {cores} is not one of", "'rank_hosts'"]),
    ("vm", lambda t: t.update(nodes=0), ["vm.yaml: nodes", "minimum of 1"]),
    ("bridge", lambda t: t["network"].update(subnet="192.168.1.0/24"),
     ["bridge.yaml: network.subnet", "benchmarking range"]),
    ("bridge", lambda t: t["mpi"]["openmpi"].update(launcher=["mpirun", "{agentx}"]),
     ["bridge.yaml: mpi.openmpi.launcher[1]", "placeholder {agentx}", "'agent'"]),
]


@pytest.mark.parametrize("name,mutate,needles", BAD_OTHER_TESTBED)
def test_bad_bridge_and_vm_testbeds(name, mutate, needles, tmp_path):
    tb = yaml.safe_load((ROOT / f"config/testbeds/{name}.yaml").read_text())
    study = study_for([name], {name: copy.deepcopy(tb)})
    mutate(tb)
    (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(tb))
    with pytest.raises(ConfigError) as exc:
        load_study(study, config_path="config/config.yaml", testbed_dir=tmp_path)
    for needle in needles:
        assert needle in str(exc.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"{name}.yaml"]       # nothing written


def test_there_are_fifty_bad_input_cases_or_more():
    assert len(BAD_STUDY) + len(BAD_TESTBED) + len(BAD_OTHER_TESTBED) >= 50
    assert len(BAD_YAML_TESTBED) + len(BAD_YAML_STUDY) >= 15


@pytest.mark.parametrize("mutate,needles", BAD_TESTBED)
def test_bad_testbed(mutate, needles, tmp_path):
    tb = copy.deepcopy(LOCAL)
    mutate(tb)
    (tmp_path / "local.yaml").write_text(yaml.safe_dump(tb))
    with pytest.raises(ConfigError) as exc:
        load_study(copy.deepcopy(LOCAL_STUDY), config_path="config/config.yaml", testbed_dir=tmp_path)
    for needle in needles:
        assert needle in str(exc.value)


def test_yaml_syntax_error_names_file(tmp_path):
    (tmp_path / "local.yaml").write_text("name: local\nmpi: [unclosed\n")
    with pytest.raises(ConfigError, match="local.yaml: not valid YAML"):
        load_study(copy.deepcopy(LOCAL_STUDY), testbed_dir=tmp_path)


def test_config_files_are_read_with_libyaml_and_only_safely(tmp_path):
    """Every job reads the study and its testbeds: with libyaml's parser (ten times faster than PyYAML's
    own), and with the safe loader's tags only, like yaml.safe_load."""
    from hpcvirt import yamlio

    if yaml.__with_libyaml__:
        assert yamlio.LOADER is yaml.CSafeLoader
    assert yamlio.safe_load((ROOT / "config/config.yaml").read_text()) == yaml.safe_load(
        (ROOT / "config/config.yaml").read_text())
    bad = tmp_path / "config.yaml"
    bad.write_text("campaign: !!python/object/apply:os.system ['true']\n")
    with pytest.raises(ConfigError, match=f"{bad}: not valid YAML"):
        load_study(config_path=bad, testbed_dir=ROOT / "config/testbeds")


def test_edited_testbed_is_refused_for_its_campaign(tmp_path):
    import json

    from hpcvirt.config import testbed_hash
    from hpcvirt.rawfiles import check_campaign_testbeds

    study, tbs = load_study(copy.deepcopy(LOCAL_STUDY), config_path="config/config.yaml",
                            testbed_dir=ROOT / "config/testbeds")
    raw = tmp_path / "raw"
    check_campaign_testbeds("c1", tbs, raw_root=str(raw))          # no record yet: accepted
    record = raw / "c1" / "local" / "testbed.json"
    record.parent.mkdir(parents=True)
    record.write_text(json.dumps({"testbed_hash": testbed_hash(tbs["local"]), "testbed": tbs["local"]}))
    check_campaign_testbeds("c1", tbs, raw_root=str(raw))          # same settings: accepted
    edited = copy.deepcopy(tbs)
    edited["local"]["mpi"]["mpich"]["paths"]["tcp"]["env"]["UCX_TLS"] = "tcp"
    with pytest.raises(ConfigError) as exc:
        check_campaign_testbeds("c1", edited, raw_root=str(raw))
    for needle in ("config/testbeds/local.yaml changed since campaign 'c1'", str(record),
                   "mpi.mpich.paths.tcp.env.UCX_TLS: 'tcp,self' -> 'tcp'", "new campaign"):
        assert needle in str(exc.value), needle


def test_added_benchmark_keeps_the_campaign_record_valid(tmp_path):
    """A benchmark entry the record did not have changes no earlier output:
    accepted; changing or removing an existing entry is refused."""
    import json

    from hpcvirt.config import testbed_hash
    from hpcvirt.rawfiles import check_campaign_testbeds

    _, tbs = load_study(copy.deepcopy(LOCAL_STUDY), config_path="config/config.yaml",
                        testbed_dir=ROOT / "config/testbeds")
    old = copy.deepcopy(tbs["local"])
    del old["mpi"]["openmpi"]["commprof"]
    record = tmp_path / "c1" / "local" / "testbed.json"
    record.parent.mkdir(parents=True)
    record.write_text(json.dumps({"testbed_hash": testbed_hash(old), "testbed": old}))
    check_campaign_testbeds("c1", tbs, raw_root=str(tmp_path))     # commprof added: accepted
    changed = copy.deepcopy(tbs)
    changed["local"]["mpi"]["openmpi"]["npb"]["binary"] = "/elsewhere/bin"
    with pytest.raises(ConfigError, match=r"mpi\.openmpi\.npb\.binary"):
        check_campaign_testbeds("c1", changed, raw_root=str(tmp_path))
    removed = copy.deepcopy(tbs)
    del removed["local"]["mpi"]["openmpi"]["netpipe"]
    with pytest.raises(ConfigError, match=r"mpi\.openmpi\.netpipe: \{"):
        check_campaign_testbeds("c1", removed, raw_root=str(tmp_path))


# ------------------------------------------ a subset of the testbeds (skip_unoffered)
def test_a_subset_of_testbeds_is_refused_with_a_hint_by_default():
    study = dict(copy.deepcopy(STUDY), testbeds=["local"])
    with pytest.raises(ConfigError) as exc:
        load_study(study, testbed_dir=ROOT / "config/testbeds")
    msg = str(exc.value)
    assert "is offered by none of the testbeds ['local']" in msg and "skip_unoffered" in msg


def test_skip_unoffered_runs_what_the_testbeds_offer_and_lists_the_rest():
    from hpcvirt.matrix import configurations

    study = dict(copy.deepcopy(STUDY), testbeds=["local"], skip_unoffered=True)
    out, testbeds = load_study(study, testbed_dir=ROOT / "config/testbeds")
    assert list(testbeds) == ["local"]
    skipped = "\n".join(out["skipped"])
    assert "experiments.pingpong: openmpi over path 'net'" in skipped
    assert "experiments.placement: openmpi is offered by none" in skipped
    configs = configurations(out)
    assert configs and {c.testbed for c in configs} == {"local"}
    assert {c.settings.get("path") for c in configs if "path" in c.settings} == {"shm", "tcp"}
    full, _ = load_study(copy.deepcopy(STUDY), testbed_dir=ROOT / "config/testbeds")
    assert full["skipped"] == []
    assert {c for c in configurations(full) if c.testbed == "local"} == set(configs)


def test_an_experiment_is_not_run_on_its_skip_testbeds():
    """OpenFOAM runs on this host, in the guests and over the tunnels only, raw TCP not on the 1 Gbit/s link, the
    direct path and the tunnels (config/config.yaml); without the key every testbed that offers them runs them."""
    from hpcvirt.matrix import configurations

    out, _ = load_study(copy.deepcopy(STUDY), testbed_dir=ROOT / "config/testbeds")
    where = {(c.benchmark, c.testbed) for c in configurations(out)}
    assert {t for b, t in where if b == "openfoam"} == {"local", "vm", "bridge-vxlan", "bridge-vxlan-gbe"}
    assert {t for b, t in where if b == "qperf"} == {"local", "bridge", "bridge-10g", "vm"}
    # NetPIPE crosses the data paths but the tunnel over the 1 Gbit/s link (and the 10 Gbit/s link, which
    # does not offer it)
    assert {t for b, t in where if b == "netpipe"} == {"local", "bridge", "bridge-gbe", "bridge-macvlan",
                                                       "bridge-vxlan", "vm"}
    study = copy.deepcopy(STUDY)
    study["experiments"]["openfoam"]["skip_testbeds"] = []
    study["experiments"]["tcp"].pop("skip_testbeds")
    out, _ = load_study(study, testbed_dir=ROOT / "config/testbeds")
    where = {(c.benchmark, c.testbed) for c in configurations(out)}
    assert {t for b, t in where if b == "openfoam"} == {"local", "vm", "bridge", "bridge-gbe", "bridge-macvlan",
                                                          "bridge-vxlan", "bridge-vxlan-gbe"}
    assert {t for b, t in where if b == "qperf"} >= {"bridge-macvlan", "bridge-vxlan", "bridge-vxlan-gbe"}


def test_the_guests_input_runs_natively_only_where_it_is_compared():
    """by_testbed: the applications' small input (the guests') runs on the unlimited bridge, the VM/native
    ratio's reference, and not on the limited links, which run the study's input only; without the key
    every namespace testbed runs what by_kind gives it."""
    from hpcvirt.matrix import configurations

    out, _ = load_study(copy.deepcopy(STUDY), testbed_dir=ROOT / "config/testbeds")
    small = {"lammps": "c10_s100", "milc": "l4x4x4x6", "qe": "s0_e24_k2"}
    for bench, mark in small.items():
        where = {c.testbed for c in configurations(out) if c.benchmark == bench and mark in c.params}
        assert where == {"bridge", "vm"}, bench
        big = {c.testbed for c in configurations(out) if c.benchmark == bench and mark not in c.params}
        # LAMMPS, which no claim reads on the limited links, is left out there (skip_testbeds)
        assert big == {"local", "bridge"} | (set() if bench == "lammps" else {"bridge-10g", "bridge-gbe"}), bench
    study = copy.deepcopy(STUDY)
    study["experiments"]["milc"].pop("by_testbed")
    study["experiments"]["milc"]["by_kind"]["netns-bridge"]["inputs"] = [{}, {"lattice": "4x4x4x6", "steps": 2}]
    out, _ = load_study(study, testbed_dir=ROOT / "config/testbeds")
    where = {c.testbed for c in configurations(out) if c.benchmark == "milc" and "l4x4x4x6" in c.params}
    assert where == {"bridge", "bridge-10g", "bridge-gbe", "vm"}


def test_the_guests_run_one_round_and_the_claims_experiments_five():
    """by_kind.qemu.repetitions: every experiment in the guests has one round (it boots them; under TCG their
    numbers measure the emulator); the configurations a claim decided here reads have five rounds (an
    interval of 93.75 %), and what no such claim reads fewer (one round: shown, deciding nothing); the guests
    boot once."""
    from hpcvirt.matrix import configurations, round_groups, schedule

    out, _ = load_study(copy.deepcopy(STUDY), testbed_dir=ROOT / "config/testbeds")
    reps = {(c.testbed, c.benchmark): c.settings.get("repetitions", out["repetitions"]) for c in configurations(out)}
    assert {r for (tb, _), r in reps.items() if tb == "vm"} == {1}
    assert {k for k, r in reps.items() if k[0] != "vm" and r != 5} == {
        ("local", "lammps"), ("bridge", "lammps"), ("local", "commprof"), ("bridge", "commprof"),
        ("local", "qe"), ("bridge", "qe"), ("bridge-10g", "qe"), ("bridge-gbe", "qe"), ("bridge-gbe", "milc"),
        ("bridge-gbe", "netpipe"), ("bridge-macvlan", "netpipe"), ("bridge-vxlan", "netpipe"),
        ("local", "iperf3"), ("bridge", "iperf3"), ("bridge-gbe", "iperf3"), ("bridge-macvlan", "iperf3")}
    # three rounds for the streams' baselines (this host, the bridge), one for what no claim reads
    assert {k for k, r in reps.items() if k[0] != "vm" and r == 3} == {("local", "iperf3"), ("bridge", "iperf3")}
    assert {r for k, r in reps.items() if k[0] != "vm" and r != 5} == {1, 3}
    # what the decided claims read: five rounds
    for key in (("local", "npb"), ("bridge-10g", "npb"), ("bridge-10g", "osu"), ("bridge-gbe", "osu"),
                ("bridge-10g", "iperf3"), ("bridge-vxlan-gbe", "openfoam"), ("local", "milc"), ("bridge", "netpipe")):
        assert reps[key] == 5, key
    assert max(rep for c, rep in schedule(out) if c.testbed == "vm") == 1
    assert [rounds for rounds, _ in round_groups(out, "vm")] == [[1]]


def test_a_campaign_keeps_the_rounds_it_holds_where_the_study_now_asks_for_fewer(tmp_path, monkeypatch):
    """LAMMPS runs one round in a new campaign; a campaign holding three rounds of a configuration (the
    archive, measured when the study asked for three) keeps all three in its plan and its schedule, and
    only those: its tables are rebuilt from every output it holds, and nothing is measured into it."""
    from hpcvirt.matrix import configurations, raw_path, schedule

    monkeypatch.chdir(tmp_path)                    # data/raw/<campaign>/ of this test's own
    study, _ = load_study(dict(copy.deepcopy(STUDY), campaign="held-rounds"), testbed_dir=ROOT / "config/testbeds",
                          schema_dir=ROOT / "workflow/schemas")
    lammps = [c for c in configurations(study) if c.testbed == "local" and c.benchmark == "lammps"]
    assert lammps and {c.settings["repetitions"] for c in lammps} == {1}
    rounds = lambda: {(c.key, rep) for c, rep in schedule(study) if c in lammps}  # noqa: E731
    assert rounds() == {(c.key, 1) for c in lammps}
    held = lammps[0]
    for rep in (1, 2, 3):
        Path(raw_path("held-rounds", held, rep)).parent.mkdir(parents=True, exist_ok=True)
        Path(raw_path("held-rounds", held, rep)).write_text("held\n")
    Path(raw_path("held-rounds", held, 4).replace(".out", ".failed-1.out")).write_text("a killed run\n")
    assert rounds() == {(c.key, 1) for c in lammps} | {(held.key, 2), (held.key, 3)}
    assert len(schedule(study)) == len(schedule(dict(study, campaign="new"))) + 2


def _with_vm_accel(tmp_path: Path, accel: str) -> Path:
    """A copy of the testbed files whose guests' vm.accel is ``accel``."""
    shutil.copytree(ROOT / "config/testbeds", tmp_path / "testbeds")
    vm = tmp_path / "testbeds/vm.yaml"
    text = vm.read_text()
    assert "  accel: auto\n" in text
    vm.write_text(text.replace("  accel: auto\n", f"  accel: {accel}\n"))
    return tmp_path / "testbeds"


def test_emulated_guests_run_only_their_experiments_but_what_the_campaign_holds(tmp_path, monkeypatch):
    """Guests that would be emulated (vm.accel: tcg here) run only emulated_guests.experiments in a new
    campaign; every other testbed runs the same; a configuration the campaign holds an output of stays
    (an archived campaign keeps what its guests measured); with KVM the guests run everything."""
    from hpcvirt.config import emulated_note
    from hpcvirt.matrix import configurations

    monkeypatch.chdir(tmp_path)                    # data/raw/<campaign>/ of this test's own
    study = dict(copy.deepcopy(STUDY), campaign="emulated-guests")
    schemas = ROOT / "workflow/schemas"
    kvm, _ = load_study(copy.deepcopy(study), testbed_dir=_with_vm_accel(tmp_path / "kvm", "kvm"), schema_dir=schemas)
    tcg, _ = load_study(copy.deepcopy(study), testbed_dir=_with_vm_accel(tmp_path / "tcg", "tcg"), schema_dir=schemas)
    assert kvm["emulated"] == {} and emulated_note(kvm) == []
    assert tcg["emulated"] == {"vm": "vm.accel: tcg"}
    on = lambda s, tb: {c.benchmark for c in configurations(s) if c.testbed == tb}  # noqa: E731
    assert on(tcg, "vm") == {"netpipe", "qperf", "imb"}
    assert on(kvm, "vm") >= {"netpipe", "qperf", "imb", "npb", "osu", "openfoam", "lammps", "milc", "qe", "advect"}
    assert [c for c in configurations(kvm) if c.testbed != "vm"] == [c for c in configurations(tcg) if c.testbed != "vm"]
    note = emulated_note(tcg)
    assert len(note) == 1 and note[0].startswith("vm: its guests would be emulated (vm.accel: tcg)")
    assert "left out there: lammps, milc, npb, openfoam, osu, placement, qe" in note[0]

    # the campaign holds one guest run of LAMMPS: that configuration stays, its siblings do not
    lmp = next(c for c in configurations(kvm) if c.testbed == "vm" and c.benchmark == "lammps")
    raw = tmp_path / "data/raw/emulated-guests/vm/lammps" / lmp.params / "rep-1.out"
    raw.parent.mkdir(parents=True)
    raw.write_text("")
    assert on(tcg, "vm") == {"netpipe", "qperf", "imb", "lammps"}
    assert "left out there: milc, npb, openfoam, osu, placement, qe" in emulated_note(tcg)[0]

    # every experiment listed: nothing is left out, and nothing is said
    every = dict(copy.deepcopy(study), emulated_guests={"experiments": sorted(STUDY["experiments"])})
    out, _ = load_study(every, testbed_dir=tmp_path / "tcg/testbeds", schema_dir=schemas)
    assert out["emulated"] and emulated_note(out) == []
    assert on(out, "vm") == on(kvm, "vm")


def test_the_plan_expects_kvm_only_where_qemu_starts_a_kvm_vcpu():
    """The accelerator a plan expects (hpcvirt.kvm.planned_accel): a testbed's explicit setting; for auto,
    KVM only if QEMU creates a KVM vCPU on this host (asked here for real)."""
    from hpcvirt.kvm import QEMU, planned_accel

    assert planned_accel("tcg") == ("tcg", "vm.accel: tcg") and planned_accel("kvm") == ("kvm", "vm.accel: kvm")
    accel, why = planned_accel("auto")
    starts = shutil.which(QEMU) is not None and os.access("/dev/kvm", os.R_OK | os.W_OK) and subprocess.run(
        [QEMU, "-accel", "kvm", "-cpu", "host", "-machine", "q35", "-m", "64", "-nodefaults", "-display", "none",
         "-S", "-monitor", "stdio"], input="quit\n", capture_output=True, text=True, timeout=30).returncode == 0
    assert (accel, bool(why)) == ("kvm" if starts else "tcg", True), why


def test_the_planned_accelerator_is_asked_once_per_boot_and_qemu(tmp_path, monkeypatch):
    """Every job plans the study again: the answer for auto is kept with the boot id and QEMU's stamp,
    and a record of another boot or another QEMU is asked again."""
    from hpcvirt import kvm
    from hpcvirt.provenance import program_stamp

    monkeypatch.setenv("HPCVIRT_WORKDIR", str(tmp_path))
    if program_stamp(kvm.QEMU) is None or not os.access("/dev/kvm", os.R_OK | os.W_OK):
        assert kvm.planned_accel("auto")[0] == "tcg" and not (tmp_path / "kvm-planned.json").exists()
        return
    asked = kvm.planned_accel("auto")
    record = tmp_path / "kvm-planned.json"
    kept = json.loads(record.read_text())
    assert (kept["accel"], kept["why"], kept["boot_id"]) == (*asked, kvm._boot_id())
    # the kept answer is what the next job gets (planted: QEMU is not asked again)
    record.write_text(json.dumps(dict(kept, accel="planted", why="kept")))
    assert kvm.planned_accel("auto") == ("planted", "kept")
    for stale in ({"boot_id": "another-boot"}, {"qemu": ["/usr/bin/other-qemu", 1, 2]}):
        record.write_text(json.dumps(dict(kept, accel="planted", why="kept", **stale)))
        assert kvm.planned_accel("auto") == asked


def test_skip_unoffered_with_nothing_left_to_run_is_an_error():
    study = dict(copy.deepcopy(STUDY), testbeds=["local"], skip_unoffered=True)
    for name, exp in study["experiments"].items():
        exp["enabled"] = name == "placement"          # needs two hosts: local offers none of it
    with pytest.raises(ConfigError, match=r"nothing to run: the testbeds \['local'\]"):
        load_study(study, testbed_dir=ROOT / "config/testbeds")


def _merged(*files: str) -> dict:
    """config/config.yaml with overlays, merged as Snakemake merges --configfile files."""
    def merge(a, b):
        out = dict(a)
        for k, v in b.items():
            out[k] = merge(a[k], v) if isinstance(v, dict) and isinstance(a.get(k), dict) else v
        return out

    study = copy.deepcopy(STUDY)
    for f in files:
        study = merge(study, yaml.safe_load((ROOT / f).read_text()))
    return study


@pytest.mark.parametrize("files,testbeds", [
    (["config/tiny.yaml"], None),
    (["config/tiny.yaml", "config/quick.yaml"], None),
    (["config/container.yaml"], None),
    (["config/datapaths.yaml"], None),
    (["config/tiny.yaml", "config/one-host.yaml"], ["local-slurm"]),
    (["config/tiny.yaml", "config/one-host.yaml"], ["local", "local-container"]),
])
def test_shipped_overlays_load_with_the_testbeds_they_are_documented_with(files, testbeds):
    """The commands in the README and the files' own comments work as written."""
    from hpcvirt.matrix import configurations

    study = _merged(*files)
    if testbeds:
        study["testbeds"] = testbeds
    out, _ = load_study(study, testbed_dir=ROOT / "config/testbeds")
    assert out["skipped"] == [] and configurations(out)


def test_the_two_node_overlay_runs_what_the_two_node_cluster_offers():
    """config/two-nodes.yaml: the tiny study's experiments that local-slurm-2n offers, the rest listed
    as skipped; no configuration puts more than 2 ranks (the nodes' CPUs) on a node."""
    from hpcvirt.matrix import configurations
    from hpcvirt.slurm import allocation

    out, testbeds = load_study(_merged("config/tiny.yaml", "config/two-nodes.yaml"),
                               testbed_dir=ROOT / "config/testbeds")
    assert out["testbeds"] == ["local-slurm-2n"]
    cfgs = configurations(out)
    counts = {b: sum(c.benchmark == b for c in cfgs) for b in {c.benchmark for c in cfgs}}
    assert counts == {"netpipe": 6, "qperf": 2, "iperf3": 1, "advect": 2}
    skipped = {line.split(":")[0] for line in out["skipped"]}
    assert skipped == {f"experiments.{e}" for e in ("imb", "osu", "npb", "profile", "openfoam", "lammps", "milc",
                                                    "qe")}, out["skipped"]     # the suites and the applications
    assert allocation(testbeds["local-slurm-2n"], cfgs) == {
        "nodes": 2, "tasks_per_node": 2, "cpus_per_task": 1, "mpi": "srun", "slurm_extra": "--exclusive"}


def test_guests_that_must_run_with_kvm_on_a_host_without_it_are_named_before_any_job(tmp_path):
    """vm.accel: kvm where QEMU cannot start a KVM vCPU: the plan says so (the guests' first boot would
    fail after the image is built); auto and tcg, or a host with KVM, say nothing."""
    from hpcvirt.kvm import kvm_note, planned_accel

    _, kvm = load_study(_merged(), testbed_dir=_with_vm_accel(tmp_path / "a", "kvm"))
    _, auto = load_study(_merged(), testbed_dir=_with_vm_accel(tmp_path / "b", "auto"))
    accel, why = planned_accel("auto")
    assert kvm_note(auto) == []
    if accel == "kvm":
        assert kvm_note(kvm) == []
    else:
        assert kvm_note(kvm) == [f"vm: vm.accel is kvm, but on this host {why}: its guests will not boot; "
                                 "vm.accel: auto runs them under TCG emulation where KVM fails"]


def test_the_kvm_layer_gives_the_guests_five_rounds_of_every_experiment(tmp_path):
    """config/kvm.yaml: where the guests run with KVM, every experiment of theirs gets five rounds (the
    claims measured in them are then decided); their other settings (paths, inputs) and every other
    testbed stay as in the default study."""
    from hpcvirt.matrix import configurations

    schemas = ROOT / "workflow/schemas"
    plain, _ = load_study(_merged(), testbed_dir=_with_vm_accel(tmp_path / "a", "kvm"), schema_dir=schemas)
    kvm, _ = load_study(_merged("config/kvm.yaml"), testbed_dir=_with_vm_accel(tmp_path / "b", "kvm"),
                        schema_dir=schemas)
    reps = lambda s: {(c.benchmark, c.params): c.settings.get("repetitions", s["repetitions"])  # noqa: E731
                      for c in configurations(s) if c.testbed == "vm"}
    assert set(reps(plain).values()) == {1} and set(reps(kvm).values()) == {5}
    assert set(reps(plain)) == set(reps(kvm))                  # the same configurations: paths, inputs
    others = lambda s: [c for c in configurations(s) if c.testbed != "vm"]  # noqa: E731
    assert others(plain) == others(kvm)
    experiments = yaml.safe_load((ROOT / "config/kvm.yaml").read_text())["experiments"]
    assert set(experiments) == {e for e, x in STUDY["experiments"].items() if "qemu" in x.get("by_kind", {})}


def test_the_jobs_after_the_measurements_go_where_the_sites_measurements_went():
    """parse and aggregate under Slurm: the partition, account and qos of the (first) Slurm testbed, not
    the profile's default partition of the local cluster, which a site does not have."""
    from hpcvirt.slurm import post_resources

    _, testbeds = load_study(_merged("config/tiny.yaml") | {"testbeds": ["local", "example-site"]},
                             testbed_dir=ROOT / "config/testbeds")
    site = {"slurm_partition": "compute", "slurm_account": "myproject", "qos": "normal"}
    assert post_resources([testbeds["local"], testbeds["example-site"]]) == site
    assert post_resources([testbeds["local"]]) == {}
    two = load_study(_merged("config/tiny.yaml", "config/two-nodes.yaml"), testbed_dir=ROOT / "config/testbeds")[1]
    assert post_resources(list(two.values())) == {"slurm_partition": "local"}


@pytest.mark.parametrize("text, minutes", [("infinite", float("inf")), ("UNLIMITED", float("inf")), ("45", 45),
                                           ("30:00", 30), ("2:00:00", 120), ("1-00:00:00", 1440), ("1-12", 2160),
                                           ("2-03:04", 3064), ("0:59", 0)])
def test_a_partitions_time_limit_is_read_as_sinfo_prints_it(text, minutes):
    from hpcvirt.slurm import limit_minutes

    assert limit_minutes(text) == minutes
    with pytest.raises(ValueError, match="not a Slurm time limit"):
        limit_minutes("1 day")


def test_the_dry_run_says_how_long_a_sites_measurements_ask_for_in_all():
    from hpcvirt.matrix import all_raw_paths
    from hpcvirt.slurm import absent_paths, allocation_note

    study, testbeds = load_study(_merged() | {"campaign": "site", "testbeds": ["example-site"]},
                                 testbed_dir=ROOT / "config/testbeds")
    missing = all_raw_paths(study)
    note = allocation_note(testbeds, missing)
    hours = len(missing) * testbeds["example-site"]["slurm"]["runtime_min"] / 60
    assert note[0] == (f"example-site: {len(missing)} measurements under Slurm, 10 min each (slurm.runtime_min), "
                       f"{hours:.1f} h in all; group-components example-site.n2=K puts K of them in one allocation "
                       "of -t K x 10 min (choose K for the partition's time limit; without an entry each is an "
                       "allocation of its own)")
    # the example's placeholder prefixes are not on this machine: named before anything waits in a queue
    assert note[1].startswith("example-site: 15 paths of its testbed file are not on this machine: "
                              "mpi.openmpi.netpipe.binary /opt/spack/openmpi-ucx/netpipe-3.7.2/bin/NPmpi; ") and \
        note[1].endswith("; mpi.mpich.imb.binary /opt/spack/mpich/intel-mpi-benchmarks-2021.3/bin/IMB-MPI1 (replace "
                         "the placeholders; a measurement whose binary the nodes lack fails there, after its wait in "
                         "the queue)") and len(note[1].split(" (replace")[0].split("; ")) == 15 and len(note) == 2
    assert allocation_note(testbeds, missing[:0]) == []          # nothing to measure: nothing to say
    # a path this machine has is not named; one of the environment is
    tb = testbeds["example-site"]
    tb["mpi"]["openmpi"]["osu"]["binary"] = str(ROOT)
    assert "mpi.openmpi.osu.binary" not in allocation_note(testbeds, missing)[1]
    # a relative binary is the clone's: named when the clone lacks it, but for what the workflow builds
    tb["mpi"]["openmpi"]["osu"]["binary"] = "site/osu/libexec"
    assert "mpi.openmpi.osu.binary site/osu/libexec (relative to the clone)" in absent_paths(tb)
    assert not [p for p in absent_paths(tb) if "advect" in p or "openfoam-dambreak" in p]
    assert absent_paths(tb)[-1] == "mpi.mpich.imb.binary /opt/spack/mpich/intel-mpi-benchmarks-2021.3/bin/IMB-MPI1"
    assert "mpi.openmpi.qe.env.HPCVIRT_QE_PW /opt/spack/openmpi-ucx/quantum-espresso-6.7/bin/pw.x" in absent_paths(tb)
    # a binary named alone is looked up on PATH: named when this machine's PATH lacks it
    tb["mpi"]["openmpi"]["netpipe"]["binary"] = tb["mpi"]["mpich"]["netpipe"]["binary"] = "NPopenmpi"
    assert not [p for p in absent_paths(tb) if "netpipe" in p]          # NPopenmpi: Debian's, here
    tb["mpi"]["openmpi"]["netpipe"]["binary"] = "NPsite-openmpi"
    assert "mpi.openmpi.netpipe.binary NPsite-openmpi (not on this machine's PATH)" in absent_paths(tb)
    local = load_study(_merged() | {"campaign": "x", "testbeds": ["local-slurm"], "skip_unoffered": True},
                       testbed_dir=ROOT / "config/testbeds")
    assert absent_paths(local[1]["local-slurm"]) == []     # its suites are the workflow's builds, below the clone


def _bomb(levels: int = 9) -> str:
    """A "billion laughs" document: each level lists the one before nine times."""
    out = 'l0: &l0 ["x", "x", "x", "x", "x", "x", "x", "x", "x"]\n'
    for i in range(1, levels + 1):
        out += f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]\n"
    return out


LOCAL_TEXT = (ROOT / "config/testbeds/local.yaml").read_text()
OPENMPI_LAUNCHER = 'launcher: [mpirun, -np, "{ranks}",'
# Files a YAML parser reads but a configuration must not be: (the testbed file's bytes, substrings of the message)
BAD_YAML_TESTBED = [
    ((LOCAL_TEXT + "kind: qemu\n").encode(), ["local.yaml: kind: duplicate key at line", "first at line 5"]),
    (LOCAL_TEXT.replace("  openmpi:\n", "  openmpi:\n    launcher: [mpirun]\n").encode(),
     ["local.yaml: mpi.openmpi.launcher: duplicate key"]),
    (LOCAL_TEXT.replace("  mpich:\n", "  openmpi: {}\n  mpich:\n").encode(), ["local.yaml: mpi.openmpi: duplicate key"]),
    (LOCAL_TEXT.replace("qperf:\n", "qperf: {port: 1, port: 2}\nqperf2:\n").encode(),
     ["local.yaml: qperf.port: duplicate key"]),
    (LOCAL_TEXT.replace("no hypervisor", "no hyperv\xe9sor").encode("latin-1"),
     ["local.yaml: not UTF-8 (byte 0xe9 at line"]),
    (b"\xff\xfe" + LOCAL_TEXT.encode("utf-16-le"), ["local.yaml: not UTF-8"]),
    ((LOCAL_TEXT + "#" * (2 << 20) + "\n").encode(), ["local.yaml: larger than the 1048576 bytes"]),
    (LOCAL_TEXT.replace('description: "', 'description: "' + "x" * 70_000).encode(),
     ["local.yaml: description: a value of 70", "at most 65536"]),
    ((LOCAL_TEXT + _bomb()).encode(), ["local.yaml: l", "expands to more than 100000 values"]),
    ((LOCAL_TEXT + "loop: &loop [*loop]\n").encode(), ["local.yaml: loop", "nested deeper than 64 levels"]),
    ((LOCAL_TEXT + "deep: " + "[" * 200_000 + "\n").encode(), ["local.yaml: nested deeper than 64 levels"]),
    (LOCAL_TEXT.replace(OPENMPI_LAUNCHER, 'launcher: [mpirun, -np, "{ranks:s}",').encode(),
     ["local.yaml: mpi.openmpi.launcher[2]: placeholder {ranks} takes no format spec", "'{ranks:s}'"]),
    (LOCAL_TEXT.replace(OPENMPI_LAUNCHER, 'launcher: [mpirun, -np, "{ranks:0999999999}",').encode(),
     ["local.yaml: mpi.openmpi.launcher[2]: placeholder {ranks} takes no format spec", "0999999999"]),
    (LOCAL_TEXT.replace(OPENMPI_LAUNCHER, 'launcher: [mpirun, -np, "{ranks:{nodes}}",').encode(),
     ["local.yaml: mpi.openmpi.launcher[2]: placeholder {ranks} takes no format spec"]),
    (LOCAL_TEXT.replace(OPENMPI_LAUNCHER, 'launcher: [mpirun, -np, "{ranks",').encode(),
     ["local.yaml: mpi.openmpi.launcher[2]: '{ranks' is not a template"]),
    (LOCAL_TEXT.replace(OPENMPI_LAUNCHER, 'launcher: [mpirun, -np, "{}",').encode(),
     ["local.yaml: mpi.openmpi.launcher[2]: placeholder {} is not one of"]),
    ((LOCAL_TEXT + "1: x\n").encode(), ["local.yaml: 1: a key that is not a string (line"]),
    (LOCAL_TEXT.replace("\nmpi:\n", "\nmpi:\n  yes: {launcher: [x], paths: {shm: {}}}\n", 1).encode(),
     ["local.yaml: mpi.yes: a key that is not a string", "quote it"]),
    (LOCAL_TEXT.replace("btl_tcp_if_include, lo]", 'btl_tcp_if_include, lo, "{block:09}"]').encode(),
     ["local.yaml: mpi.openmpi.paths.tcp.args[9]: placeholder {block} takes no format spec"]),
]


def refused_quickly(tmp_path, name: str, data: bytes, original: str, needles, **load) -> None:
    """``data`` written as ``tmp_path/name`` makes load_study fail within 5 s, naming ``needles``, writing nothing."""
    assert data != original.encode()
    (tmp_path / name).write_bytes(data)
    start = time.monotonic()
    with pytest.raises(ConfigError) as exc:
        load_study(**load)
    assert time.monotonic() - start < 5
    for needle in needles:
        assert needle in str(exc.value), str(exc.value)[:500]
    assert len(str(exc.value)) < 1000       # the error names the problem, it does not repeat the input
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]       # nothing written


@pytest.mark.parametrize("data,needles", BAD_YAML_TESTBED)
def test_unsafe_testbed_file_is_refused_quickly(data, needles, tmp_path):
    refused_quickly(tmp_path, "local.yaml", data, LOCAL_TEXT, needles, config=copy.deepcopy(LOCAL_STUDY),
                    config_path="config/config.yaml", testbed_dir=tmp_path)


STUDY_TEXT = (ROOT / "config/config.yaml").read_text()
BAD_YAML_STUDY = [
    ((STUDY_TEXT + "repetitions: 1\n").encode(), ["config.yaml: repetitions: duplicate key"]),
    (STUDY_TEXT.replace("experiments:\n", "experiments:\n  pingpong: {enabled: false}\n", 1).encode(),
     ["config.yaml: experiments.pingpong: duplicate key"]),
    (STUDY_TEXT.encode() + b"# \xc3\x28\n", ["config.yaml: not UTF-8 (byte 0xc3 at line"]),
    (STUDY_TEXT.replace('\ncampaign: "', '\ncampaign: "other"\ncampaign: "', 1).encode(),
     ["config.yaml: campaign: duplicate key"]),
    ((STUDY_TEXT + "bomb:\n" + "".join("  " + line + "\n" for line in _bomb().splitlines())).encode(),
     ["config.yaml: bomb.l", "expands to more than 100000 values"]),
]


@pytest.mark.parametrize("data,needles", BAD_YAML_STUDY)
def test_unsafe_study_file_is_refused_quickly(data, needles, tmp_path):
    refused_quickly(tmp_path, "config.yaml", data, STUDY_TEXT, needles, config_path=tmp_path / "config.yaml",
                    testbed_dir=ROOT / "config/testbeds")


def test_the_base_of_a_testbed_is_read_as_safely(tmp_path):
    (tmp_path / "local.yaml").write_text(LOCAL_TEXT + "nodes: 1\n")
    (tmp_path / "mine.yaml").write_text("extends: local\nname: mine\n")
    with pytest.raises(ConfigError, match=r"local.yaml: nodes: duplicate key"):
        load_testbed(tmp_path / "mine.yaml")


def test_the_reference_files_are_read_as_safely(tmp_path):
    from hpcvirt import claims

    (tmp_path / "claims.yaml").write_text("- id: EXP-1\n  id: EXP-2\n")
    with pytest.raises(claims.ClaimError, match=r"claims.yaml: cannot read: \[0\].id: duplicate key at line 2"):
        claims.load(tmp_path / "claims.yaml")


def test_every_shipped_yaml_file_reads_as_before():
    """The checks refuse nothing the repository ships, and build the same values as yaml.safe_load."""
    from hpcvirt import yamlio

    # what git tracks (a walk of the tree would enter the image builds' root filesystems under .hpcvirt/)
    tracked = subprocess.run(["git", "ls-files", "-z", "--", "*.yaml"], cwd=ROOT, capture_output=True, check=True)
    files = [ROOT / p for p in tracked.stdout.decode().split("\0") if p]
    assert len(files) > 20
    for path in files:
        assert yamlio.load_file(path) == yaml.safe_load(path.read_text()), path


def test_a_layer_with_a_yaml_syntax_error_is_named_with_its_line_before_snakemake_reads_it(tmp_path):
    """Snakemake reads --configfile layers before the workflow loads and names neither file nor line;
    make figure LAYER= first reads the layer as the workflow does (python -m hpcvirt.config)."""
    bad = tmp_path / "layer.yaml"
    bad.write_text("experiments:\n  pingpong:\n    mpis: [openmpi\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT / "workflow/lib"))
    res = subprocess.run([sys.executable, "-m", "hpcvirt.config", str(bad)], capture_output=True, text=True, env=env)
    assert res.returncode == 1 and res.stderr.startswith(f"{bad}: not valid YAML: while parsing a flow sequence")
    assert "line 3, column 11" in res.stderr
    (tmp_path / "dup.yaml").write_text("campaign: a\ncampaign: b\n")
    res = subprocess.run([sys.executable, "-m", "hpcvirt.config", str(ROOT / "config/tiny.yaml"),
                          str(tmp_path / "dup.yaml")], capture_output=True, text=True, env=env)
    assert res.returncode == 1 and res.stderr.startswith(f"{tmp_path / 'dup.yaml'}: campaign: duplicate key")
    # an empty layer, or a list: named (Snakemake's message names neither file nor line)
    from hpcvirt.config import check_files

    for text in ("", "- a\n- b\n"):
        (tmp_path / "top.yaml").write_text(text)
        res = subprocess.run([sys.executable, "-m", "hpcvirt.config", str(tmp_path / "top.yaml")], capture_output=True,
                             text=True, env=env)
        assert res.returncode == 1 and "top.yaml: empty, or not a mapping of keys to values" in res.stderr
        with pytest.raises(ConfigError, match=r"top.yaml: empty, or not a mapping of keys to values at its top level"):
            check_files([str(ROOT / "config/config.yaml"), str(tmp_path / "top.yaml")])


def test_a_value_that_ends_in_a_newline_does_not_match_a_pattern(tmp_path):
    """Python's ``$`` matches before a final newline, so ``^[a-z]+$`` took ``"mpirun\\n"``: every pattern of the
    schemas holds to the string's end (a launcher word, an environment value, the campaign)."""
    bad = tmp_path / "local.yaml"
    bad.write_text(LOCAL_TEXT.replace(OPENMPI_LAUNCHER, 'launcher: ["mpirun\\n", -np, "{ranks}",'))
    with pytest.raises(ConfigError, match=r"local.yaml: mpi.openmpi.launcher\[0\]: 'mpirun\\n' does not match"):
        load_testbed(bad, load_schema("testbed.schema.yaml"))
    with pytest.raises(ConfigError, match=r"campaign: 'c1\\n' does not match the allowed pattern"):
        load_study(dict(copy.deepcopy(LOCAL_STUDY), campaign="c1\n"), config_path="config/config.yaml",
                   testbed_dir=ROOT / "config/testbeds")
    load_testbed(ROOT / "config/testbeds/local.yaml", load_schema("testbed.schema.yaml"))      # the real one passes
