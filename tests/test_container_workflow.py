"""The container path of the embedded default inside the workflow: the
offline-image rule, the per-testbed preflight (host vs image MPI/PMIx/UCX and
a 2-rank wire-up through launcher + ch-run) before any benchmark, the
local-container testbed, and the stack provenance of every row.

The end-to-end tests run in a fresh copy of the repository (never in this
working tree's data/)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from studies import study_for

from hpcvirt import build, runtime, stack
from hpcvirt.benchmarks import REGISTRY
from hpcvirt.config import ConfigError, load_study, load_schema, validate
from hpcvirt.sources import SOURCES

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
ENV = dict(os.environ, PATH=f"{BIN}:{os.environ['PATH']}")
# ch-run refuses to start without $USER; a login shell always has it.
ENV.setdefault("USER", os.environ.get("LOGNAME") or "root")
PROFILE = ["--workflow-profile", "workflow/profiles/default"]
IMAGE = ".hpcvirt/images/offline.sqfs"
# Two testbeds on one host, data paths both of them offer (follows --configfile config/tiny.yaml).
TWO = ["config/one-host.yaml", "--config", "testbeds=[local,local-container]"]

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_workflow import fresh_copy  # noqa: E402


def snakemake(*args, cwd, timeout=900, check=True):
    res = subprocess.run(
        [str(BIN / "snakemake"), *args], cwd=cwd, env=ENV, capture_output=True, text=True, timeout=timeout
    )
    if check and res.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed:\n{res.stdout[-4000:]}\n{res.stderr[-4000:]}")
    return res


def _study(*testbeds):
    cfg = study_for(list(testbeds))
    return load_study(cfg, config_path=ROOT / "config/config.yaml", testbed_dir=ROOT / "config/testbeds")


# --------------------------------------------------------------------------
# Configuration and provenance (fast)
# --------------------------------------------------------------------------


def test_local_container_testbed_matches_local_except_runtime():
    _, tbs = _study("local", "local-container")
    local, cont = tbs["local"], tbs["local-container"]
    assert cont["kind"] == "native" and cont["runtime"]["kind"] == "charliecloud"
    assert cont["runtime"]["image"] == IMAGE
    assert cont["runtime"]["stack"] == "debian-bookworm-offline"
    # same MPI settings: only the per-rank wrapper differs, and the pinned
    # suites are the host's builds, bind-mounted into the image
    def in_image(entry):
        return {k: ({**v, "binary": v["binary"].replace(".hpcvirt/suites/", "/opt/hpcvirt/suites/")}
                    if isinstance(v, dict) and "binary" in v else v) for k, v in entry.items()}
    # (the applications are not in the offline image: the container study leaves them out)
    apps = {"openfoam", "lammps", "milc", "qe"}
    host = {m: {k: v for k, v in e.items() if k not in apps} for m, e in local["mpi"].items()}
    assert {m: in_image(e) for m, e in host.items()} == cont["mpi"]
    # MPICH's hydra needs an explicit peer-group size for ch-run --join: each run's ranks on the host
    assert runtime.container_prefix(cont["runtime"], ranks_per_node=2)[:2] == ["ch-run", "--join-ct=2"]
    assert runtime.container_prefix(cont["runtime"], ranks_per_node=4)[:2] == ["ch-run", "--join-ct=4"]
    with pytest.raises(ValueError, match="same number of ranks on every node"):
        runtime.container_prefix(cont["runtime"])


@pytest.mark.parametrize(
    "key,value,needle",
    [
        ("join_ct", 0, "join_ct"),
        ("join_ct", "all", "join_ct"),
        ("flags", ["--nv;rm"], "pattern"),
        ("flags", ["nv"], "pattern"),
        ("env", {"A": "x y"}, "pattern"),
        ("env", {"1A": "x"}, "1A"),
        ("stack", "a b", "pattern"),
        ("frobnicate", True, "frobnicate"),
    ],
)
def test_runtime_schema_is_strict(key, value, needle):
    tb = yaml.safe_load((ROOT / "config/testbeds/local-container.yaml").read_text())
    tb["runtime"][key] = value
    with pytest.raises(ConfigError, match=needle):
        validate(tb, load_schema("testbed.schema.yaml"), "local-container.yaml")


def test_runtime_provenance(tmp_path):
    assert stack.runtime_provenance({"kind": "none"}) == {"stack": "host", "image": "", "image_digest": "",
                                                       "spack_lock": ""}
    img = tmp_path / "img.sqfs"
    img.write_bytes(b"x" * 100)
    lock = tmp_path / "spack.lock"
    lock.write_text("{}")
    prov = stack.runtime_provenance({"kind": "charliecloud", "image": str(img), "stack": "s1",
                                  "spack_lock": str(lock)})
    assert prov["image_digest"] == stack.image_digest(img)
    assert prov["spack_lock"] == stack.image_digest(lock) and prov["stack"] == "s1"
    with pytest.raises(FileNotFoundError):
        stack.runtime_provenance({"kind": "charliecloud", "image": str(tmp_path / "nope")})


def test_verify_image_checks_the_sidecar(tmp_path):
    img = tmp_path / "img.sqfs"
    img.write_bytes(b"y" * 10)
    (tmp_path / "img.sqfs.sha256").write_text(f"{stack.image_digest(img)}  img.sqfs\n")
    assert stack.verify_image(img)["image_digest"] == stack.image_digest(img)
    img.write_bytes(b"z" * 10)
    with pytest.raises(stack.PreflightError, match="changed after it was built"):
        stack.verify_image(img)
    with pytest.raises(stack.PreflightError, match="does not exist"):
        stack.verify_image(tmp_path / "missing.sqfs")


def test_dry_run_builds_image_then_preflight_before_measurements(tmp_path):
    """A fresh clone has no image: the DAG builds it, then the preflight,
    and every local-container measurement depends on the preflight."""
    work = fresh_copy(tmp_path / "repo")
    res = snakemake(*PROFILE, "-n", "--configfile", "config/tiny.yaml", *TWO, "campaign=dry-ct", cwd=work,
                    timeout=300)
    out = res.stdout
    assert "build_offline_image        1" in out or "build_offline_image 1" in " ".join(out.split()), out
    assert " ".join(["preflight", "1"]) in " ".join(out.split()), out
    res = snakemake(*PROFILE, "-n", "--configfile", "config/tiny.yaml", *TWO, "campaign=dry-ct",
                    "--forceall", "--dag", cwd=work, timeout=300)
    assert "preflight" in res.stdout and "build_offline_image" in res.stdout


# --------------------------------------------------------------------------
# End to end (root, ch-run, the offline image or mmdebstrap to build it)
# --------------------------------------------------------------------------

_missing = [t for t in ("ch-run", "mpirun", "mpiexec.mpich", "unshare") if shutil.which(t) is None]
_have_image = (ROOT / IMAGE).is_file()
_reason = (
    "needs root (private network namespaces, mmdebstrap --mode=root)" if os.geteuid() != 0 else
    f"missing {', '.join(_missing)}" if _missing else
    f"no {IMAGE} and no mmdebstrap/mksquashfs to build it" if not _have_image and not (
        shutil.which("mmdebstrap") and shutil.which("mksquashfs")) else ""
)
e2e_skip = pytest.mark.skipif(bool(_reason), reason=_reason or "-")


def _seed_image(work: Path) -> None:
    """Reuse this tree's built image in the copy (a fresh machine builds it
    by running the rule; set HPCVIRT_REBUILD_IMAGE=1 to test exactly that)."""
    if _have_image and not os.environ.get("HPCVIRT_REBUILD_IMAGE"):
        for suffix in ("", ".sha256", ".manifest", ".suites.json"):
            src = ROOT / (IMAGE + suffix)
            if src.exists():
                (work / IMAGE).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, work / (IMAGE + suffix))


@pytest.mark.e2e
@e2e_skip
def test_tiny_study_through_the_image(tmp_path):
    work = fresh_copy(tmp_path / "repo")
    _seed_image(work)
    campaign = "tiny-container"
    target = f"data/results/{campaign}/summary.csv"
    # the image only: the bare host's half of this study is what tests/test_workflow.py measures
    snakemake(*PROFILE, target, "--configfile", "config/tiny.yaml", "config/one-host.yaml", "--config",
              "testbeds=[local-container]", "skip_unoffered=True", f"campaign={campaign}", cwd=work,
              timeout=1500)

    # the preflight record: digest (matching the build's sidecar), stack, versions, wire-ups
    pf = json.loads((work / f"data/raw/{campaign}/local-container/preflight.json").read_text())
    sidecar = (work / (IMAGE + ".sha256")).read_text().split()[0]
    assert pf["ok"] and pf["image_digest"] == sidecar == stack.image_digest(work / IMAGE)
    assert pf["stack"] == "debian-bookworm-offline"
    for mpi in ("openmpi", "mpich"):
        host, image = pf["stacks"][mpi]["host"], pf["stacks"][mpi]["container"]
        assert host == image and host["mpi_version"] and host["pmix_version"] and host["ucx_version"]
    assert {(w["mpi"], w["path"]) for w in pf["wireup"]} == {
        (m, p) for m in ("openmpi", "mpich") for p in ("shm", "tcp")}

    res = work / "data/results" / campaign
    tb = "local-container"
    rejected = pd.read_csv(res / tb / "rejected.csv")
    assert rejected.empty, rejected.to_string()
    tidy = pd.read_csv(res / tb / "tidy.csv")
    nb = tidy[tidy["benchmark"] == "netpipe"]
    assert nb.groupby(["mpi", "interconnect"]).ngroups == 4, tb
    assert (tidy.loc[tidy["unit"] != "Ry", "value"] > 0).all()      # energies are negative
    assert set(tidy["stack"]) >= {"debian-bookworm-offline"}
    assert nb["virtualization"].str.endswith("+charliecloud").all()
    assert set(nb["image_digest"]) == {sidecar}
    assert set(pd.read_csv(res / "summary.csv")["testbed"]) == {tb}

    # the pinned suites ran in the image from its own Spack install (nothing of the host bound in): each
    # row names the checksum of a pinned source of its suite and the lock's Spack hash of its build
    t = pd.read_csv(res / tb / "tidy.csv", keep_default_na=False, na_values=[""])
    s = t[t["benchmark"].isin(["imb", "osu_latency", "npb-ep", "commprof-cg"])]
    assert set(s["benchmark"]) == {"imb", "osu_latency", "npb-ep", "commprof-cg"}
    source_of = {"imb": "IMB", "osu_latency": "osu-micro-benchmarks", "npb-ep": "NPB", "commprof-cg": "NPB"}
    for bench, sha in set(zip(s["benchmark"], s["source_sha256"])):
        assert sha in {f[1] for f in SOURCES[source_of[bench]].files}, (bench, sha)
    suite_of = {"imb": "imb", "osu_latency": "osu", "npb-ep": "npb", "commprof-cg": "npb"}
    for bench, mpi, h in set(zip(s["benchmark"], s["mpi"], s["spack_hash"])):
        assert h == build.root_of(suite_of[bench], mpi)["hash"], (bench, mpi, h)
    assert pf["image_suites"]["lock"] == "spack-envs/laptop/spack.lock"
    imb = json.loads(next((work / f"data/raw/{campaign}/local-container/imb").glob("*/rep-1.json")).read_text())
    assert not any(a.startswith("--bind=") or a == "--bind" for a in imb["command"]["argv"])   # (not --bind-to)
    assert imb["context"]["benchmark_binary"]["build"]["spack"]["prefix"].startswith("/opt/spack/")   # the image's tree

    # every container measurement really went through ch-run, after the preflight
    provs = sorted((work / f"data/raw/{campaign}/local-container/netpipe").glob("*/rep-1.json"))
    assert len(provs) == 4
    for p in provs:
        rec = json.loads(p.read_text())
        argv = rec["command"]["argv"]
        assert argv[argv.index("ch-run") + 1:argv.index("ch-run") + 3] == ["--join-ct=2", IMAGE]   # no binds
        assert rec["started_at"] >= pf["finished_at"]


@pytest.mark.e2e
@e2e_skip
def test_preflight_rejects_an_image_with_another_open_mpi(tmp_path, other_openmpi_image):
    work = fresh_copy(tmp_path / "repo")
    tb = yaml.safe_load((work / "config/testbeds/local-container.yaml").read_text())
    tb.update(name="local-mismatch")
    tb["runtime"].update(image=str(other_openmpi_image), stack="debian-trixie-openmpi")
    (work / "config/testbeds/local-mismatch.yaml").write_text(yaml.safe_dump(tb))
    campaign = "mismatch"
    study = {"campaign": campaign, "testbeds": ["local-mismatch"],
             "experiments": {"pingpong": {"mpis": ["openmpi"], "paths": ["shm"]},
                             **{b.experiment: {"enabled": False} for b in REGISTRY if b.experiment != "pingpong"}}}
    (work / "mismatch-study.yaml").write_text(yaml.safe_dump(study))
    res = snakemake(*PROFILE, f"data/results/{campaign}/local-mismatch/tidy.csv", "--configfile",
                    "config/tiny.yaml", "mismatch-study.yaml", cwd=work, timeout=600, check=False)
    out = res.stdout + res.stderr
    assert res.returncode != 0, out
    host = stack.mpi_identity((), "openmpi")["version"]
    assert host and f"MPI mismatch: host {host}" in out, out
    assert "container 5." in out, out  # the image's Open MPI 5.x is named
    assert "preflight of testbed local-mismatch failed" in out, out
    # no benchmark job ran, and no preflight record claims success
    raw = work / "data/raw" / campaign / "local-mismatch"
    assert not (raw / "netpipe").exists()
    assert not (raw / "preflight.json").exists()
