"""Faults: a raw output is never replaced, an interrupted run's partial file
is cleared and reported, and an interrupted VM round keeps the measurements
it finished (its journal), measuring only the rest when run again.

The unit tests need nothing; the round test (``vm`` and ``e2e`` markers)
sends SIGINT to a real Snakemake run whose guests are up, as root with qemu."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from hpcvirt.benchmarks import REGISTRY
from hpcvirt.measure import MeasurementError, MeasurementTimeout, clear_partials, drop_kept, keep, restore_kept, run_measurement

ROOT = Path(__file__).resolve().parents[1]


def _measured(tmp_path: Path, name: str = "rep-1") -> tuple[str, str]:
    raw, prov = tmp_path / f"{name}.out", tmp_path / f"{name}.json"
    raw.write_text("# a finished raw output\n1 2 3\n")
    raw.chmod(0o444)
    prov.write_text('{"exit_code": 0}\n')
    return str(raw), str(prov)


def test_a_kept_measurement_comes_back_as_the_same_file(tmp_path):
    raw, prov = _measured(tmp_path)
    before = (os.stat(raw).st_ino, Path(raw).read_bytes(), os.stat(prov).st_ino)
    keep(raw, prov)
    # what the workflow manager does to the outputs of an interrupted job before it runs it again
    os.unlink(raw)
    os.unlink(prov)
    assert restore_kept(raw, prov)
    assert (os.stat(raw).st_ino, Path(raw).read_bytes(), os.stat(prov).st_ino) == before
    drop_kept([(None, raw, prov)])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rep-1.json", "rep-1.out"]


def test_restore_kept_without_a_journal_means_measure_it(tmp_path):
    raw, prov = str(tmp_path / "rep-2.out"), str(tmp_path / "rep-2.json")
    assert not restore_kept(raw, prov)
    Path(raw).write_text("raw without its provenance: not complete\n")
    assert not restore_kept(raw, prov)
    raw3, prov3 = _measured(tmp_path, "rep-3")
    assert restore_kept(raw3, prov3)          # complete where it is: nothing to do


def test_a_round_says_why_it_keeps_each_finished_measurement(tmp_path, capsys):
    """An interrupted attempt leaves its journal, whether or not the workflow
    manager removed the outputs it had finished; a measurement of an earlier,
    complete round (the study grew since) has none.  Nothing is left to run,
    so no guest boots."""
    from types import SimpleNamespace

    from hpcvirt.measure import run_round

    cut = _measured(tmp_path, "a")
    keep(*cut)                              # finished by an attempt that was interrupted
    os.unlink(cut[0])                       # ... which the workflow manager cleaned up
    left = _measured(tmp_path, "b")
    keep(*left)                             # ... or left where it was
    earlier = _measured(tmp_path, "c")      # a round that ended: no journal
    items = [(SimpleNamespace(benchmark="x", params=name), *paths)
             for name, paths in (("a", cut), ("b", left), ("c", earlier))]
    assert run_round({"campaign": "t"}, {"name": "vm"}, items, 1) == []
    err = capsys.readouterr().err.splitlines()
    assert [line.split("(")[1] for line in err] == [
        "finished by an earlier, interrupted attempt of this round)",
        "finished by an earlier, interrupted attempt of this round)",
        "measured before, in this round of a campaign the study has grown since)"]
    assert not list(tmp_path.glob(".*.kept"))    # the round is complete: its journal is dropped


def test_stale_partials_of_this_measurement_are_removed_and_reported(tmp_path, capsys):
    raw = tmp_path / "rep-1.out"
    mine = [tmp_path / ".rep-1.out.abc123.partial", tmp_path / ".rep-1.out.zz.partial"]
    other = tmp_path / ".rep-11.out.abc.partial"
    for p in (*mine, other):
        p.write_text("cut off\n")
    assert clear_partials(raw) == sorted(mine)
    assert [p.exists() for p in (*mine, other)] == [False, False, True]
    err = capsys.readouterr().err
    assert all(str(p) in err for p in mine) and "interrupted" in err


def test_an_existing_raw_output_is_never_replaced(tmp_path, monkeypatch):
    where = tmp_path / "data/raw/c/local/netpipe/p"
    where.mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    raw, prov = _measured(where)
    before = (os.stat(raw).st_ino, Path(raw).read_bytes())
    with pytest.raises(MeasurementError, match="never replaced"):
        run_measurement({"campaign": "c"}, {"kind": "native"}, None, 1, raw, prov)
    assert (os.stat(raw).st_ino, Path(raw).read_bytes()) == before


# ----------------------------------------------- SIGINT during a real VM round
def _why_not() -> str | None:
    if os.geteuid() != 0:
        return "needs root (network namespaces, tap devices)"
    for tool in ("qemu-system-x86_64", "mmdebstrap", "ip"):
        if shutil.which(tool) is None:
            return f"needs {tool}"
    return None


def _system_state() -> dict:
    """What a run may leave behind: qemu processes, namespaces, links (but the local Slurm clusters',
    hvslurm*: make test runs these tests beside the Slurm studies)."""
    qemu = subprocess.run(["pgrep", "-f", "qemu-system"], capture_output=True, text=True).stdout.split()
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    ours = lambda names: sorted(n for n in names if not n.startswith("hvslurm"))  # noqa: E731
    return {
        "qemu": sorted(qemu),
        "netns": ours(line.split()[0] for line in netns.splitlines() if line.strip()),
        "links": ours(re.findall(r"^\d+: ([^:@]+)", links, re.M)),
    }


# Six measurements in one round on the vm testbed: a short NetPIPE ping-pong
# and the four applications (OpenFOAM on one and two ranks in one guest; LAMMPS and
# pw.x across both guests; MILC on one rank: across the emulated guests its 2-step
# trajectory spends about 100 s in the emulated network, which LAMMPS and pw.x cross already).
#: The applications, each on the guests' small input of config/config.yaml (which this overlays).
ROUND_APPS = ("openfoam", "lammps", "milc", "qe")
#: what the round changes of config/config.yaml's guests' experiments
ROUND_OVERRIDES = {"milc": {"by_kind": {"qemu": {"ranks": [1], "paths": ["shm"]}}}}
ROUND_STUDY = {
    "testbeds": ["vm"],
    "repetitions": 1,
    "skip_unoffered": True,         # the applications' paths on this host (shm, tcp) are not the guests'
    # the applications run in the guests whatever the accelerator: where the guests would be emulated
    # the tiny study runs only the experiments that show their paths work (emulated_guests), so this
    # round is where the applications' runs in guests are tested
    "emulated_guests": {"experiments": ["pingpong", *ROUND_APPS]},
    "experiments": {
        "pingpong": {"enabled": True, "mpis": ["openmpi"], "paths": ["net"], "min_bytes": 1, "max_bytes": 1024,
                     "by_kind": {"qemu": {"repetitions": 1}}},
        **{app: {"enabled": True, **ROUND_OVERRIDES.get(app, {})} for app in ROUND_APPS},
        **{b.experiment: {"enabled": False} for b in REGISTRY if b.experiment not in ("pingpong", *ROUND_APPS)},
    },
}


@pytest.mark.vm
@pytest.mark.e2e
@pytest.mark.shares_cores       # checks what the round kept and ran, not how fast: beside the Slurm studies
@pytest.mark.skipif(_why_not() is not None, reason=_why_not() or "")
def test_sigint_during_a_vm_round_keeps_what_it_finished(tmp_path):
    from test_workflow import ENV, PROFILE, fresh_copy

    work = fresh_copy(tmp_path / "repo")
    (work / "config/round.yaml").write_text(yaml.safe_dump(ROUND_STUDY))
    campaign = "sigint-round"
    # the guest image is shared with the other VM tests (built once per machine)
    env = dict(ENV, HPCVIRT_WORKDIR=str(ROOT / ".hpcvirt"))
    argv = [str(Path(sys.executable).parent / "snakemake"), *PROFILE, "--configfile", "config/round.yaml",
            "--config", f"campaign={campaign}", "--", f"data/results/{campaign}/vm/tidy.csv"]
    before = _system_state()
    raw_dir = work / "data/raw" / campaign / "vm"
    log = open(tmp_path / "first.log", "w")
    proc = subprocess.Popen(argv, cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 900     # may include building the guest image
        while time.monotonic() < deadline and proc.poll() is None:
            if list(raw_dir.rglob("rep-1.out")):
                break
            time.sleep(0.5)
        finished = list(raw_dir.rglob("rep-1.out"))
        assert proc.poll() is None and len(finished) == 1, (tmp_path / "first.log").read_text()[-3000:]
        time.sleep(1)                          # the next measurement of the round is running now
        os.killpg(proc.pid, signal.SIGINT)     # Ctrl-C in the terminal: the whole process group
        proc.wait(timeout=180)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()
    assert proc.returncode != 0
    # nothing left running or configured
    assert _system_state() == before
    done = finished[0]
    kept = (done.stat().st_ino, hashlib.sha256(done.read_bytes()).hexdigest()) if done.exists() else None
    journal = done.with_name(f".{done.name}.kept")
    assert journal.exists() or done.exists()
    identity = kept or (journal.stat().st_ino, hashlib.sha256(journal.read_bytes()).hexdigest())

    # the rerun finishes the round: the finished measurement is the same file, the others are measured
    rerun = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, timeout=900)
    out = rerun.stdout + rerun.stderr
    assert rerun.returncode == 0, out[-3000:]
    assert (done.stat().st_ino, hashlib.sha256(done.read_bytes()).hexdigest()) == identity
    round_log = next((work / "logs/measure_round" / campaign / "vm").glob("rep-1.log")).read_text()
    assert "finished by an earlier, interrupted attempt" in round_log, round_log
    assert len(list(raw_dir.rglob("rep-1.out"))) == 6      # NetPIPE, OpenFOAM at 1 and 2 ranks, 3 applications
    assert not list(raw_dir.rglob(".*.partial")) and not list(raw_dir.rglob(".*.kept"))
    assert _system_state() == before
    # each application ran in the guests (OpenFOAM and MILC in one, OpenFOAM as Richter et al.'s set-ups
    # 2a/2b) and checked its result
    tidy = pd.read_csv(work / "data/results" / campaign / "vm/tidy.csv")
    assert (pd.read_csv(work / "data/results" / campaign / "vm/rejected.csv")).empty
    for bench, metric, where in (("lammps", "loop_time", [[2, 2]]), ("milc", "wall_time", [[1, 1]]),
                                 ("qe-pw", "wall_time", [[2, 2]]), ("openfoam-dambreak", "wall_time", [[1, 1], [2, 1]])):
        rows = tidy.query(f"benchmark == '{bench}' and metric == '{metric}'")
        assert sorted(rows[["ranks", "nodes"]].values.tolist()) == where and rows["verified"].all(), bench
        assert rows["virtualization"].str.startswith("qemu-").all() and (rows["value"] > 0).all(), bench


# ------------------------------------------------ disk full (a tmpfs of the test's own)
needs_root = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("mount") is None,
                                reason="mounting a small tmpfs needs root")


@contextlib.contextmanager
def small_fs(where: Path, size: str):
    where.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "hpcvirt-test-full", str(where)], check=True)
    try:
        yield lambda new: subprocess.run(["mount", "-o", f"remount,size={new}", str(where)], check=True)
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


@needs_root
def test_a_full_disk_leaves_no_partial_result_and_the_rerun_completes(tmp_path):
    import pandas as pd

    from hpcvirt.atomic import write_csv

    df = pd.DataFrame({"value": range(20000)})
    out = tmp_path / "results"
    with small_fs(out, "8k") as resize:
        with pytest.raises(OSError):
            write_csv(out / "tidy.csv", df)
        assert list(out.iterdir()) == []                   # no partial file
        resize("4m")
        write_csv(out / "tidy.csv", df)
        assert len(pd.read_csv(out / "tidy.csv")) == 20000


@needs_root
@pytest.mark.e2e                # a real NetPIPE run under a time limit: with the machine to itself
@pytest.mark.skipif(shutil.which("NPopenmpi") is None, reason="needs NetPIPE (netpipe-openmpi)")
def test_a_full_disk_during_a_measurement_keeps_nothing_and_the_rerun_completes(tmp_path, monkeypatch):
    from hpcvirt import matrix
    from hpcvirt.config import load_study
    from studies import study_for

    study, testbeds = load_study(
        study_for(["local"], pingpong={"mpis": ["openmpi"], "paths": ["shm"], "min_bytes": 1,
                                       "max_bytes": 65536}),
        testbed_dir=ROOT / "config/testbeds")
    (tmp_path / "workflow").symlink_to(ROOT / "workflow")  # the launch runs workflow/scripts/ from here
    monkeypatch.chdir(tmp_path)                          # data/raw/ of this test
    study = dict(study, campaign="full")
    c = next(c for c in matrix.configurations(study) if c.benchmark == "netpipe")
    raw, prov = matrix.raw_path("full", c, 1), matrix.raw_path("full", c, 1, "json")
    where = tmp_path / Path(raw).parent
    with small_fs(where, "256k"):
        filler = where / "filler"            # another writer filled the disk
        with open(filler, "wb", buffering=0) as fh:
            with pytest.raises(OSError):
                while True:
                    fh.write(b"x" * 4096)
        with pytest.raises(MeasurementError, match="was full when the run ended"):
            run_measurement(study, testbeds["local"], c, 1, raw, prov)
        left = sorted(p.name for p in where.iterdir())
        assert not Path(raw).exists() and not Path(prov).exists()
        assert not [n for n in left if n.endswith(".partial")] and all(".failed-" in n for n in left if n != "filler")
        filler.unlink()                      # room again: the rerun completes
        run_measurement(study, testbeds["local"], c, 1, raw, prov)
        assert "65536 bytes" in Path(raw).read_text() and Path(prov).exists()
        assert not [n for n in os.listdir(where) if n.endswith(".partial")]


@pytest.mark.e2e                # a real NetPIPE run under a time limit: with the machine to itself
@pytest.mark.skipif(shutil.which("NPopenmpi") is None, reason="needs NetPIPE (netpipe-openmpi)")
def test_a_run_killed_at_its_time_limit_is_retried_and_every_attempt_kept(tmp_path, monkeypatch):
    """MPICH's NetPIPE sometimes hangs in MPI_Finalize after a complete sweep: here a wrapper
    hangs after a real sweep on its first run only.  The killed attempt's output is kept as
    .failed-*, the retry lands at the raw path, and its provenance names the killed attempt."""
    import copy

    from hpcvirt import matrix
    from hpcvirt.config import load_study
    from studies import study_for

    study, testbeds = load_study(
        study_for(["local"], pingpong={"mpis": ["openmpi"], "paths": ["shm"], "min_bytes": 1, "max_bytes": 1024,
                                       "timeout_s": 10, "retries_after_timeout": 1}),
        testbed_dir=ROOT / "config/testbeds")
    (tmp_path / "workflow").symlink_to(ROOT / "workflow")
    monkeypatch.chdir(tmp_path)
    hang = tmp_path / "hangs-once"
    hang.write_text("#!/bin/sh\nNPopenmpi \"$@\" || exit $?\n"
                    f"mkdir {tmp_path}/hung-$OMPI_COMM_WORLD_RANK 2>/dev/null && exec sleep 613\nexit 0\n")
    hang.chmod(0o755)
    tb = copy.deepcopy(testbeds["local"])
    tb["mpi"]["openmpi"]["netpipe"]["binary"] = str(hang)
    study = dict(study, campaign="retry")
    c = next(c for c in matrix.configurations(study) if c.benchmark == "netpipe")
    assert c.settings["timeout_s"] == 10 and c.settings["retries_after_timeout"] == 1
    raw, prov = matrix.raw_path("retry", c, 1), matrix.raw_path("retry", c, 1, "json")
    rec = run_measurement(study, tb, c, 1, raw, prov)
    failed = sorted(Path(raw).parent.glob("rep-1.failed-*.out"))
    assert len(failed) == 1 and "1024 bytes" in failed[0].read_text()     # a complete sweep, then the hang
    assert "1024 bytes" in Path(raw).read_text()
    assert rec["context"]["earlier_attempts"] == [str(failed[0])]
    assert json.loads(Path(prov).read_text())["context"]["earlier_attempts"] == [str(failed[0])]
    assert subprocess.run(["pgrep", "-f", "sleep 613"], capture_output=True).returncode == 1   # nothing left


@pytest.mark.e2e                # a real NetPIPE run under a time limit: with the machine to itself
@pytest.mark.skipif(shutil.which("NPopenmpi") is None, reason="needs NetPIPE (netpipe-openmpi)")
def test_other_failures_are_not_retried(tmp_path, monkeypatch):
    from hpcvirt import matrix
    from hpcvirt.config import load_study
    from studies import study_for

    study, testbeds = load_study(
        study_for(["local"], pingpong={"mpis": ["openmpi"], "paths": ["shm"], "min_bytes": 1, "max_bytes": 1024,
                                       "retries_after_timeout": 3}),
        testbed_dir=ROOT / "config/testbeds")
    (tmp_path / "workflow").symlink_to(ROOT / "workflow")
    monkeypatch.chdir(tmp_path)
    fails = tmp_path / "fails"
    fails.write_text("#!/bin/sh\necho 'not a sweep'\nexit 3\n")
    fails.chmod(0o755)
    tb = json.loads(json.dumps(testbeds["local"]))
    tb["mpi"]["openmpi"]["netpipe"]["binary"] = str(fails)
    study = dict(study, campaign="noretry")
    c = next(c for c in matrix.configurations(study) if c.benchmark == "netpipe")
    raw, prov = matrix.raw_path("noretry", c, 1), matrix.raw_path("noretry", c, 1, "json")
    with pytest.raises(MeasurementError, match="failed") as exc:
        run_measurement(study, tb, c, 1, raw, prov)
    assert not isinstance(exc.value, MeasurementTimeout)
    assert len(list(Path(raw).parent.glob("rep-1.failed-*.out"))) == 1 and not Path(raw).exists()


# ------------------------------------------- a guest that never comes up
@pytest.mark.vm
@pytest.mark.e2e
@pytest.mark.shares_cores       # a boot limit of 10 s no emulated guest meets, loaded or not
@pytest.mark.skipif(_why_not() is not None, reason=_why_not() or "")
def test_a_guest_that_never_boots_fails_its_round_and_the_others_continue(tmp_path):
    from test_workflow import ENV, PROFILE, fresh_copy

    work = fresh_copy(tmp_path / "repo")
    vm = work / "config/testbeds/vm.yaml"
    # 10 s is the shortest boot time a testbed may allow: no guest answers ssh that fast under emulation
    vm.write_text(vm.read_text().replace("boot_timeout_s: 240", "boot_timeout_s: 10"))
    # raw TCP latency and bandwidth only (no MPI start, a few seconds each): the local testbed's two
    # measurements go on while the guests' round fails
    study = {"testbeds": ["local", "vm"], "repetitions": 1, "experiments": {
        "tcp": {"enabled": True, "tests": ["tcp_lat", "tcp_bw"], "min_bytes": 8, "max_bytes": 512, "factor": 64,
                "seconds_per_size": 1},
        **{b.experiment: {"enabled": False} for b in REGISTRY if b.experiment != "tcp"}}}
    (work / "config/boot.yaml").write_text(yaml.safe_dump(study))
    campaign = "never-boots"
    env = dict(ENV, HPCVIRT_WORKDIR=str(ROOT / ".hpcvirt"))
    before = _system_state()
    res = subprocess.run([str(Path(sys.executable).parent / "snakemake"), *PROFILE, "--configfile", "config/boot.yaml",
                          "--config", f"campaign={campaign}", "--", *(f"data/results/{campaign}/{tb}/tidy.csv"
                                                                      for tb in ("local", "vm"))],
                         cwd=work, env=env, capture_output=True, text=True, timeout=900)
    out = res.stdout + res.stderr
    assert res.returncode != 0
    log = (work / "logs/measure_round" / campaign / "vm/rep-1.log").read_text()
    assert "did not answer ssh within 10 s" in log and "serial log" in log, log[-2000:]
    # the native testbed measured and parsed all the same (keep-going)
    raw = work / "data/raw" / campaign
    assert len(list((raw / "local").rglob("rep-1.out"))) == 2, out[-3000:]
    assert (work / f"data/results/{campaign}/local/tidy.csv").exists()
    assert not list((raw / "vm").rglob("rep-*.out")) if (raw / "vm").exists() else True
    assert _system_state() == before


def test_forcing_a_finished_measurement_is_refused_before_snakemake_deletes_it(tmp_path):
    """protected() outputs are read-only, but Snakemake takes no file for protected when it runs as root
    (the testbeds need root): --forcerun, -f or --forceall of a raw output the campaign has would delete
    it and measure it again.  The run stops before any job, the file untouched; forcing a later step runs."""
    from hpcvirt.rawfiles import replaced_records

    repo = tmp_path / "repo"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(repo)], check=True)
    study = yaml.safe_load((repo / "config/config.yaml").read_text())
    raw = sorted((repo / "data/raw" / study["campaign"] / "local/netpipe").glob("*/rep-1.out"))[0]
    rel, before = str(raw.relative_to(repo)), hashlib.sha256(raw.read_bytes()).hexdigest()
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}", HPCVIRT_ROOT=str(repo),
               PYTHONPATH=str(repo / "workflow/lib"))
    for force in (["--forcerun", rel], ["-f"], ["--forceall"]):
        cp = subprocess.run([str(Path(sys.executable).parent / "snakemake"), "--workflow-profile",
                             "workflow/profiles/default", *force, "--", rel], cwd=repo, env=env,
                            capture_output=True, text=True, timeout=300)
        assert cp.returncode != 0 and "this run would delete 2 records the campaign has under data/raw/ and make " \
            f"them again ({rel[:-4]}.json, {rel}): raw outputs and their records are never replaced" in cp.stderr, \
            (force, cp.stderr[-2000:])
        assert "rule measure" not in cp.stdout + cp.stderr and raw.exists()
        assert hashlib.sha256(raw.read_bytes()).hexdigest() == before
    assert replaced_records([rel, rel + ".missing", "paper/main.pdf"]) is not None
    assert replaced_records(["data/raw/none/x/rep-1.out", "paper/main.pdf"]) is None
    # a container campaign's preflight record (the runtimes' versions the paper quotes) is a record too
    preflight = next(str(p.relative_to(repo)) for p in (repo / "data/raw").glob("container-*/*/preflight.json"))
    assert "make it again (" + preflight in replaced_records([preflight])
