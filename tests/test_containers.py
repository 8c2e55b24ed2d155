"""hpcvirt.runtime, .stack and .preflight: per-rank wrappers, preflight version checks, digests,
and (e2e) a real 2-rank MPI wire-up through the offline image."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from hpcvirt import preflight, runtime, stack
from hpcvirt.runtime import container_prefix
from hpcvirt.stack import PreflightError, check_match

ROOT = Path(__file__).resolve().parents[1]
OFFLINE_IMAGE = Path(os.environ.get("HPCVIRT_OFFLINE_IMAGE", ROOT / ".hpcvirt" / "images" / "offline.sqfs"))


# --------------------------------------------------------------------------
# container_prefix
# --------------------------------------------------------------------------


@pytest.mark.parametrize("rt", [{"kind": "none"}, {}, None])
def test_prefix_native_is_empty(rt):
    assert container_prefix(rt) == []


def test_prefix_charliecloud_default_joins():
    assert container_prefix({"kind": "charliecloud", "image": "/img.sqfs"}) == [
        "ch-run", "--join", "/img.sqfs", "--"]


def test_prefix_charliecloud_options():
    rt = {"kind": "charliecloud", "image": Path("/img"), "join_ct": 4, "bind": ["/scratch", "/a:/b"],
          "env": {"B": "2", "A": "1"}, "private_tmp": True}
    assert container_prefix(rt) == [
        "ch-run", "--join-ct=4", "--bind=/scratch", "--bind=/a:/b",
        "--set-env=A=1", "--set-env=B=2", "--private-tmp", "/img", "--"]


def test_prefix_charliecloud_single_drops_join():
    rt = {"kind": "charliecloud", "image": "/img", "join_ct": 2}
    assert container_prefix(rt, single=True) == ["ch-run", "/img", "--"]


# (exe and userns given: these check the argv only; the probe of userns: auto runs in tests/test_apptainer.py)
def test_prefix_apptainer():
    rt = {"kind": "apptainer", "exe": "apptainer", "userns": False, "image": "/img.sif",
          "bind": ["/scratch", "/opt/x:/x"]}
    assert container_prefix(rt) == ["apptainer", "--quiet", "exec", "--sharens", "--bind", "/scratch,/opt/x:/x",
                                     "/img.sif"]
    assert container_prefix(dict(rt, userns=True))[:5] == ["apptainer", "--quiet", "exec", "--userns", "--sharens"]
    # one process alone (the preflight's probes) has nobody to share with; sharens can be switched off
    assert container_prefix(rt, single=True) == ["apptainer", "--quiet", "exec", "--bind", "/scratch,/opt/x:/x",
                                                  "/img.sif"]
    assert "--sharens" not in container_prefix(dict(rt, sharens=False))


def test_prefix_apptainer_env_and_flags_and_singularity():
    rt = {"kind": "apptainer", "exe": "singularity", "image": "/i.sif", "env": {"X": "1"}, "flags": ["--nv"],
          "userns": False}
    assert container_prefix(rt) == ["singularity", "--quiet", "exec", "--env", "X=1", "--nv", "/i.sif"]
    assert "--cleanenv" not in container_prefix({"kind": "apptainer", "exe": "apptainer", "userns": False,
                                                 "image": "/i"})


def test_prefix_errors():
    with pytest.raises(ValueError, match="needs an 'image'"):
        container_prefix({"kind": "apptainer"})
    with pytest.raises(ValueError, match="unknown container runtime"):
        container_prefix({"kind": "docker", "image": "x"})


def test_launch_env_sets_user_for_charliecloud():
    add = runtime.launch_env({"kind": "charliecloud", "image": "/i"}, environ={})
    assert add.get("USER")
    assert "USER" not in runtime.launch_env({"kind": "charliecloud"}, environ={"USER": "me"})
    assert "USER" not in runtime.launch_env({"kind": "none"}, environ={})


# --------------------------------------------------------------------------
# check_match
# --------------------------------------------------------------------------

HOST = {"mpi_impl": "openmpi", "mpi_version": "4.1.4", "pmix_version": "4.2.2rc2", "ucx_version": "1.13.1"}


def test_check_match_accepts_same_series():
    check_match(HOST, dict(HOST, mpi_version="4.1.8", pmix_version="4.2.9"))


def test_check_match_mpi_mismatch_names_both_versions():
    with pytest.raises(PreflightError) as ei:
        check_match(HOST, dict(HOST, mpi_version="5.0.7"))
    msg = str(ei.value)
    assert "MPI mismatch" in msg and "4.1.4" in msg and "5.0.7" in msg


def test_check_match_pmix_mismatch_names_both_versions():
    with pytest.raises(PreflightError) as ei:
        check_match(HOST, dict(HOST, pmix_version="5.0.3"))
    msg = str(ei.value)
    assert "PMIx mismatch" in msg and "4.2.2rc2" in msg and "5.0.3" in msg


def test_check_match_impl_and_unknown():
    with pytest.raises(PreflightError, match="implementation differs: host openmpi, container mpich"):
        check_match(HOST, dict(HOST, mpi_impl="mpich"))
    with pytest.raises(PreflightError, match="PMIx version unknown"):
        check_match(HOST, dict(HOST, pmix_version=None))


def test_check_match_ucx_optional():
    other = dict(HOST, ucx_version="1.18.1")
    check_match(HOST, other)
    with pytest.raises(PreflightError, match="UCX mismatch: host 1.13.1"):
        check_match(HOST, other, check_ucx=True)


# --------------------------------------------------------------------------
# Probes with a fake runner
# --------------------------------------------------------------------------


class FakeRunner:
    """Answers by argv tail; records every argv it was given."""

    def __init__(self, answers):
        self.answers = answers
        self.calls = []

    def __call__(self, argv, **kw):
        self.calls.append(list(argv))
        for key, out in self.answers.items():
            if tuple(argv[-len(key):]) == key:
                if out is None:
                    return subprocess.CompletedProcess(argv, 1, "", "no")
                return subprocess.CompletedProcess(argv, 0, out, "")
        raise FileNotFoundError(argv[0])


def test_probes_parse_tool_output_through_prefix():
    run = FakeRunner({
        ("ompi_info", "--parsable"): "ompi:version:full:4.1.8\nmca:pmix:ext3x:version:\"component:4.1.8\"\n",
        ("pmix_info", "--parsable"): "pmix:version:full:4.2.9\npmix:version:repo:v4.2.9\n",
        ("ucx_info", "-v"): "# Library version: 1.18.1\n# Library path: /x\n",
    })
    prefix = ["apptainer", "exec", "/i.sif"]
    ident = stack.stack_identity(prefix, runner=run)
    assert ident == {"mpi_impl": "openmpi", "mpi_version": "4.1.8", "pmix_version": "4.2.9",
                     "ucx_version": "1.18.1"}
    assert all(call[:3] == prefix for call in run.calls)


def test_probes_fall_back_to_dpkg():
    run = FakeRunner({
        ("mpichversion",): "MPICH Version:    \t4.0.2\nMPICH Device: ch4:ucx\n",
        ("pmix_info", "--parsable"): None,
        ("libpmix2",): "4.2.2-1+deb12u1",
        ("ucx_info", "-v"): None,
        ("libucx0",): "1.13.1-1",
    })
    ident = stack.stack_identity((), "mpich", runner=run)
    assert ident == {"mpi_impl": "mpich", "mpi_version": "4.0.2", "pmix_version": "4.2.2",
                     "ucx_version": "1.13.1"}


def test_parse_ucx_old_format():
    assert stack.parse_ucx_info("# Version 1.13.1\n# Git branch ''\n") == "1.13.1"


def test_preflight_with_fake_runner_raises_on_mismatch():
    host_out = "ompi:version:full:4.1.4\n"
    image_out = "ompi:version:full:5.0.7\n"

    def run(argv, **kw):
        inside = argv[0] == "apptainer"
        tail = argv[argv.index("/nonexistent.sif") + 1:] if inside else argv   # after the image
        if tail == ["ompi_info", "--parsable"]:
            return subprocess.CompletedProcess(argv, 0, image_out if inside else host_out, "")
        if tail == ["pmix_info", "--parsable"]:
            return subprocess.CompletedProcess(argv, 0, "pmix:version:full:4.2.2\n", "")
        if tail == ["ucx_info", "-v"]:
            return subprocess.CompletedProcess(argv, 0, "# Library version: 1.13.1\n", "")
        return subprocess.CompletedProcess(argv, 1, "", "")

    with pytest.raises(PreflightError, match=r"MPI mismatch: host 4\.1\.4 .* container 5\.0\.7"):
        preflight.preflight({"kind": "apptainer", "exe": "apptainer", "userns": False, "image": "/nonexistent.sif"},
                            runner=run)


# --------------------------------------------------------------------------
# image_digest
# --------------------------------------------------------------------------


def test_image_digest_file(tmp_path):
    f = tmp_path / "img.sqfs"
    f.write_bytes(b"hpcvirt" * 1000)
    assert stack.image_digest(f) == "sha256:" + hashlib.sha256(b"hpcvirt" * 1000).hexdigest()


def test_image_digest_directory_ignores_mtime(tmp_path):
    d = tmp_path / "root"
    (d / "bin").mkdir(parents=True)
    (d / "bin" / "x").write_text("a")
    (d / "lnk").symlink_to("bin/x")
    first = stack.image_digest(d)
    os.utime(d / "bin" / "x", (0, 0))
    assert stack.image_digest(d) == first
    (d / "bin" / "x").write_text("b")
    assert stack.image_digest(d) != first


def test_image_digest_missing(tmp_path):
    with pytest.raises(FileNotFoundError):
        stack.image_digest(tmp_path / "nope")


# --------------------------------------------------------------------------
# e2e: the offline image really runs under the host's mpirun
# --------------------------------------------------------------------------

_missing = [t for t in ("ch-run", "mpirun") if shutil.which(t) is None]
e2e_skip = pytest.mark.skipif(
    bool(_missing) or not OFFLINE_IMAGE.is_file(),
    reason=(f"missing {', '.join(_missing)}" if _missing else
            f"offline image {OFFLINE_IMAGE} not built (containers/offline/build.sh {OFFLINE_IMAGE})"),
)


@pytest.mark.e2e
@e2e_skip
def test_e2e_preflight_offline_image():
    record = preflight.preflight({"kind": "charliecloud", "image": str(OFFLINE_IMAGE)})
    assert record["host"]["mpi_version"] == record["container"]["mpi_version"]
    assert record["image_digest"].startswith("sha256:")


@pytest.mark.e2e
@e2e_skip
def test_e2e_two_rank_wireup_through_image(tmp_path):
    rt = {"kind": "charliecloud", "image": str(OFFLINE_IMAGE)}
    env = dict(os.environ)
    env.update(runtime.launch_env(rt, env))
    if os.geteuid() == 0:   # as the testbed files do: Open MPI refuses root otherwise
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    argv = ["mpirun", "-np", "2", "--bind-to", "none",
            "--mca", "pml", "ob1", "--mca", "btl", "self,vader,tcp", "--mca", "btl_tcp_if_include", "lo",
            *container_prefix(rt),
            "NPopenmpi", "-l", "1", "-u", "64", "-p", "0", "-o", str(tmp_path / "np.out")]
    cp = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    rows = [ln.split() for ln in (tmp_path / "np.out").read_text().splitlines() if ln.strip()]
    assert rows and int(rows[-1][0]) == 64, rows  # largest size reached: both ranks talked
