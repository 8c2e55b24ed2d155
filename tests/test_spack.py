"""Spack, pinned and offline: the pinned release, the mirror laid out from the
verified sources, the project's recipes, and the laptop stack's spack.lock
concretized again from scratch."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hpcvirt import sources
from hpcvirt import spack as hspack

ROOT = Path(__file__).resolve().parents[1]
MIRROR = os.environ.get(sources.MIRROR_ENV)
needs_mirror = pytest.mark.skipif(not MIRROR or not Path(MIRROR).is_dir(),
                                  reason=f"no source mirror ({sources.MIRROR_ENV} unset)")


def test_spack_is_a_pinned_source():
    src = sources.SOURCES["spack"]
    assert src.version == "0.21.2" and src.urls[0].endswith("/v0.21.2/spack-0.21.2.tar.gz")
    assert hspack.prefix().name == f"spack-0.21.2-{src.files[0][1][:12]}"


@pytest.mark.parametrize("pkg", sorted(hspack.MIRRORED))
def test_recipes_pin_the_checksums_of_the_pinned_sources(pkg):
    """Each recipe of spack-envs/repo accepts exactly the files hpcvirt.sources accepts, by the copy's name."""
    text = (ROOT / "spack-envs/repo/packages" / pkg / "package.py").read_text()
    name, version = hspack.MIRRORED[pkg]
    assert f'version("{version}"' in text
    declared = set(re.findall(r"\b[0-9a-f]{64}\b", text))
    assert declared == {sha for _, sha, _ in sources.SOURCES[name].files}, pkg
    for _, sha, label in sources.SOURCES[name].files:
        if len(sources.SOURCES[name].files) > 1:
            assert f'"{label}": "{sha}"' in text, (pkg, label)
    if len(sources.SOURCES[name].files) > 1:
        assert hspack.copy_env_var(pkg) in text


def test_env_names_are_validated():
    with pytest.raises(hspack.SpackError, match="expected lower-case"):
        hspack.env_path("../laptop")
    with pytest.raises(hspack.SpackError, match=r"no-such-stack/spack.yaml does not exist; environments: .*laptop"):
        hspack.env_path("no-such-stack")
    assert hspack.env_path("laptop") == ROOT / "spack-envs/laptop"


def test_spack_runs_isolated_from_the_users_configuration(tmp_path, monkeypatch):
    monkeypatch.setenv("HPCVIRT_WORKDIR", str(tmp_path))
    monkeypatch.setenv("SPACK_USER_CONFIG_PATH", "/home/someone/.spack")
    monkeypatch.setenv("SPACK_DISABLE_LOCAL_CONFIG", "1")
    env = hspack.environment({"npb": "mirror copy"})
    for var in ("SPACK_USER_CONFIG_PATH", "SPACK_SYSTEM_CONFIG_PATH", "SPACK_USER_CACHE_PATH"):
        assert Path(env[var]).is_relative_to(tmp_path / "spack") and Path(env[var]).is_dir(), var
    assert "SPACK_DISABLE_LOCAL_CONFIG" not in env
    assert env["HPCVIRT_SPACK_COPY_NPB"] == "mirror copy"
    assert env["HPCVIRT_SPACK_COPY_INTEL_MPI_BENCHMARKS"] == "official archive"
    scope = hspack._scope(tmp_path / "m")
    assert (scope / "mirrors.yaml").read_text() == f"mirrors::\n  hpcvirt-sources:\n    url: file://{tmp_path}/m\n"
    assert "sources: []" in (scope / "bootstrap.yaml").read_text()


@needs_mirror
def test_mirror_is_laid_out_from_verified_sources(tmp_path, monkeypatch):
    monkeypatch.setenv("HPCVIRT_WORKDIR", str(tmp_path / "work"))
    dest = tmp_path / "spack-mirror"
    recs = hspack.build_mirror(mirror=MIRROR, dest=dest)
    for pkg, (name, version) in hspack.MIRRORED.items():
        f = dest / pkg / f"{pkg}-{version}.tar.gz"
        assert sources.sha256_of(f) == recs[pkg]["sha256"] and recs[pkg]["copy"] == "mirror copy", pkg
    # a file changed in the Spack mirror afterwards is replaced by the verified one
    npb = dest / "npb" / "npb-3.4.1.tar.gz"
    npb.unlink()
    npb.write_bytes(b"tampered\n")
    hspack.build_mirror(mirror=MIRROR, dest=dest)
    assert sources.sha256_of(npb) == recs["npb"]["sha256"]


@needs_mirror
def test_a_mirror_file_with_a_wrong_checksum_fails_naming_it(tmp_path, monkeypatch):
    monkeypatch.setenv("HPCVIRT_WORKDIR", str(tmp_path / "work"))     # an empty source cache
    bad = tmp_path / "mirror"
    bad.mkdir()
    for f in Path(MIRROR).iterdir():        # the other packages' files are good: whatever the order, NPB's fails
        if f.is_file() and f.name != "NPB3.4.1.tar.gz":
            (bad / f.name).symlink_to(f)
    (bad / "NPB3.4.1.tar.gz").write_bytes(b"not the NAS Parallel Benchmarks\n")
    dest = tmp_path / "spack-mirror"
    with pytest.raises(sources.SourceError, match=r"NPB3.4.1.tar.gz \(NPB 3.4.1, from .*/mirror/NPB3.4.1.tar.gz\) "
                                                  r"has sha256 [0-9a-f]{64}, expected"):
        hspack.build_mirror(mirror=bad, dest=dest)
    assert not (dest / "npb").exists() or not any((dest / "npb").iterdir())


