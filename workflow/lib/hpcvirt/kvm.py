"""Whether the guests can run under KVM: what a study's plan expects
(:func:`planned_accel`: QEMU asked to start one KVM vCPU, before any guest
image exists) and what a round's probe boot finds (:func:`probe_kvm`: the
guest kernel booted under KVM to its expected panic), each kept per boot of
the machine so that the jobs of a campaign (one process each) ask once.
Under TCG the guests' numbers measure the emulator (:mod:`hpcvirt.qemu`
records which accelerator ran)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
from pathlib import Path

from . import paths
from .atomic import write_json
from .provenance import program_stamp

QEMU = "qemu-system-x86_64"
_PROBE_CACHE: dict[str, tuple[bool, str]] = {}


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def probe_kvm_cached(image: Path, timeout_s: float = 10) -> tuple[bool, str]:
    """:func:`probe_kvm`, run once per image and boot of this machine: the
    result is kept in ``<image>/kvm-probe.json`` with the host's boot id, so
    the rounds of a campaign (one process each) do not probe again."""
    if str(image) not in _PROBE_CACHE:
        record, boot = Path(image) / "kvm-probe.json", _boot_id()
        try:
            cached = json.loads(record.read_text())
            if boot and cached.get("boot_id") == boot:
                _PROBE_CACHE[str(image)] = (bool(cached["ok"]), f"{cached['reason']} (probed at {cached['at']})")
                return _PROBE_CACHE[str(image)]
        except (OSError, ValueError, KeyError):
            pass
        ok, reason = probe_kvm(image, timeout_s)
        _PROBE_CACHE[str(image)] = (ok, reason)
        with contextlib.suppress(OSError):
            write_json(record, {"boot_id": boot, "ok": ok, "reason": reason,
                                "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    return _PROBE_CACHE[str(image)]


def planned_accel(accel: str, timeout_s: float = 10) -> tuple[str, str]:
    """The accelerator the guests of a testbed whose ``vm.accel`` is
    ``accel`` will run with, as far as it can be known when the study is
    planned (before any guest image exists): (``kvm`` or ``tcg``, why).
    ``auto`` asks QEMU to create one KVM vCPU and quit (no kernel, well
    under a second); where that fails the guests are emulated for sure.
    Where it works, the round's own probe boot (:func:`probe_kvm_cached`)
    still decides, so a plan may expect KVM and the guests run under TCG,
    never the other way round.

    Every job of a campaign plans the study again (one process each): the
    answer for ``auto`` is kept in ``<workdir>/kvm-planned.json`` with the
    host's boot id and QEMU's inode and modification time, and asked again
    after a reboot or another QEMU (about 0.1 s a measurement otherwise)."""
    if accel in ("kvm", "tcg"):
        return accel, f"vm.accel: {accel}"
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return "tcg", "/dev/kvm not accessible"
    record, boot, stamp = paths.workdir() / "kvm-planned.json", _boot_id(), program_stamp(QEMU)
    try:
        kept = json.loads(record.read_text())
        if boot and stamp and kept.get("boot_id") == boot and kept.get("qemu") == stamp:
            return kept["accel"], kept["why"]
    except (OSError, ValueError, KeyError, AttributeError):
        pass
    accel, why = _ask_kvm(timeout_s)
    if boot and stamp:
        with contextlib.suppress(OSError):
            write_json(record, {"boot_id": boot, "qemu": stamp, "accel": accel, "why": why})
    return accel, why


def kvm_note(testbeds: dict[str, dict]) -> list[str]:
    """A line per testbed whose guests must run with KVM (``vm.accel: kvm``) on a host where QEMU
    cannot start a KVM vCPU (:func:`planned_accel` of ``auto``): they would fail at their first boot,
    after the guest image is built.  The study's plan prints it."""
    from .kinds import KINDS

    out = []
    for name, tb in testbeds.items():
        if KINDS[tb["kind"]].may_be_emulated and tb.get("vm", {}).get("accel") == "kvm":
            accel, why = planned_accel("auto")
            if accel == "tcg":
                out.append(f"{name}: vm.accel is kvm, but on this host {why}: its guests will not boot; "
                           "vm.accel: auto runs them under TCG emulation where KVM fails")
    return out


def _ask_kvm(timeout_s: float) -> tuple[str, str]:
    """QEMU asked for one KVM vCPU (:func:`planned_accel`)."""
    argv = [QEMU, "-accel", "kvm", "-cpu", "host", "-machine", "q35", "-smp", "1", "-m", "64",
            "-nodefaults", "-no-user-config", "-display", "none", "-S", "-monitor", "stdio"]
    try:
        cp = subprocess.run(argv, input="quit\n", capture_output=True, text=True, timeout=timeout_s)
    except FileNotFoundError:
        return "tcg", f"{QEMU} not installed"
    except subprocess.TimeoutExpired:
        return "tcg", f"QEMU did not start a KVM vCPU within {timeout_s} s"
    if cp.returncode != 0:
        why = (cp.stderr.strip().splitlines() or [f"exit status {cp.returncode}"])[0]
        return "tcg", f"QEMU cannot start a KVM vCPU ({why[:200]})"
    return "kvm", "QEMU starts a KVM vCPU"


def probe_kvm(image: Path, timeout_s: float = 10) -> tuple[bool, str]:
    """Boot the guest kernel under KVM without a root file system.  It works
    if the kernel prints its banner and reaches the (expected) "VFS: unable
    to mount root" panic, then qemu exits by itself (``-no-reboot``), all
    within ``timeout_s``.  Returns (ok, reason)."""
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return False, "/dev/kvm not accessible"
    log = Path(f"/tmp/hpcvirt-kvm-probe-{os.getpid()}.serial")
    argv = [QEMU, "-accel", "kvm", "-cpu", "host", "-machine", "q35", "-smp", "1",
            "-m", "256", "-nodefaults", "-no-user-config", "-display", "none",
            "-no-reboot", "-kernel", str(image / "vmlinuz"), "-initrd", str(image / "initrd.img"),
            "-append", "console=ttyS0 panic=-1 rdinit=/nonexistent root=/dev/nonexistent",
            "-serial", f"file:{log}"]
    try:
        cp = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)
        text = log.read_text(errors="replace") if log.exists() else ""
        if "Linux version" in text and "Kernel panic" in text:
            return True, "probe boot reached the kernel panic"
        return False, f"probe exited {cp.returncode}: {(cp.stderr.strip() or 'no kernel output')[-300:]}"
    except subprocess.TimeoutExpired:
        return False, f"probe boot produced no complete kernel boot within {timeout_s} s"
    finally:
        with contextlib.suppress(OSError):
            log.unlink()
