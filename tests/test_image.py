"""hpcvirt.image: the suites Spack installs into the offline container image
(which builds, the records a run and the preflight read, and, e2e, the built
image itself: Spack's tree with the lock's hashes, runs with nothing bound)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from hpcvirt import build, image, measure, runtime, spack
from hpcvirt.matrix import Configuration

ROOT = Path(__file__).resolve().parents[1]
OFFLINE_IMAGE = Path(os.environ.get("HPCVIRT_OFFLINE_IMAGE", ROOT / ".hpcvirt" / "images" / "offline.sqfs"))


def test_the_image_carries_what_the_container_testbeds_name():
    got = image.builds()
    # local-container and local-apptainer name IMB, OSU and NPB for both MPIs (NPB's profiler is in npb-openmpi)
    assert got == [(s, m) for s in ("imb", "npb", "osu") for m in ("mpich", "openmpi")]
    assert ("milc", "openmpi") not in got      # no container testbed names MILC


def test_builds_reads_only_testbeds_with_a_container_runtime(tmp_path, monkeypatch):
    monkeypatch.setenv("HPCVIRT_ROOT", str(tmp_path))
    (tmp_path / "tb").mkdir()
    (tmp_path / "tb/a.yaml").write_text("runtime: {kind: apptainer}\nmpi: {openmpi: {imb: {binary: "
                                        "/opt/hpcvirt/suites/imb-openmpi/bin/IMB-MPI1}}}\n")
    (tmp_path / "tb/b.yaml").write_text("runtime: {kind: none}\nmpi: {mpich: {osu: {binary: "
                                        "/opt/hpcvirt/suites/osu-mpich/libexec}}}\n")
    (tmp_path / "tb/c.yaml").write_text("mpi: {openmpi: {npb: {binary: .hpcvirt/suites/npb-openmpi/bin}}}\n")
    assert image.builds("tb") == [("imb", "openmpi")]


def _records(tmp_path: Path, hashes: dict[str, str]) -> Path:
    img = tmp_path / "img.sqfs"
    img.write_bytes(b"x")
    recs = {"lock": "spack-envs/laptop/spack.lock", "lock_sha256": "0" * 64, "tree": image.TREE,
            "builds": {k: {"suite": k.split("-")[0], "spack": {"hash": h, "prefix": f"{image.TREE}/x-{h}"},
                           "dir": f"{image.SUITES}/{k}"} for k, h in hashes.items()}}
    (tmp_path / "img.sqfs.suites.json").write_text(json.dumps(recs))
    return img


def _lock_hashes() -> dict[str, str]:
    return {f"{s}-{m}": build.root_of(s, m)["hash"] for s, m in image.builds()}


def test_check_accepts_an_image_with_the_locks_hashes(tmp_path):
    img = _records(tmp_path, _lock_hashes())
    assert set(image.check(img)["builds"]) == set(_lock_hashes())


def test_check_names_the_build_that_differs_and_how_to_rebuild(tmp_path):
    hashes = _lock_hashes()
    hashes["osu-openmpi"] = "a" * 32
    with pytest.raises(image.ImageError, match=r"osu-openmpi is Spack /aaaaaaa.*spack.lock says /.*forcerun "
                                               r"build_offline_image"):
        image.check(_records(tmp_path, hashes))
    del hashes["osu-openmpi"]
    with pytest.raises(image.ImageError, match="osu-openmpi is Spack /-"):
        image.check(_records(tmp_path, hashes))


def test_check_refuses_an_image_without_records(tmp_path):
    (tmp_path / "old.sqfs").write_bytes(b"x")
    with pytest.raises(image.ImageError, match="no record of the suites"):
        image.check(tmp_path / "old.sqfs")


def test_a_run_in_the_image_records_the_images_build(tmp_path):
    img = _records(tmp_path, {"imb-openmpi": "b" * 32})
    rt = {"kind": "charliecloud", "image": str(img)}
    assert image.record(rt, "imb", "openmpi")["spack"]["prefix"] == f"{image.TREE}/x-{'b' * 32}"
    assert image.record(rt, "osu", "openmpi") is None
    assert image.record({"kind": "none"}, "imb", "openmpi") is None
    # the measurement keeps it as the run's build (not the host's)
    tb = {"name": "t", "runtime": rt, "mpi": {"openmpi": {"imb": {"binary": "/opt/hpcvirt/suites/imb-openmpi/bin/IMB-MPI1"}}}}
    c = Configuration(testbed="t", benchmark="imb", params="p", settings={"mpi": "openmpi"})
    got = measure.ensure_binary(tb, c)
    assert got["build"]["spack"]["hash"] == "b" * 32 and got["build"]["dir"] == f"{image.SUITES}/imb-openmpi"


def test_install_refuses_what_is_not_a_root_filesystem(tmp_path):
    if os.geteuid() != 0:
        with pytest.raises(image.ImageError, match="needs root"):
            image.install(tmp_path)
    else:
        with pytest.raises(image.ImageError, match="not a root filesystem"):
            image.install(tmp_path)


# ---------------------------------------------------------------- the built image
built = pytest.mark.skipif(not OFFLINE_IMAGE.is_file() or shutil.which("unsquashfs") is None,
                           reason=f"offline image {OFFLINE_IMAGE} not built (snakemake .hpcvirt/images/offline.sqfs)")


def _cat(path: str) -> str:
    return subprocess.run(["unsquashfs", "-cat", str(OFFLINE_IMAGE), path], capture_output=True, text=True,
                          check=True).stdout


@pytest.mark.e2e
@built
def test_the_built_image_holds_spacks_install_of_the_locks_roots():
    recs = image.check(OFFLINE_IMAGE)                        # the sidecar: every build, the lock's hash
    assert recs["lock_sha256"] == build.sources.sha256_of(ROOT / "spack-envs/laptop/spack.lock")
    assert json.loads(_cat(image.RECORDS)) == recs           # the image's own copy says the same
    index = json.loads(_cat(f"{image.TREE}/.spack-db/index.json"))["database"]["installs"]
    for key, rec in recs["builds"].items():
        h = rec["spack"]["hash"]
        assert index[h]["installed"] and index[h]["path"] == rec["spack"]["prefix"], key   # Spack's database
        spec = json.loads(_cat(f"{rec['spack']['prefix']}/.spack/spec.json"))
        assert spec["spec"]["nodes"][0]["hash"] == h           # the hash Spack gave the installed spec
        staged = json.loads(_cat(f"{image.SUITES}/{key}/build.json"))
        assert staged["spack"]["hash"] == h and staged["binaries"] == rec["binaries"]
    # Spack's build logs and the build environment stayed on the host
    listing = subprocess.run(["unsquashfs", "-l", str(OFFLINE_IMAGE)], capture_output=True, text=True).stdout
    assert "spack-build-env.txt" not in listing and "spack-build-out.txt" not in listing
    assert spack.DEBIAN_MPICH_DIR not in listing


@pytest.mark.e2e
@built
@pytest.mark.skipif(shutil.which("ch-run") is None, reason="ch-run missing")
def test_the_images_imb_runs_in_the_image_with_nothing_bound(tmp_path):
    rt = {"kind": "charliecloud", "image": str(OFFLINE_IMAGE)}
    env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    env.update(runtime.launch_env(rt, env))
    cp = subprocess.run(["mpirun", "-np", "2", "--mca", "pml", "ob1", "--mca", "btl", "self,vader",
                         *runtime.container_prefix(rt),
                         f"{image.SUITES}/imb-openmpi/bin/IMB-MPI1", "PingPong", "-msglog", "0:3"],
                        capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert cp.returncode == 0, cp.stdout[-2000:] + cp.stderr[-2000:]
    assert "#bytes #repetitions" in cp.stdout and "All processes entering MPI_Finalize" in cp.stdout


def test_the_host_paths_under_opt_are_bound_back_into_the_namespace(tmp_path, monkeypatch):
    """While the image's /opt is /opt, Spack (under HPCVIRT_OPT) and a clone under /opt must stay reachable;
    the mount points made for them in the image are listed, to be removed after."""
    monkeypatch.setenv("HPCVIRT_OPT", "/opt/site/hpcvirt")
    monkeypatch.setenv("HPCVIRT_ROOT", "/opt/site/hpcvirt/clone")     # inside the first: bound with it
    monkeypatch.setenv("HPCVIRT_WORKDIR", str(tmp_path / "work"))       # not under /opt: left alone
    assert Path("/opt/site/hpcvirt") in image._host_paths()
    assert not any(p.is_relative_to("/opt/site/hpcvirt/clone") for p in image._host_paths())
    assert not any(p.is_relative_to(tmp_path) for p in image._host_paths())
    (tmp_path / "rootfs/opt").mkdir(parents=True)
    made = image._mountpoints(tmp_path / "rootfs")
    assert (tmp_path / "rootfs/opt/site/hpcvirt").is_dir()
    assert made[:2] == [tmp_path / "rootfs/opt/site/hpcvirt", tmp_path / "rootfs/opt/site"]
