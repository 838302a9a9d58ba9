"""A fair CPU share per sandbox: every process a sandbox starts (the student's kernel, the
checker and its worker processes, whatever they fork) runs in a cgroup of its own with the same
weight as every other sandbox's, so the kernel's scheduler splits the CPUs between sandboxes, not
between processes. A student who forks 150 busy processes gets one sandbox's share, and the
student graded beside them keeps theirs.

Where systemd can start transient scopes, the scope is that cgroup (``CPUWeight``, see
:func:`course_tools.grading.sandbox.sandbox_argv`). Elsewhere this module makes the groups itself
under ``/sys/fs/cgroup/cpu/course-grading`` (cgroups v1, as in containers like the course's CI
machine) or ``/sys/fs/cgroup/course-grading`` (cgroups v2 with the ``cpu`` controller); the
process joins its group between fork and exec, so nothing it starts escapes. Without either (not
root, macOS), sandboxes share the CPUs process by process, and :func:`describe` says so.
"""
from __future__ import annotations

import atexit
import os
import threading
import time
from functools import lru_cache
from pathlib import Path

V1 = Path("/sys/fs/cgroup/cpu")
V2 = Path("/sys/fs/cgroup")
PARENT = "course-grading"
V1_SHARES = 1024        # cpu.shares of every sandbox (v1's default weight)
V2_WEIGHT = 100         # cpu.weight of every sandbox (v2's default weight)


@lru_cache(maxsize=None)
def _base() -> tuple[Path, str] | None:
    """(folder the groups go in, weight file) where this process can make CPU cgroups, else None."""
    candidates = []
    if (V1 / "cpu.shares").exists():
        candidates.append((V1 / PARENT, "cpu.shares"))
    controllers = V2 / "cgroup.controllers"
    if controllers.exists() and "cpu" in controllers.read_text().split():
        candidates.append((V2 / PARENT, "cpu.weight"))
    for base, weight in candidates:
        probe = base / f"probe-{os.getpid()}"
        try:
            base.mkdir(exist_ok=True)
            if weight == "cpu.weight":   # v2: the parent must hand the cpu controller to its children
                control = base / "cgroup.subtree_control"
                if "cpu" not in control.read_text().split():
                    control.write_text("+cpu")
            probe.mkdir()
            ok = (probe / weight).exists() and (probe / "cgroup.procs").exists()
            probe.rmdir()
        except OSError:
            continue
        if ok:
            _sweep(base)
            return base, weight
    return None


def _sweep(base: Path) -> None:
    """Remove groups left by graders that have ended (their folder names carry the grader's pid)."""
    for group in base.iterdir():
        if not group.is_dir():
            continue
        owner = group.name.split("-")[0]
        if owner.isdigit() and not Path(f"/proc/{owner}").exists():
            try:
                group.rmdir()
            except OSError:
                pass


def available() -> bool:
    """Whether this process can give each sandbox a CPU cgroup of its own."""
    return _base() is not None


def describe() -> str:
    """One sentence: how the CPUs are shared between sandboxes on this machine."""
    found = _base()
    if found is None:
        return ("process by process (no CPU cgroup can be made here: not root, or no cgroup cpu "
                "controller); a student who forks many busy processes slows the others graded at once")
    base, weight = found
    return f"equally between sandboxes: one CPU cgroup each under {base} ({weight})"


class CpuGroup:
    """One sandbox's CPU cgroup. :meth:`join` runs in the child between fork and exec."""

    _count = 0

    def __init__(self) -> None:
        found = _base()
        self.path: Path | None = None
        if found is None:
            return
        with _LOCK:
            _remove_pending()
        base, weight = found
        CpuGroup._count += 1
        path = base / f"{os.getpid()}-{CpuGroup._count}-{time.monotonic_ns()}"
        try:
            path.mkdir()
            (path / weight).write_text(str(V1_SHARES if weight == "cpu.shares" else V2_WEIGHT))
        except OSError:
            return
        self.path = path
        self._procs = str(path / "cgroup.procs")

    def join(self) -> None:
        """Move the calling process into the group (children it forks later stay in it)."""
        if self.path is not None:
            fd = os.open(self._procs, os.O_WRONLY)
            try:
                os.write(fd, str(os.getpid()).encode())
            finally:
                os.close(fd)

    def pids(self) -> list[int]:
        """Processes in the group now."""
        if self.path is None:
            return []
        try:
            return [int(p) for p in (self.path / "cgroup.procs").read_text().split()]
        except OSError:
            return []

    def remove(self) -> None:
        """Delete the group (its sandbox was killed before). Processes that are still exiting
        keep it a moment: then it is deleted later, when the next group is made or this grader
        ends, never waited for here."""
        with _LOCK:
            if self.path is not None:
                _PENDING.append(self.path)
                self.path = None
            _remove_pending()


_PENDING: list[Path] = []   # groups of stopped sandboxes not yet empty when they were stopped
_LOCK = threading.Lock()    # grading threads stop and start sandboxes at once


def _remove_pending() -> None:
    for path in list(_PENDING):
        try:
            path.rmdir()
        except FileNotFoundError:
            pass
        except OSError:
            continue
        _PENDING.remove(path)


atexit.register(_remove_pending)
