"""Atomics of the course's SIMT engine (lessons 03 and 04): ``cuda.atomic.add`` and the others.

The active lanes of a warp update one after the other, in the schedule's lane order, and each gets the
value it saw before its own update. The launch counts an atomic, a read and a write per lane
(:mod:`course_lib.simt.launch`).
"""
from __future__ import annotations

import numpy as np

from . import memory
from .values import WARP, Unsupported, vec

_ATOMICS = ("add", "sub", "max", "min", "nanmax", "nanmin", "and_", "or_", "xor", "exch", "inc", "dec", "cas",
            "compare_and_swap")


class Atomics:
    """Mixin of :class:`~course_lib.simt.warp.Warp`: ``cuda.atomic.<op>(array, index, ...)``."""

    def atomic(self, op: str, node, m):
        """``cuda.atomic.<op>``: the active lanes update one after the other (in the schedule's lane
        order); each gets the value it saw before its own update."""
        if op not in _ATOMICS:
            raise Unsupported(f"{self.where(node)}: cuda.atomic.{op} is not supported")
        args = [self.eval(a, m) for a in node.args]
        arr = args[0]
        if not isinstance(arr, memory.Array):
            raise Unsupported(f"{self.where(node)}: atomics on local arrays are not supported")
        if op == "compare_and_swap":
            index, rest = (0,) * arr.ndim, args[1:]
        else:
            index, rest = args[1], args[2:]
        index = index if isinstance(index, tuple) else (index,)
        lanes = np.flatnonzero(m)
        offs = memory.element_offsets(arr, index, lanes, self.where(node))
        self.launch.atomic_access(self, arr, op, lanes, offs, node)
        order = self.launch.schedule.lane_order(lanes.size)
        olds = np.zeros(WARP, dtype=arr.dtype)
        flat = arr.flat
        for k in (range(lanes.size) if order is None else order):
            lane, off = int(lanes[k]), int(offs[k])
            vals = [r[lane] if vec(r) else r for r in rest]
            old = flat[off]
            olds[lane] = old
            flat[off] = _atomic_update(op, old, vals)
        if not any(vec(i) for i in index) and lanes.size == 1:
            return olds[lanes[0]]
        return olds


def _atomic_update(op: str, old, vals):
    if op == "add":
        return old + vals[0]
    if op == "sub":
        return old - vals[0]
    if op in ("max", "nanmax"):
        return old if (op == "nanmax" and np.isnan(vals[0])) else max(old, vals[0])
    if op in ("min", "nanmin"):
        return old if (op == "nanmin" and np.isnan(vals[0])) else min(old, vals[0])
    if op == "and_":
        return old & vals[0]
    if op == "or_":
        return old | vals[0]
    if op == "xor":
        return old ^ vals[0]
    if op == "exch":
        return vals[0]
    if op == "inc":
        return 0 if old >= vals[0] else old + 1
    if op == "dec":
        return vals[0] if (old == 0 or old > vals[0]) else old - 1
    expected, new = vals             # cas / compare_and_swap
    return new if old == expected else old
