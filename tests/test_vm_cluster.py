"""A VM cluster (kind vm-cluster: a cloud's or a site's virtual machines, launched as on bare metal) beside a
bare-metal Slurm site: its testbed file, its rows' label, and the paper's comparison of the two."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest
import yaml

from hpcvirt.analysis import comparisons
from hpcvirt.config import ConfigError, load_schema, load_study, load_testbed
from hpcvirt.tables import overheads_tex
from hpcvirt.testbeds import kind, launch

ROOT = Path(__file__).resolve().parents[1]
TESTBEDS = ROOT / "config/testbeds"


def _site_and_cloud():
    cfg = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    cfg.update(campaign="site-vs-cloud", testbeds=["example-site", "example-cloud"])
    return load_study(cfg, config_path=ROOT / "config/config.yaml", testbed_dir=TESTBEDS)


def test_the_example_vm_cluster_launches_as_the_site_does_and_labels_its_rows_with_its_hypervisor():
    from hpcvirt.matrix import configurations

    study, tbs = _site_and_cloud()
    cloud, site = tbs["example-cloud"], tbs["example-site"]
    assert cloud["kind"] == "vm-cluster" and kind(cloud).virtualization() == "vm-kvm"
    assert kind(site).virtualization() == "none"
    runs = {tb: {(c.benchmark, c.params): c for c in configurations(study) if c.testbed == tb} for tb in tbs}
    # the same study on both (no by_kind settings of its own), the same srun words but the interface
    assert runs["example-cloud"].keys() == runs["example-site"].keys() and len(runs["example-site"]) > 20
    key = next(k for k in runs["example-cloud"] if k[0] == "netpipe" and runs["example-cloud"][k].settings.get("path") == "net")
    a, b = launch(runs["example-cloud"][key], cloud), launch(runs["example-site"][key], site)
    assert a.argv[:2] == ["srun", "--mpi=pmix"] and a.interconnect == b.interconnect == "tcp"
    assert "OMPI_MCA_btl_tcp_if_include=ens5" in a.argv
    assert [w.replace("ens5", "eth0") for w in a.argv] == b.argv


def _copies(tmp_path: Path, edit: str, old: str, new: str) -> Path:
    """The two example testbed files in ``tmp_path``, the text ``old`` of file ``edit`` replaced by ``new``."""
    for name in ("example-site", "example-cloud"):
        shutil.copy(TESTBEDS / f"{name}.yaml", tmp_path)
    edited = tmp_path / f"{edit}.yaml"
    edited.write_text(edited.read_text().replace(old, new))
    return edited


def test_a_hypervisor_is_required_on_a_vm_cluster_and_refused_elsewhere(tmp_path):
    schema = load_schema("testbed.schema.yaml")
    cloud = _copies(tmp_path, "example-cloud", "\nhypervisor: kvm", "\n")
    with pytest.raises(ConfigError, match=r"example-cloud.yaml: \(top level\): 'hypervisor' is a required property "
                                          r"\(a testbed of kind vm-cluster names its hypervisor\)"):
        load_testbed(cloud, schema)
    site = tmp_path / "example-site.yaml"
    site.write_text(site.read_text().replace("\nkind: native\n", "\nkind: native\nhypervisor: kvm\n"))
    with pytest.raises(ConfigError, match=r"example-site.yaml: hypervisor: 'kvm' is not allowed here "
                                          r"\(a key of kind vm-cluster only\)"):
        load_testbed(site, schema)
    cloud.write_text(cloud.read_text().replace("\nkind: vm-cluster\n", "\nkind: vm-cluster\nhypervisor: KVM;x\n"))
    with pytest.raises(ConfigError, match=r"hypervisor: 'KVM;x' does not match the allowed pattern"):
        load_testbed(cloud, schema)


def _tidy_site_and_cloud() -> pd.DataFrame:
    """NetPIPE rows of the archive's bare host, given to a bare-metal site (between its nodes, and its
    loopback) and to a VM cluster (between its nodes, 10 us slower, on another machine)."""
    study = load_study(config_path=ROOT / "config/config.yaml", testbed_dir=TESTBEDS)[0]
    tidy = pd.read_csv(ROOT / "data/results" / study["campaign"] / "local/tidy.csv")
    base = tidy[(tidy["benchmark"] == "netpipe") & (tidy["mpi"] == "openmpi")
                & (tidy["interconnect"] == "tcp-loopback")]
    assert base["rep"].nunique() >= 3
    loop = base.assign(testbed="example-site")
    site = base.assign(testbed="example-site", interconnect="tcp")
    cloud = base.assign(testbed="example-cloud", kind="vm-cluster", virtualization="vm-kvm", interconnect="tcp",
                        host="0123456789abcdef")
    cloud.loc[cloud["metric"] == "latency", "value"] += 10.0
    return pd.concat([loop, site, cloud], ignore_index=True)


def test_the_vm_cluster_is_compared_with_the_sites_path_between_nodes_and_marked_as_another_machine():
    tidy = _tidy_site_and_cloud()
    pairs = [(s, r) for k, s, r in comparisons(tidy) if k == "virt-vs-native"]
    assert [(s["testbed"], s["interconnect"], r["testbed"], r["interconnect"]) for s, r in pairs] == \
        [("example-cloud", "tcp", "example-site", "tcp")]
    table = overheads_tex(tidy, latency_bytes=8)
    row = next(line for line in table.splitlines() if line.startswith("example-cloud (vm-kvm)"))
    assert row.startswith("example-cloud (vm-kvm): Open MPI, TCP & example-site: Open MPI, TCP & 10.0")
    assert row.endswith("$^\\dagger$ \\\\")
    assert "on different machines, rounds paired by index)" in table
    # one machine (the archive's testbeds): no mark
    same = tidy.assign(host=tidy["host"].iloc[0])
    assert "dagger" not in overheads_tex(same, latency_bytes=8)


def test_the_vm_cluster_is_never_compared_with_another_fabric_nor_with_this_laptop():
    """An InfiniBand site and a TCP cloud: the cloud's TCP between nodes has no reference (not the site's
    loopback); with the laptop's bare host in the same campaign, the cloud's loopback is compared with the
    site's, not with the laptop's, and the laptop's guests still with the laptop."""
    tidy = _tidy_site_and_cloud()
    ib_site = tidy.assign(interconnect=tidy["interconnect"].where(tidy["testbed"] != "example-site",
                                                                  tidy["interconnect"].replace({"tcp": "ib"})))
    assert [k for k, s, _ in comparisons(ib_site) if k == "virt-vs-native" and s["interconnect"] == "tcp"] == []
    site_loop = tidy[(tidy["testbed"] == "example-site") & (tidy["interconnect"] == "tcp-loopback")]
    laptop = site_loop.assign(testbed="a-laptop")           # first by name: a tie would pick it
    cloud_loop = tidy[tidy["testbed"] == "example-cloud"].assign(interconnect="tcp-loopback")
    guests = site_loop.assign(testbed="vm", kind="qemu", virtualization="qemu-tcg", interconnect="tcp")
    pairs = {(s["testbed"], s["interconnect"]): r["testbed"]
             for k, s, r in comparisons(pd.concat([tidy, laptop, cloud_loop])) if k == "virt-vs-native"}
    assert pairs == {("example-cloud", "tcp"): "example-site", ("example-cloud", "tcp-loopback"): "example-site"}
    alone = {(s["testbed"], s["interconnect"]): r["testbed"]
             for k, s, r in comparisons(pd.concat([laptop, guests])) if k == "virt-vs-native"}
    assert alone == {("vm", "tcp"): "a-laptop"}


