"""Barriers of the course's SIMT engine (lessons 03 and 04): every thread of a block that has not
exited must reach the same ``cuda.syncthreads()``.

``__syncthreads()`` waits until the threads of the block have reached it, and CUDA allows it in
conditional code "only if the conditional evaluates identically across the entire thread block,
otherwise the code execution is likely to hang or produce unintended side effects" (CUDA C++
Programming Guide, "Synchronization Functions"). A barrier inside an ``if`` that only some threads
take, or in a loop whose trip count differs between threads, is undefined behaviour on a GPU: the
block can hang, or the barrier can let the threads through before the others wrote what they
read (silently wrong results, and not every run). Numba's simulator and this engine, which runs
the warps one after the other, would otherwise both compute the right answer.

Threads that have **exited** (returned, or run off the end of the kernel) are not waited for, as
on a GPU since compute capability 7.0: "``__syncthreads()`` and PTX instruction ``bar.sync`` (and
their derivatives) are enforced per thread and thus will not succeed until reached by all
non-exited threads in the block" (CUDA C++ Programming Guide, "Compute Capability 7.x",
"Independent Thread Scheduling"). So ``if i >= n: return`` before a barrier is fine here, as there;
so is a warp that ends while the others sync once more. The engine runs each warp as far as it goes
before the block's barrier: a warp none of whose lanes reach it runs to its end, and has exited. The
lanes of a warp that took the other side of a branch wait for the warp to reconverge after it: they
are still running, so a barrier inside an ``if`` that splits a warp is reported. (A Volta GPU may let
those lanes run to their end too and the barrier complete; the rule above calls it undefined, and a
GPU before Volta hangs on it.) Numba's simulator releases its barrier once every live thread waits
at some barrier, so it runs such kernels to the right answer.

After every round of a block (each warp still running has stopped at a barrier or ended), the
launch (:mod:`course_lib.simt.launch`) calls :func:`check_arrivals`: every thread not exited must
wait at one and the same ``cuda.syncthreads*`` statement; otherwise it raises
:class:`DivergentBarrier`, naming the line, how many of the block's running threads reached it,
and where the others are. Two different ``cuda.syncthreads()`` lines (one in the ``if``, one in the
``else``) count as two barriers, as the rule above says, although a Volta GPU happens to match them.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


class DivergentBarrier(AssertionError):
    """Part of a block's running threads reached a ``cuda.syncthreads()`` and the others did not
    (or waited at another one): undefined behaviour on a GPU. The message names the line."""


@dataclass
class Arrival:
    """One warp's stop at a barrier: the warp, the statement, the lanes that reached it (``lanes``)
    and the lanes of the warp that have not exited (``running``), both boolean masks of 32."""

    warp: object
    statement: object
    lanes: np.ndarray
    running: np.ndarray


def check_arrivals(block: tuple, threads: int, arrivals: list[Arrival], thread_index) -> None:
    """Raise :class:`DivergentBarrier` unless every running thread of the arrived warps waits at one
    and the same barrier statement (warps that ended have exited and are not waited for).
    ``block``: the block's index; ``threads``: threads per block; ``thread_index(tid)``: a thread's
    (x, y, z)."""
    if not arrivals:
        return
    at: dict = {}          # statement -> (warp that got there first, threads waiting there)
    missing, first_missing = 0, None
    for arrival in sorted(arrivals, key=lambda a: a.warp.number):
        key = id(arrival.statement)
        first, count = at.get(key, (arrival, 0))
        at[key] = (first, count + int(np.count_nonzero(arrival.lanes)))
        elsewhere = arrival.running & ~arrival.lanes
        if elsewhere.any():
            missing += int(np.count_nonzero(elsewhere))
            if first_missing is None:
                first_missing = int(arrival.warp.tids[np.flatnonzero(elsewhere)[0]])
    if len(at) == 1 and not missing:
        return
    (first, reached), *others = at.values()
    running = reached + missing + sum(count for _, count in others)
    exited = f" (the other {threads - running} of its {threads} have exited)" if running < threads else ""
    parts = [f"{count} wait at the {_barrier(other)} instead" for other, count in others]
    if missing:
        parts.append(f"{missing} took a path that skips it (thread {_thread(thread_index(first_missing))} "
                     "is one)")
    raise DivergentBarrier(
        f"barrier reached by part of block {_thread(block)}: the {_barrier(first)} was reached by {reached} "
        f"of the block's {running} running threads{exited}; {' and '.join(parts)}. On a GPU every thread of a block "
        "that has not exited must reach the same cuda.syncthreads(): otherwise it is undefined behaviour (the "
        "block can hang, or the barrier can silently let threads through without waiting). Put the barrier "
        "where every thread of the block reaches it, outside the `if` or loop that only some threads take "
        "(threads with no work still sync)")


def _barrier(arrival: Arrival) -> str:
    source = arrival.warp.source
    return f"`{source.text(arrival.statement)}` at line {source.line(arrival.statement)} of {source.name}"


def _thread(index: tuple) -> str:
    """(3, 0, 0) -> '(3)', (1, 2, 0) -> '(1, 2)': trailing unused dimensions dropped."""
    values = list(index)
    while len(values) > 1 and values[-1] == 0:
        values.pop()
    return "(" + ", ".join(str(v) for v in values) + ")"
