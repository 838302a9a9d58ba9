"""Warp shuffles and votes of the course's SIMT engine (lessons 03 and 04): ``cuda.shfl_*_sync``
exchange values between the lanes of one warp without shared memory; ``cuda.activemask``,
``ballot_sync``, ``all_sync`` and ``any_sync`` combine a predicate over the active lanes.

A shuffle is one warp-level instruction: every lane named in its ``mask`` must call it (CUDA C++
Programming Guide, "Warp Shuffle Functions": each calling thread must be in the mask, and the
lane it reads from must take part, else the value is undefined), so the engine refuses a shuffle
that an active lane calls without being in the mask, or that reads a lane which is not active
there (:class:`InactiveLane`). The traffic model counts shuffles per warp (what a budget of
"log2(32) = 5 shuffles per warp" holds a warp reduction to).
"""
from __future__ import annotations

import numpy as np

from .values import LANES, WARP, Unsupported, _broadcast, truth, vec


class InactiveLane(ValueError):
    """A shuffle whose value is undefined on a GPU: an active lane outside the shuffle's mask, or a
    lane reading a lane that is not active at the shuffle (the message names the line and the lanes)."""


class Shuffles:
    """Mixin of :class:`~course_lib.simt.warp.Warp`: the warp-level shuffles and votes."""

    def shuffle(self, name: str, args, node, m):
        """``cuda.shfl_sync(mask, value, src_lane)``, ``shfl_up_sync``/``shfl_down_sync(mask, value,
        delta)``, ``shfl_xor_sync(mask, value, lane_mask)``: each active lane gets ``value`` of another
        lane of its warp. A source lane outside the warp (up/down) gives the lane its own value, as
        on the GPU; an active lane outside ``mask``, or a source lane that is not active here, is
        :class:`InactiveLane` (the value is undefined on a GPU)."""
        if len(args) != 3:
            raise TypeError(f"{self.where(node)}: cuda.{name} takes (mask, value, lane or delta)")
        mask, value, k = args
        k = _broadcast(k).astype(np.int64)
        if name == "shfl_sync":
            src = k % WARP
        elif name == "shfl_down_sync":
            src = np.where(LANES + k < WARP, LANES + k, LANES)
        elif name == "shfl_up_sync":
            src = np.where(LANES - k >= 0, LANES - k, LANES)
        elif name == "shfl_xor_sync":
            src = (LANES ^ k) % WARP
        else:
            raise Unsupported(f"{self.where(node)}: cuda.{name} is not supported")
        in_mask = (_broadcast(mask).astype(np.int64) >> LANES) & 1 == 1
        outside = m & ~in_mask
        if outside.any():
            lane = int(np.flatnonzero(outside)[0])
            raise InactiveLane(f"{self.where(node)}: cuda.{name}: lane {lane} calls it but is not in its mask "
                               f"{int(_broadcast(mask)[lane]) & 0xFFFFFFFF:#010x} (undefined on a GPU)")
        traffic = self.launch.traffic
        if traffic is not None and m.any():
            traffic.shuffles[(self.block.index, self.number)] += 1
        if not vec(value):
            return value
        bad = m & ~m[src]
        if bad.any():
            lane = int(np.flatnonzero(bad)[0])
            raise InactiveLane(f"{self.where(node)}: cuda.{name}: lane {lane} reads lane {int(src[lane])}, which "
                               "is not active here (undefined on a GPU)")
        return value[src]

    def vote(self, name, args, m):
        if name == "activemask":
            return int(sum(1 << int(lane) for lane in np.flatnonzero(m)))
        pred = _broadcast(truth(args[1])) & m
        if name == "ballot_sync":
            return int(sum(1 << int(lane) for lane in np.flatnonzero(pred)))
        return bool(pred[m].all()) if name == "all_sync" else bool(pred.any())