def test_npb_on_the_vm_cluster_is_timed_against_the_sites_same_path_one_path_at_a_time():
    from hpcvirt.benchmarks.npb import npb_ratios

    study = load_study(config_path=ROOT / "config/config.yaml", testbed_dir=TESTBEDS)[0]
    tidy = pd.read_csv(ROOT / "data/results" / study["campaign"] / "local/tidy.csv")
    cg = tidy[(tidy["benchmark"] == "npb-cg") & (tidy["ranks"] == 4)]
    site_shm = cg.assign(testbed="example-site")
    site_net = cg.assign(testbed="example-site", interconnect="tcp")
    site_net.loc[site_net["metric"] == "mops_total", "value"] /= 2          # between nodes: half the rate
    cloud = site_net.assign(testbed="example-cloud", kind="vm-cluster", virtualization="vm-kvm")
    cloud.loc[cloud["metric"] == "mops_total", "value"] /= 1.25              # and the VMs 1.25 times slower
    r = npb_ratios(pd.concat([site_shm, site_net, cloud], ignore_index=True))
    got = {(x.testbed, x.interconnect, x.reference): round(x.ratio, 6) for x in r.itertuples()}
    assert got == {("example-cloud", "tcp", "example-site"): 1.25, ("example-site", "shm", "example-site"): 1.0,
                   ("example-site", "tcp", "example-site"): 1.0}


