"""Grading a kernel on *how* it uses memory, not only on what it computes (lesson 03).

The test cells launch the student's kernel in the course's SIMT engine (:mod:`course_lib.simt`),
which runs the lanes of each warp together and records every warp-level access. In grading this
runs in the trusted checker, on the kernel rebuilt there from its whitelisted source, so the
figures below are measured where student code cannot reach them:

- :func:`check_sectors`: every warp, at every global access site, moves at most the 32-byte
  sectors the bytes it asks for there need, plus one per 128 bytes for a row that does not start
  on a sector boundary (coalescing; CUDA C++ Best Practices Guide, "Coalesced Access to Global
  Memory");
- :func:`check_bank_conflicts`: no warp access of any shared access site has more than
  ``max_degree`` distinct words in one of the 32 banks, nor any warp more than ``max_degree``
  times the passes its words need at a site (CUDA C++ Programming Guide, "Shared Memory",
  compute capability 5.x and later);
- :func:`check_divergence`: at most ``per_block`` warp-level branches per block split their lanes.

The first two judge each site by its worst warp, over every time that warp runs the line, never
by a sum or an average over the launch: a kernel cannot pass by adding cheap accesses (a loop in
which one lane rewrites one element) to an uncoalesced or conflicting one, nor by splitting a
warp's access into one-lane accesses (each as cheap as possible, together as costly as before).

Each prints one "ok: NAME" line or raises :class:`~course_lib.checks.core.CheckFailed` saying the
target and what was measured, with the source line. Nothing is written to stderr.
"""
from __future__ import annotations

import warnings

import numpy as np

from ..simt.counts import SharedMemoryRace
from .core import CheckFailed, _ok
from .kernel_launch import check_inputs_unchanged
from .unanswered import python_function, refuse_unanswered


def launch_traffic(kernel, grid, block, args, outputs=(-1,)):
    """Run ``kernel[grid, block](*args)`` in the SIMT engine on copies of the array arguments and
    return (the output ``args[outputs[0]]`` after the launch, the :class:`course_lib.simt.Result`).
    Every array argument not in ``outputs`` must come back unchanged, else CheckFailed. What the
    kernel does wrong in the engine is a CheckFailed of one line naming its line (no engine
    frames): a shared-memory race, a ``cuda.syncthreads()`` that only part of a block's running
    threads reach, a shuffle with an active lane outside its mask or reading an inactive lane, an
    index outside an array, a statement the engine does not run (:func:`kernel_fault`); a kernel
    that still holds the release's stub is :class:`~course_lib.checks.unanswered.NotAnswered` before
    it runs."""
    __tracebackhide__ = True  # IPython and pytest show the caller's line, not this one
    from course_lib import simt

    refuse_unanswered(kernel)
    args = list(args)
    outs = {i % len(args) for i in outputs}
    work = [np.array(a, copy=True) if isinstance(a, np.ndarray) else a for a in args]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            result = simt.run(kernel, grid, block, *work)
        except (SharedMemoryRace, simt.DivergentBarrier, simt.InactiveLane, IndexError, simt.Unsupported) as exc:
            raise kernel_fault(kernel, exc) from None
    check_inputs_unchanged(kernel, args, work, outs)
    return work[outputs[0] % len(args)], result


def kernel_fault(kernel, exc: Exception) -> CheckFailed:
    """The one-line failure for what ``kernel`` did wrong in the SIMT engine (``exc``: a
    ``SharedMemoryRace``, a ``DivergentBarrier``, an ``InactiveLane``, an ``IndexError`` naming the
    kernel's line, or ``Unsupported``)."""
    from course_lib import simt

    name = getattr(python_function(kernel), "__name__", "the kernel")
    expected = ("no shared-memory race" if isinstance(exc, SharedMemoryRace) else
                "every running thread of a block at each cuda.syncthreads()" if isinstance(exc, simt.DivergentBarrier)
                else "every lane a shuffle names or reads taking part in it" if isinstance(exc, simt.InactiveLane)
                else "every index inside its array" if isinstance(exc, IndexError) else
                "statements the SIMT engine runs (those of the lesson's kernels)")
    return CheckFailed(f"{name}: expected {expected}, got: {exc}")