@pytest.mark.skipif(not Path("/usr/bin/mpicc.mpich").exists(), reason="needs Debian's MPICH")
def test_debian_mpich_gets_a_prefix_of_its_own(tmp_path, monkeypatch):
    monkeypatch.setenv("HPCVIRT_OPT", str(tmp_path))
    d = hspack.debian_mpich_prefix()
    assert d == tmp_path / hspack.DEBIAN_MPICH_DIR
    show = subprocess.run([d / "bin" / "mpicc", "-show"], capture_output=True, text=True, check=True).stdout
    assert "mpich" in show and "-lmpich" in show
    assert (d / "lib" / "libmpich.so").resolve().is_file() and (d / "include" / "mpi.h").is_file()
    assert hspack.debian_mpich_prefix() == d                  # made once; again is a no-op


@pytest.mark.e2e
@pytest.mark.no_measurement
@needs_mirror
def test_laptop_stack_concretizes_again_to_its_lock(tmp_path, monkeypatch):
    """From scratch (a copy of the environment without its lock, ``concretize -f``, no reuse): the same DAG
    hashes as the committed spack.lock."""
    # Spack's caches of its own (make test runs this beside the suites' install, which has the clone's); only
    # the package repositories' indexes (providers, tags, patches) are taken from the clone's where the suites'
    # install made them (about 80 s to build; Spack rebuilds one whose repository changed after it)
    monkeypatch.setenv("HPCVIRT_WORKDIR", str(tmp_path / "work"))
    cache = Path("spack/user-cache/cache")
    for index in sorted((ROOT / ".hpcvirt" / cache).glob("*/*-index.json")):
        copy = tmp_path / "work" / cache / index.parent.name / index.name
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(index, copy)
    envs = tmp_path / "spack-envs"
    shutil.copytree(ROOT / "spack-envs/repo", envs / "repo")
    (envs / "laptop").mkdir()
    shutil.copy(ROOT / "spack-envs/laptop/spack.yaml", envs / "laptop/spack.yaml")
    want = hspack.lock_hashes(ROOT / "spack-envs/laptop/spack.lock")
    rec = hspack.concretize(envs / "laptop", mirror=MIRROR)
    assert set(rec["copies"].values()) == {"mirror copy"}, "the committed lock is for the mirror's copies"
    assert rec["roots"] == want
    print(f"concretized the laptop stack in {rec['seconds']} s")


def test_install_needs_the_lock_and_names_it(tmp_path):
    (tmp_path / "laptop").mkdir()
    shutil.copy(ROOT / "spack-envs/laptop/spack.yaml", tmp_path / "laptop/spack.yaml")
    with pytest.raises(hspack.SpackError, match=rf"{tmp_path}/laptop/spack.lock is missing: concretize first"):
        hspack.install(tmp_path / "laptop")


@pytest.mark.skipif(not Path("/usr/bin/mpicc.mpich").exists(), reason="needs Debian's MPICH")
def test_install_refuses_an_mpich_prefix_other_than_the_one_made_here(tmp_path, monkeypatch):
    monkeypatch.setenv("HPCVIRT_OPT", str(tmp_path / "opt"))
    env = tmp_path / "laptop"
    env.mkdir()
    for f in ("spack.yaml", "spack.lock"):
        shutil.copy(ROOT / "spack-envs/laptop" / f, env / f)
    with pytest.raises(hspack.SpackError, match=rf"laptop/spack.yaml: MPICH's external prefix is not "
                                                rf"{tmp_path}/opt/debian-mpich-4.0.2"):
        hspack.install(env)


@needs_mirror
@pytest.mark.parametrize("stack", ["openmpi-ucx", "mpich"])
def test_a_cluster_stacks_def_is_what_spack_containerize_renders_with_the_projects_template(stack, tmp_path):
    """containers/<stack>.def is generated, not edited: `spack containerize` with the project's template
    (containers/templates/container/hpcvirt.def) renders it byte for byte; the build stage installs the
    committed lock and checks its roots' hashes."""
    cp = subprocess.run([sys.executable, "-m", "hpcvirt.spack", "spack", "containerize"],
                        cwd=ROOT / "spack-envs" / stack, capture_output=True, text=True, timeout=600,
                        env={**os.environ, "PYTHONPATH": str(ROOT / "workflow/lib"), "HPCVIRT_ROOT": str(ROOT),
                             "HPCVIRT_WORKDIR": str(tmp_path)})     # Spack's caches of its own
    assert cp.returncode == 0, cp.stderr[-2000:]
    committed = (ROOT / "containers" / f"{stack}.def").read_text()
    assert cp.stdout == committed, "regenerate: cd spack-envs/<stack> && python -m hpcvirt.spack spack containerize"
    assert f"spack-envs/{stack}/spack.lock" in committed and "spack -e . concretize" not in committed
    assert "'not the lock'" in committed