def test_the_applications_table_of_a_site_and_its_vm_cluster_names_their_classes():
    """MILC rows of the archive given to a bare-metal site (its shared memory, and between its nodes) and to a
    VM cluster: the applications' table labels them by what they are, not by this host's stand-ins."""
    from hpcvirt.labels import interconnect_class
    from hpcvirt.tables import apps_tex

    study = load_study(config_path=ROOT / "config/config.yaml", testbed_dir=TESTBEDS)[0]
    res = ROOT / "data/results" / study["campaign"]
    tidy = pd.concat([pd.read_csv(res / f"{tb}/tidy.csv") for tb in ("local", "bridge")], ignore_index=True)
    milc = tidy[(tidy["benchmark"] == "milc") & (tidy["variant"] == "6x6x8x8 x1")]
    shm = milc[milc["testbed"] == "local"].assign(testbed="example-site")
    net = milc[milc["testbed"] == "bridge"]
    assert len(shm) and len(net)
    site = net.assign(testbed="example-site", kind="native", virtualization="none", link="")
    cloud = net.assign(testbed="example-cloud", kind="vm-cluster", virtualization="vm-kvm", link="")
    tex = apps_tex(pd.concat([shm, site, cloud], ignore_index=True))
    assert "& network & 2 &" in tex and "& VM cluster (kvm) & 2 &" in tex, tex
    assert "the testbeds' own paths" in tex and "InfiniBand" not in tex and "guests" not in tex
    assert "rounds are paired by index" in tex
    assert interconnect_class("vm-kvm", "shm", "") == "VM cluster (kvm), shared memory"
    assert interconnect_class("none", "tcp", "") == "network"
    from hpcvirt.labels import datapath_label

    assert datapath_label("vm-kvm", "") == "VM cluster (kvm)" and datapath_label("qemu-kvm", "") == "guests"


def test_a_site_plan_holds_no_one_rank_network_run_nor_more_ranks_on_a_node_than_it_offers(tmp_path):
    """The study's NPB ranks [1, 2, 4] on paths [shm, net]: one rank has no one to send to over the network,
    so the plan has no such configuration; a configuration that puts more ranks on a node than the testbed's
    ranks_per_node is refused before Slurm would leave it pending; a Slurm testbed must not isolate its
    ranks in an empty namespace (srun)."""
    from hpcvirt.matrix import configurations
    from hpcvirt.slurm import allocation

    study, tbs = _site_and_cloud()
    site = [c for c in configurations(study) if c.testbed == "example-site"]
    assert any(c.benchmark == "npb" and c.settings["path"] == "net" for c in site)
    assert not [c for c in site if c.settings.get("path") == "net" and int(c.settings.get("ranks", 2)) < 2]
    assert allocation(tbs["example-site"], site)["tasks_per_node"] == 4
    with pytest.raises(ValueError, match=r"testbed example-site: \d+ measurement configurations put more ranks on "
                                         r"one node than its ranks_per_node \(2\), e\.g\. .* with 4: Slurm would "
                                         r"not start them"):
        allocation(dict(tbs["example-site"], ranks_per_node=2), site)
    schema = load_schema("testbed.schema.yaml")
    bad = tmp_path / "example-site.yaml"
    bad.write_text((TESTBEDS / "example-site.yaml").read_text().replace("isolation: none", "isolation: netns"))
    with pytest.raises(ConfigError, match=r"isolation: 'none' was expected \(a Slurm testbed's ranks start through "
                                          r"srun, which cannot reach slurmd from an empty network namespace"):
        load_testbed(bad, schema)