def _fail(name: str, expected: str, got: str, hint: str = "") -> None:
    __tracebackhide__ = True
    raise CheckFailed(f"{name}: expected {expected}, got {got}" + (f". Hint: {hint}" if hint else ""))


def line_slack(ideal: int) -> int:
    """Sectors allowed beyond ``ideal``: one per 128 bytes asked for (4 sectors), for rows that do
    not start on a 32-byte sector (a warp's 128 bytes then span 5)."""
    return -(-ideal // 4)


def check_sectors(name: str, result, hint: str = "") -> None:
    """Every warp moves, at every global access site, at most the 32-byte sectors that could hold
    the distinct bytes it asks for there, plus one per 128 of those bytes (a row need not start on
    a sector). Judged warp by warp over every time the warp runs the line (a site's worst warp),
    never by a sum or an average over the site, which extra cheap accesses would dilute, nor per
    access, which a warp going one lane at a time would pass. A warp of 32 lanes reading 32
    neighbouring float32 needs 4 (5); down a column of a row-major matrix it moves 32."""
    __tracebackhide__ = True
    sites = result.traffic.global_sites()
    if not sites:
        _fail(name, "a kernel that reads and writes global memory", "no global access at all")
    worst = max(sites, key=lambda s: s.worst_cost - s.worst_ideal - line_slack(s.worst_ideal))
    ideal, most = worst.worst_ideal, worst.worst_ideal + line_slack(worst.worst_ideal)
    if worst.worst_cost > most:
        _fail(name, f"<= {most} sectors per warp ({ideal} hold the bytes this warp asks for at this line, "
              "+ 1 per 128 bytes for a row not starting on a 32-byte sector)",
              f"{worst.worst_cost} at line {worst.line} ({worst.verb} {worst.text}: {worst.worst_warp()}; "
              f"{100 * ideal / worst.worst_cost:.0f} % of the bytes moved are used)", hint)
    _ok(name)


def check_bank_conflicts(name: str, result, max_degree: int = 1, hint: str = "") -> None:
    """No warp access of any shared-memory access site has a conflict degree above ``max_degree``
    (the most distinct 4-byte words one warp access puts in one of the 32 banks; 1 means one pass,
    lanes reading the same word count once: a broadcast), and no warp takes more than
    ``max_degree`` times the passes its distinct words need at a site (one per 32 words), over
    every time it runs the line: going one lane at a time is no way around a conflict. Needs at
    least one shared access."""
    __tracebackhide__ = True
    sites = result.traffic.shared_sites()
    if not sites:
        _fail(name, "a kernel that stages its data in shared memory", "no shared-memory access at all",
              hint or "declare a tile with cuda.shared.array and go through it")
    target = "no bank conflict (degree 1)" if max_degree == 1 else f"at most a {max_degree}-way bank conflict"
    worst = max(sites, key=lambda s: s.max_degree)
    if worst.max_degree > max_degree:
        _fail(name, target, f"a {worst.max_degree}-way conflict at line {worst.line} ({worst.verb} {worst.text}: "
              f"{worst.pattern()})", hint)
    worst = max(sites, key=lambda s: s.worst_cost - max_degree * s.worst_ideal)
    if worst.worst_cost > max_degree * worst.worst_ideal:
        _fail(name, f"{target}, and no warp taking more passes at a line than {max_degree} x what its words need",
              f"{worst.worst_cost} passes at line {worst.line} ({worst.verb} {worst.text}: {worst.worst_warp()}, "
              f"where its words need {worst.worst_ideal})", hint)
    _ok(name)


def divergent_per_block(result) -> float:
    """Warp-level branches that split their lanes, per block of the launch (summed over every ``if``)."""
    return result.traffic.summary()["divergent_warp_branches"] / result.blocks


def check_divergence(name: str, result, per_block: int, why: str, hint: str = "") -> None:
    """At most ``per_block`` divergent warp branches per block (``why`` says where that budget
    comes from); a failure names the ``if`` that splits the most warps and its idle lanes."""
    __tracebackhide__ = True
    got = divergent_per_block(result)
    if got > per_block:
        worst = max(result.traffic.divergent_branches(), key=lambda b: b.divergent)
        _fail(name, f"at most {per_block} divergent warp branches per block ({why})",
              f"{got:.3g}; the worst: {worst.sentence()}", hint)
    _ok(name)
