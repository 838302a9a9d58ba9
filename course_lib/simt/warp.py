"""One warp of the course's SIMT engine (lessons 03 and 04): the 32 lanes of a warp execute a
kernel's Python syntax tree together, under an active mask.

:class:`Warp` holds one warp's state (its threads, the current call :class:`~course_lib.simt.statements.Frame`,
barrier intervals, syncwarp epochs, per-lane access counts) and brings together one module per part of
the execution: :mod:`~course_lib.simt.statements` (statements, control flow and divergence,
assignment), :mod:`~course_lib.simt.expressions` (expressions under the mask),
:mod:`~course_lib.simt.elements` (loads and stores of array elements), :mod:`~course_lib.simt.calls`
(built-ins and device functions), :mod:`~course_lib.simt.intrinsics` (``cuda.*`` and ``math.*``),
:mod:`~course_lib.simt.atomics` and :mod:`~course_lib.simt.shuffles` (shuffles and votes). The values
they compute with are in :mod:`~course_lib.simt.values`.

Arithmetic follows NumPy, as in Numba's CUDA simulator (one Python thread per CUDA thread, NumPy
scalars): float32 stays float32, a Python float mixes in weakly. ``cuda.syncthreads()`` hands
control back to the block (:mod:`course_lib.simt.launch`), which runs the other warps up to the same
barrier in the order the chosen schedule gives.
"""
from __future__ import annotations

import numpy as np

from .atomics import Atomics
from .calls import Calls
from .elements import Elements
from .expressions import Expressions
from .intrinsics import Intrinsics
from .shuffles import Shuffles
from .statements import Frame, Statements
from .values import WARP, Dim3


class Warp(Statements, Expressions, Elements, Calls, Intrinsics, Atomics, Shuffles):
    """One warp of one block running one kernel. ``lanes_exist``: lanes that are threads of the
    block (a block of 48 threads has a second warp of 16). Per-lane counts of memory accesses are in
    ``counts`` (32 x number of kinds, the kinds of :data:`course_lib.simt.counts.ACCESS_KINDS`)."""

    def __init__(self, launch, block, index: int, tids: np.ndarray, lanes_exist: np.ndarray):
        self.launch, self.block, self.number = launch, block, index
        self.tids, self.exists = tids, lanes_exist
        bx, by, _ = launch.block_dim
        self.thread = Dim3(tids % bx, (tids // bx) % by, tids // (bx * by))
        self.intervals = np.zeros(WARP, dtype=np.int64)   # syncthreads passed, per lane
        self.epochs = np.zeros(WARP, dtype=np.int64)      # syncwarp passed, per lane
        self.counts = np.zeros((WARP, len(launch.kinds)), dtype=np.int64)
        self.frame: Frame | None = None
        self.source = None
        self.depth = 0

    # ------------------------------------------------------------------ running
    def run(self, source, args):
        """Generator: run the kernel; yields at every barrier (see :mod:`course_lib.simt.launch`)."""
        self.source = source
        self.frame = Frame(self.exists)
        self.frame.env.update(zip(source.params, args))
        with np.errstate(all="ignore"):
            yield from self.block_(source.tree.body, self.exists)

    def where(self, node) -> str:
        return f"{self.source.name}, line {self.source.line(node)}"
