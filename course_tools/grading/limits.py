"""Resource limits of one submission's kernel, and the kernel mechanisms that enforce them.

Every limit is a trait of :class:`GradingLimits`, set in ``nbgrader_config.py``
(``c.GradingLimits.memory_mb = 4096``). Three layers, each used where the machine allows it:

* **cgroups** (the grader runs as root and the cgroup file system is writable: v1 ``memory`` and
  ``pids`` controllers, or a v2 hierarchy with both enabled): a group per kernel holds its memory
  (files in its tmpfs folders included: tmpfs pages are charged to the group that writes them)
  and its number of tasks; the kernel and everything it starts are killed with the group.
* **rlimits** (always): no core files, a largest file, CPU seconds; where no cgroup can be made,
  also the address space and the number of processes of the grading user.
* **sized tmpfs folders** (root inside the sandbox, or bubblewrap >= 0.10's ``--size``): the
  working folder, ``/tmp`` and ``$HOME`` of the kernel each have a size.

Output and wall-clock limits are enforced by the grader's own client (``sandbox.LimitedExecution``).
:func:`describe` says which layer is in force on this machine (``llm-course doctor`` prints it).
"""
from __future__ import annotations

import os
import resource
import signal
import time
import uuid
from pathlib import Path
from typing import Callable

from traitlets import Integer
from traitlets.config import Configurable

CGROUP_ROOT = Path(os.environ.get("LLM_COURSE_CGROUP_ROOT", "/sys/fs/cgroup"))
GROUP_PREFIX = "llm-course-grading"
MiB = 1 << 20


class GradingLimits(Configurable):
    """Limits per submission (each kernel: the submission's run, then the probe)."""

    memory_mb = Integer(6144, config=True, help="Memory of the kernel and its children, tmpfs folders included (MiB).")
    pids = Integer(256, config=True, help="Tasks (processes and threads) the kernel may have at once.")
    cpu_seconds = Integer(3600, config=True, help="CPU time of each process (RLIMIT_CPU, seconds).")
    wall_seconds = Integer(1800, config=True, help="Wall-clock time of one notebook's whole run (seconds).")
    file_mb = Integer(512, config=True, help="Largest file the kernel may write (RLIMIT_FSIZE, MiB).")
    workdir_mb = Integer(512, config=True, help="Size of the kernel's private working folder (tmpfs, MiB).")
    tmp_mb = Integer(512, config=True, help="Size of the kernel's /tmp (tmpfs, MiB).")
    home_mb = Integer(64, config=True, help="Size of the kernel's $HOME (tmpfs, MiB).")
    submission_mb = Integer(256, config=True, help="Largest total size of the submission's files copied in (MiB).")
    cell_output_kb = Integer(2048, config=True, help="Output one cell may produce; beyond it, outputs are dropped (KiB).")
    cell_outputs = Integer(500, config=True, help="Number of outputs one cell may produce; beyond it, dropped.")
    ungraded_cells = Integer(200, config=True, help="Code cells outside the exercises (no nbgrader id) run per notebook; "
                                                    "later ones are not run (the chapters' sources have at most 14).")
    notebook_outputs = Integer(20000, config=True, help="Outputs of the whole notebook; beyond it, the kernel is stopped.")
    notebook_output_mb = Integer(16, config=True, help="Output of the whole notebook; beyond it, the kernel is stopped (MiB).")
    uid = Integer(65534, config=True, help="Unprivileged user the kernel runs as when the grader is root (nobody).")
    gid = Integer(65534, config=True, help="Its group (nogroup).")


def _v1_writable(controller: str) -> Path | None:
    base = CGROUP_ROOT / controller
    return base if (base / "cgroup.procs").exists() and os.access(base, os.W_OK) else None


def _v2_root() -> Path | None:
    ctrl = CGROUP_ROOT / "cgroup.controllers"
    if not ctrl.is_file() or not os.access(CGROUP_ROOT, os.W_OK):
        return None
    have = set(ctrl.read_text().split())
    return CGROUP_ROOT if {"memory", "pids"} <= have else None


