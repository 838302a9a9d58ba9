"""Served kernels and checkers kept between the grading runs of one process. A run's slot borrows
a served kernel and a served checker (``lend``) and gives them back when the run ends
(``take_back``), so the next run graded in this process (a ``course build`` worker grades one
lesson after another; a test module grades class after class) forks from templates that imported
torch, ipykernel and the earlier lessons' modules already; each lesson's own import statements are
added to them (``add_preload``). A kept template is for the same kind, limits, slot and sandbox
only (but for the time limits per cell and notebook, which the grader keeps from outside).

Without a sandbox (``sandbox=False``: the build's round trip, whose submissions are the
instructor's own code, or ``course grade --no-sandbox-i-trust-this-code``) nothing here defends a
template against the code it serves; between two submissions the kernel's and the checker's
process trees are killed from outside as in one run (``served_kernel``, ``CheckerProcess.finish``).
With a sandbox, a kept template serves the next run's first student as it serves a run's next
student: under its slot's sandbox user (one per process and slot: ``sandbox.sandbox_uid``), its
own process unreadable to the code it forks (non-dumpable), and the sandbox's folders, ``/tmp``
and IPC emptied after every submission; a sandbox that could not be cleared is stopped then, and a
template found dead is started afresh.

The kept templates live in a scratch folder of this process, and are killed (SIGKILL: no
interpreter finalization) and their folder removed when the process exits; a template whose owner
died ends when its stdin closes (a sandbox's bubblewrap with its parent).
"""
from __future__ import annotations

import dataclasses
import os
import shutil
import socket
import tempfile
import threading
from multiprocessing import util
from pathlib import Path

from . import sandboxed_process
from .checker_process import CheckerProcess
from .served_kernel import ServedKernel

MAX_KEPT = 4        # templates kept at most (each holds torch: a few hundred MiB)
_KEPT: list = []    # (key, served kernel or checker), oldest first
_LOCK = threading.Lock()
_SCRATCH: list[Path] = []


def _scratch() -> Path:
    """This process's scratch folder for kept templates (short: the kernels' Unix sockets live
    under it; named as ``lesson_run.scratch_folder`` names one in the temporary folder, so a later
    run removes it when this process was killed outright)."""
    with _LOCK:
        if not _SCRATCH:
            name = f"course-grade-{socket.gethostname()[:20]}-{os.urandom(3).hex()}-{os.getpid()}"
            _SCRATCH.append(Path(tempfile.gettempdir()) / name)
            util.Finalize(None, close_all, exitpriority=10)
        return _SCRATCH[0]


def _sandboxed_part(limits):
    """The limits a template's sandbox was started with: all but the time a cell and a notebook
    may take, which the grader keeps from outside, per submission (``execute``); a template kept
    from a run with other time limits serves as well."""
    return dataclasses.replace(limits, cell_seconds=0.0, notebook_seconds=0.0)


def lend(kind: str, limits, preload: str, slot: int = 0, sandbox: bool = False):
    """A served ``"kernel"`` or ``"checker"`` for ``slot``, with ``limits``, in its sandbox or not,
    whose template has run (or will run at its start) ``preload``: a kept one when there is one,
    else a new one."""
    with _LOCK:
        kept = next((i for i, (k, old) in enumerate(_KEPT) if k[0] == kind and k[2:] == (slot, sandbox)
                     and _sandboxed_part(old.limits) == _sandboxed_part(limits)), None)
        served = _KEPT.pop(kept)[1] if kept is not None else None
    if served is None:
        scratch = _scratch()
        if kind == "kernel":
            return ServedKernel(limits, slot, scratch, preload, sandbox=sandbox)
        return CheckerProcess(limits, slot, sandbox, scratch, preload=preload)
    served.limits = limits   # the same sandbox; this run's time limits
    if served.proc is not None:
        with sandboxed_process._LIVE_LOCK:   # killed with the run's sandboxes on SIGTERM
            sandboxed_process.LIVE.add(served)
    served.add_preload(preload)
    return served


def take_back(served) -> None:
    """Keep a borrowed kernel or checker for the next run (no run uses it meanwhile: it leaves the
    live sandboxes); the oldest kept beyond ``MAX_KEPT`` is closed."""
    if served.proc is not None and served.proc.poll() is not None:
        served.stop()     # killed (SIGTERM) or ended: a fresh template at its next start
    with sandboxed_process._LIVE_LOCK:
        sandboxed_process.LIVE.discard(served)
    key = ("kernel" if isinstance(served, ServedKernel) else "checker", repr(served.limits), served.slot,
           served.sandbox)
    with _LOCK:
        _KEPT.append((key, served))
        old = _KEPT.pop(0)[1] if len(_KEPT) > MAX_KEPT else None
    if old is not None:
        old.close()


def close_all() -> None:
    """Close every kept template and remove this process's scratch folder (at exit, and when a
    signal stops a run: the process is about to end)."""
    with _LOCK:
        kept, _KEPT[:] = list(_KEPT), []
        scratch = list(_SCRATCH)
    for _, served in kept:
        served.close()
    for folder in scratch:
        shutil.rmtree(folder, ignore_errors=True)