def test_a_sites_openfoam_case_is_its_own():
    """OpenFOAM's damBreak case comes from the testbed's installation (mpi.<mpi>.openfoam.case), not Debian's."""
    from hpcvirt.benchmarks.openfoam import CASE
    from hpcvirt.matrix import configurations

    study, tbs = _site_and_cloud()
    c = next(c for c in configurations(study) if c.testbed == "example-site" and c.benchmark == "openfoam")
    argv = launch(c, tbs["example-site"]).argv
    assert tbs["example-site"]["mpi"]["openmpi"]["openfoam"]["case"] in argv and CASE not in argv


def test_an_error_in_a_key_an_extended_file_gives_names_both_files(tmp_path):
    _copies(tmp_path, "example-site", "account: myproject", "account: 'my project'")
    with pytest.raises(ConfigError, match=r"example-site\.yaml \+ \S+example-cloud\.yaml: slurm\.account: 'my project' "
                                          r"does not match the allowed pattern"):
        load_testbed(tmp_path / "example-cloud.yaml", load_schema("testbed.schema.yaml"))


def test_a_sites_declared_fabric_names_its_rows_and_labels_and_is_refused_where_it_means_nothing(tmp_path):
    """A site's net over InfiniBand verbs (fabric: ib) gives rows of interconnect ib, labelled InfiniBand,
    compared with a VM cluster over the same fabric; fabric on shm/tcp, or on the project's own bridge,
    is refused before any job."""
    from hpcvirt.labels import interconnect_class, path_label
    from hpcvirt.matrix import configurations

    for other in TESTBEDS.glob("*.yaml"):    # the study names them all (skip_testbeds)
        shutil.copy(other, tmp_path)
    site = _copies(tmp_path, "example-site", '"OMPI_MCA_btl=self,tcp", OMPI_MCA_btl_tcp_if_include=eth0]\n',
                   '"UCX_TLS=rc,self", UCX_NET_DEVICES=mlx5_0:1]\n        fabric: ib\n')
    site.write_text(site.read_text().replace("OMPI_MCA_pml=ob1, \"UCX_TLS", "OMPI_MCA_pml=ucx, \"UCX_TLS")
                    .replace("        fabric: tcp\n", "", 1))
    cfg = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    cfg.update(campaign="site-vs-cloud", testbeds=["example-site", "example-cloud"])
    study, tbs = load_study(cfg, config_path=ROOT / "config/config.yaml", testbed_dir=tmp_path)
    runs = [c for c in configurations(study) if c.testbed == "example-site" and c.benchmark == "netpipe"]
    by_path = {(c.settings["mpi"], c.settings["path"]): launch(c, tbs["example-site"]).interconnect for c in runs}
    assert by_path[("openmpi", "net")] == "ib"
    assert by_path[("openmpi", "shm")] == "shm" and by_path[("openmpi", "tcp")] == "tcp-loopback"
    assert interconnect_class("none", "ib", "") == "InfiniBand" and path_label("ipoib") == "TCP over InfiniBand"
    assert interconnect_class("vm-kvm", "ib", "") == "VM cluster (kvm), InfiniBand"
    # the VM cluster's InfiniBand rows are compared with the site's, not with its TCP
    tidy = _tidy_site_and_cloud()
    ib = tidy.assign(interconnect=tidy["interconnect"].replace({"tcp": "ib"}))
    pairs = [(s, r) for k, s, r in comparisons(pd.concat([tidy, ib])) if k == "virt-vs-native"]
    assert sorted((s["interconnect"], r["interconnect"]) for s, r in pairs) == [("ib", "ib"), ("tcp", "tcp")]

    schema = load_schema("testbed.schema.yaml")
    refused = [   # (file, text, the text with a fabric, what the error says)
        ("example-site", '"OMPI_MCA_btl=self,vader"]\n', '"OMPI_MCA_btl=self,vader"]\n        fabric: ib\n',
         r"example-site.yaml: mpi.openmpi.paths.shm: .* is not allowed here \(fabric: the path between nodes "
         r"\(net\) only"),
        ("bridge", "      net:\n", "      net:\n        fabric: ib\n",
         r"bridge.yaml: mpi.openmpi.paths.net: .* is not allowed here \(fabric names a site's or a cloud's network"),
        ("example-site", "        fabric: tcp\n", "        fabric: infiniband\n",
         r"fabric: 'infiniband' is not one of \['tcp', 'ipoib', 'ib', 'roce'\]"),
        # a fabric the path's own settings contradict: TCP labelled InfiniBand, RDMA labelled TCP
        ("example-site", "        fabric: tcp\n", "        fabric: ib\n",
         r"example-site.yaml: mpi.openmpi.paths.net.fabric: 'ib', but its args/env let the MPI use TCP only "
         r"\(OMPI_MCA_pml=ob1, OMPI_MCA_btl=self,tcp\)"),
        ("example-site", 'UCX_TLS: "tcp,self"\n          UCX_NET_DEVICES: eth0', 'UCX_TLS: "rc_x,self"\n          '
         'UCX_NET_DEVICES: eth0', r"mpi.mpich.paths.net.fabric: 'tcp', but its env tells UCX to use RDMA \(rc_x in "
         r"UCX_TLS\): say fabric: ib or roce"),
    ]
    for name, old, new, message in refused:
        bad = tmp_path / f"{name}.yaml"
        bad.write_text((tmp_path / f"{name}.yaml").read_text().replace(old, new, 1))
        with pytest.raises(ConfigError, match=message):
            load_testbed(bad, schema)
        bad.write_text((TESTBEDS / f"{name}.yaml").read_text())      # as it was
    # a VM cluster that changes the InfiniBand site's path to TCP but keeps its fabric (ib) by extends
    ib_site = _copies(tmp_path, "example-site", '"OMPI_MCA_btl=self,tcp", OMPI_MCA_btl_tcp_if_include=eth0]\n',
                      '"UCX_TLS=rc,self", UCX_NET_DEVICES=mlx5_0:1]\n')
    ib_site.write_text(ib_site.read_text().replace("OMPI_MCA_pml=ob1, \"UCX_TLS", "OMPI_MCA_pml=ucx, \"UCX_TLS")
                       .replace("        fabric: tcp\n", "        fabric: ib\n", 1))
    load_testbed(ib_site, schema)
    cloud = tmp_path / "example-cloud.yaml"
    cloud.write_text(cloud.read_text().replace("        fabric: tcp\n", "", 1))
    with pytest.raises(ConfigError, match=r"example-cloud.yaml: mpi.openmpi.paths.net.fabric: 'ib', .*TCP only.* "
                                          r"\(a file that extends example-site inherits its fabric with any path"):
        load_testbed(cloud, schema)


def test_a_vm_cluster_places_the_stencils_ranks_through_its_launcher_too(tmp_path):
    """Like a bare-metal cluster, a VM cluster places ranks with launcher arguments: without {block} every
    placement of the stencil would run the same command, so the file is refused before any job."""
    schema = load_schema("testbed.schema.yaml")
    cloud = _copies(tmp_path, "example-cloud", "\nmpi:\n  openmpi:\n",
                    "\nmpi:\n  openmpi:\n    advect: {binary: .hpcvirt/bin/advect-openmpi, args: []}\n")
    with pytest.raises(ConfigError, match=r"example-cloud.yaml: mpi.openmpi.advect.args: a vm-cluster testbed with "
                                          r"several nodes places ranks through launcher arguments and needs one "
                                          r"with '\{block\}'"):
        load_testbed(cloud, schema)
