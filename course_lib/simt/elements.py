"""Array elements read and written by a warp in the course's SIMT engine (lessons 03 and 04).

One load or store is one warp-level access: the active lanes' indices become element offsets
(:mod:`course_lib.simt.memory`), the launch counts them and feeds the race detector and the traffic
model, and where several lanes store to one slot the schedule decides which lane wins. A
``cuda.local.array`` has a private copy per lane and is not counted.
"""
from __future__ import annotations

import numpy as np

from . import memory
from .races import READ, WRITE
from .values import WARP, Local, Unsupported, vec


class Elements:
    """Mixin of :class:`~course_lib.simt.warp.Warp`: ``arr[i]`` loaded or stored for the lanes of ``m``."""

    def load(self, arr, index, m, node):
        if isinstance(arr, Local):
            return self._local(arr, index, m, node, None)
        if isinstance(arr, tuple):
            if len(index) != 1 or vec(index[0]):
                raise Unsupported(f"{self.where(node)}: a tuple indexed by a per-lane value")
            return arr[int(index[0])]
        if not isinstance(arr, memory.Array):
            raise Unsupported(f"{self.where(node)}: `{self.source.text(node)}` indexes something that is not an array")
        lanes = np.flatnonzero(m)
        offs = memory.element_offsets(arr, index, lanes, self.where(node))
        self.launch.access(self, arr, READ, lanes, offs, node)
        values = arr.flat[offs]
        if not any(vec(i) for i in index):
            return values[0]
        out = np.zeros(WARP, dtype=arr.dtype)
        out[lanes] = values
        return out

    def store(self, arr, index, value, m, node) -> None:
        if isinstance(arr, Local):
            self._local(arr, index, m, node, value)
            return
        if not isinstance(arr, memory.Array):
            raise Unsupported(f"{self.where(node)}: `{self.source.text(node)}` is not an array element")
        lanes = np.flatnonzero(m)
        offs = memory.element_offsets(arr, index, lanes, self.where(node))
        self.launch.access(self, arr, WRITE, lanes, offs, node)
        values = value[lanes] if vec(value) else np.full(lanes.size, value)
        order = self.launch.schedule.lane_order(lanes.size)
        if order is not None and np.unique(offs).size < offs.size:   # several lanes, one slot: one wins
            offs, values = offs[order], values[order]
        arr.flat[offs] = values

    def _local(self, arr: Local, index, m, node, value):
        lanes = np.flatnonzero(m)
        if len(index) != len(arr.shape):
            raise IndexError(f"{self.where(node)}: {len(index)} indices for a local array of shape {arr.shape}")
        parts = []
        for i, size in zip(index, arr.shape):
            i = np.asarray(i[lanes] if vec(i) else np.full(lanes.size, i)).astype(np.int64)
            if np.any((i < 0) | (i >= size)):
                raise IndexError(f"{self.where(node)}: index out of bounds for a local array of shape {arr.shape}")
            parts.append(i)
        if value is None:
            out = np.zeros(WARP, dtype=arr.dtype)
            out[lanes] = arr.data[(lanes, *parts)]
            return out
        arr.data[(lanes, *parts)] = value[lanes] if vec(value) else value
        return None