class KernelCgroup:
    """The cgroup(s) of one kernel: created with limits, joined by the launcher, removed after."""

    def __init__(self, limits: GradingLimits):
        self.dirs: list[Path] = []
        name = f"{GROUP_PREFIX}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        mem, pids, v2 = _v1_writable("memory"), _v1_writable("pids"), _v2_root()
        try:
            if mem is not None and pids is not None:
                for base, files in ((mem, {"memory.limit_in_bytes": limits.memory_mb * MiB}),
                                    (pids, {"pids.max": limits.pids})):
                    d = base / name
                    d.mkdir()
                    self.dirs.append(d)
                    for f, v in files.items():
                        (d / f).write_text(str(v))
                    swap = d / "memory.memsw.limit_in_bytes"
                    if swap.exists():
                        swap.write_text(str(limits.memory_mb * MiB))
                self.kind = "cgroup v1 (memory, pids)"
            elif v2 is not None:
                sub = v2 / "cgroup.subtree_control"
                if not {"memory", "pids"} <= set(sub.read_text().split()):
                    sub.write_text("+memory +pids")
                d = v2 / name
                d.mkdir()
                self.dirs.append(d)
                (d / "memory.max").write_text(str(limits.memory_mb * MiB))
                (d / "memory.swap.max").write_text("0") if (d / "memory.swap.max").exists() else None
                (d / "pids.max").write_text(str(limits.pids))
                self.kind = "cgroup v2 (memory, pids)"
            else:
                self.kind = ""
        except OSError:
            self.remove()
            self.kind = ""

    @property
    def active(self) -> bool:
        return bool(self.dirs)

    def procs_files(self) -> list[str]:
        return [str(d / "cgroup.procs") for d in self.dirs]

    def peak_memory(self) -> int | None:
        for d in self.dirs:
            for f in ("memory.max_usage_in_bytes", "memory.peak"):
                if (d / f).is_file():
                    return int((d / f).read_text())
        return None

    def oom_killed(self) -> bool:
        for d in self.dirs:
            for f in ("memory.oom_control", "memory.events"):
                p = d / f
                if p.is_file():
                    for line in p.read_text().splitlines():
                        k, _, v = line.partition(" ")
                        if k == "oom_kill" and int(v or 0) > 0:
                            return True
        return False

    def kill(self) -> None:
        """Kill every task left in the group(s)."""
        for _ in range(20):
            pids = []
            for d in self.dirs:
                try:
                    pids += [int(p) for p in (d / "cgroup.procs").read_text().split()]
                except OSError:
                    pass
            if not pids:
                return
            for p in pids:
                try:
                    os.kill(p, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.05)

    def remove(self) -> None:
        self.kill()
        for d in self.dirs:
            for _ in range(40):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.05)
        self.dirs = []


def sweep_stale_cgroups(alive: Callable[[int], bool]) -> None:
    """Kill and remove the kernel cgroups of graders that no longer run (named ``…-<pid>-<id>``)."""
    bases = [b for b in (_v1_writable("memory"), _v1_writable("pids"), _v2_root()) if b is not None]
    for base in bases:
        for d in base.glob(f"{GROUP_PREFIX}-*"):
            pid = d.name[len(GROUP_PREFIX) + 1:].split("-")[0]
            if pid.isdigit() and not alive(int(pid)):
                group = KernelCgroup.__new__(KernelCgroup)
                group.dirs = [d]
                group.remove()


def rlimits(limits: GradingLimits, cgroup_active: bool) -> dict[str, tuple[int, int]]:
    """The rlimits the launcher sets before it starts bubblewrap (name -> (soft, hard))."""
    out = {
        "RLIMIT_CORE": (0, 0),
        "RLIMIT_FSIZE": (limits.file_mb * MiB,) * 2,
        "RLIMIT_CPU": (limits.cpu_seconds, limits.cpu_seconds + 5),
    }
    if not cgroup_active:
        # no group to hold them: cap the address space (torch reserves more than it touches, hence 2x)
        # and the processes of the grading user
        out["RLIMIT_AS"] = (2 * limits.memory_mb * MiB,) * 2
        out["RLIMIT_NPROC"] = (max(limits.pids, 64) * 4,) * 2
    return out


def apply_rlimits(values: dict[str, tuple[int, int]]) -> None:
    for name, (soft, hard) in values.items():
        resource.setrlimit(getattr(resource, name), (soft, hard))


def describe(limits: GradingLimits | None = None) -> list[str]:
    """Which limits are in force for a kernel started by this process, one line each."""
    limits = limits or GradingLimits()
    from course_tools.grading.sandbox import bwrap_supports_size

    group = KernelCgroup(limits)
    kind = group.kind
    group.remove()
    root = os.geteuid() == 0
    lines = [
        f"memory {limits.memory_mb} MiB, {limits.pids} tasks: "
        + (kind if kind else "NO cgroup can be made here (run the grader as root, or give it a delegated cgroup); "
                             f"address space capped at {2 * limits.memory_mb} MiB by RLIMIT_AS instead"),
        f"CPU {limits.cpu_seconds} s per process (RLIMIT_CPU), files up to {limits.file_mb} MiB (RLIMIT_FSIZE), no core files",
        f"tmpfs sizes: work {limits.workdir_mb} MiB, /tmp {limits.tmp_mb} MiB, home {limits.home_mb} MiB: "
        + ("enforced (mounted by the sandbox's launcher as root)" if root else
           "enforced by bubblewrap --size" if bwrap_supports_size() else
           "NOT sized here (bubblewrap < 0.10 without root): only the memory limit and RLIMIT_FSIZE bound them"),
        f"output {limits.cell_output_kb} KiB / {limits.cell_outputs} outputs per cell, {limits.notebook_output_mb} MiB per "
        f"notebook, {limits.wall_seconds} s per notebook, {limits.ungraded_cells} code cells outside the exercises: "
        "enforced by the grader's client",
        ("kernel runs as uid %d with no capabilities (setpriv, no_new_privs)" % limits.uid) if root else
        f"kernel runs as the grader's uid {os.geteuid()} in a user namespace, no capabilities",
    ]
    from course_tools.grading.seccomp import REFUSED_SYSCALLS, available

    why = available()
    lines.append(f"seccomp: {', '.join(REFUSED_SYSCALLS)} refused (no keyring shared between kernels)" if why is None
                 else f"seccomp: UNAVAILABLE ({why}): autograding refuses")
    return lines
