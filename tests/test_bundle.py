"""The offline bundle (hpcvirt.bundle, `make bundle`): built from a clone
of the committed tree, it unpacks, its manifest verifies, and inside a
network namespace with nothing but loopback (no PyPI, no network at all)
`make paper-from-archive` installs the Python packages from its wheelhouse
only and rebuilds the same paper."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def _text(pdf: Path) -> str:
    return subprocess.run(["pdftotext", str(pdf), "-"], capture_output=True, text=True, check=True).stdout


@pytest.mark.e2e
@pytest.mark.no_measurement
@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None,
                    reason="the offline rebuild runs in a network namespace of its own (root, unshare)")
def test_bundle_rebuilds_the_paper_offline(tmp_path, archive_clone):
    repo = archive_clone          # a clone with the paper built from the archive: `make bundle`'s first step
    env = dict(os.environ, PATH=f"{BIN}:{os.environ['PATH']}", HPCVIRT_ROOT=str(repo),
               PYTHONPATH=str(repo / "workflow/lib"))
    out = tmp_path / "dist" / "hpcvirt.tar"
    made = subprocess.run([sys.executable, "-m", "hpcvirt.bundle", str(out)], cwd=repo, env=env,
                          capture_output=True, text=True, timeout=1200)
    assert made.returncode == 0, made.stderr[-3000:]
    assert not list(out.parent.glob(".*")), "the bundle's staging files are gone"

    with tarfile.open(out) as tar:
        tops = {m.name.split("/")[0] for m in tar.getmembers()}
        assert len(tops) == 1
        tar.extractall(tmp_path / "unpacked", filter="tar")
    top = tmp_path / "unpacked" / tops.pop()
    info = json.loads((top / "bundle/BUNDLE.json").read_text())
    commit = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    assert info["commit"] == commit.strip() and top.name == f"hpcvirt-{info['commit'][:12]}"
    # the archived campaign, its sources (as the suites' builds recorded them) and the locked wheels
    assert (top / "data/results" / info["campaign"] / "summary.csv").exists()
    assert {s["name"] for s in info["sources"]} == {"NPB", "IMB", "osu-micro-benchmarks", "MILC"}
    for s in info["sources"]:
        assert (top / "bundle/sources" / s["file"]).exists()
    locked = {line.split("==")[0].lower().replace("-", "_") for line in (top / "requirements.lock").read_text().split()
              if "==" in line}
    wheels = {w.split("-")[0].lower() for w in info["wheels"]}
    assert locked <= wheels, locked - wheels
    # the manifest covers every file and catches a changed byte
    subprocess.run(["sha256sum", "--quiet", "-c", "MANIFEST.sha256"], cwd=top, check=True)
    listed = {line.split("  ", 1)[1] for line in (top / "MANIFEST.sha256").read_text().splitlines()}
    assert listed == {str(p.relative_to(top)) for p in top.rglob("*") if p.is_file()} - {"MANIFEST.sha256"}
    victim = top / "config/config.yaml"
    original = victim.read_bytes()
    victim.write_bytes(original.replace(b"repetitions: 5", b"repetitions: 6"))
    assert subprocess.run(["sha256sum", "--quiet", "-c", "MANIFEST.sha256"], cwd=top,
                          capture_output=True).returncode != 0
    victim.write_bytes(original)

    # offline: a network namespace with only loopback; nothing of the test's environment
    offline_env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "HPCVIRT_", "PYTHONPATH"))}
    offline_env["PATH"] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    res = subprocess.run(["unshare", "--net", "--", "sh", "-c", "ip link set lo up && make paper-from-archive"],
                         cwd=top, env=offline_env, capture_output=True, text=True, timeout=1200)
    log = res.stdout + res.stderr
    assert res.returncode == 0, log[-4000:]
    assert "Python packages from bundle/wheelhouse only (no index)" in log
    assert (top / ".venv/bin/snakemake").exists()
    assert _text(top / "paper/main.pdf") == _text(top / "bundle/paper.pdf")
