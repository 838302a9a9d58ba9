"""Warp shuffles and votes of the course's SIMT engine (lessons 03 and 04): ``cuda.shfl_*_sync``
exchange values between the lanes of one warp without shared memory; ``cuda.activemask``,
``ballot_sync``, ``all_sync`` and ``any_sync`` combine a predicate over the active lanes.
"""
from __future__ import annotations

import numpy as np

from .values import LANES, WARP, Unsupported, _broadcast, truth, vec


class Shuffles:
    """Mixin of :class:`~course_lib.simt.warp.Warp`: the warp-level shuffles and votes."""

    def shuffle(self, name: str, args, node, m):
        """``cuda.shfl_sync(mask, value, src_lane)``, ``shfl_up_sync``/``shfl_down_sync(mask, value,
        delta)``, ``shfl_xor_sync(mask, value, lane_mask)``: each active lane gets ``value`` of another
        lane of its warp. A source lane outside the warp (up/down) gives the lane its own value, as
        on the GPU; a source lane that is not active here is an error (its value is undefined)."""
        if len(args) != 3:
            raise TypeError(f"{self.where(node)}: cuda.{name} takes (mask, value, lane or delta)")
        _, value, k = args
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
        if not vec(value):
            return value
        bad = m & ~m[src]
        if bad.any():
            raise ValueError(f"{self.where(node)}: cuda.{name}: lane {int(np.flatnonzero(bad)[0])} reads lane "
                             f"{int(src[np.flatnonzero(bad)[0]])}, which is not active here (undefined on a GPU)")
        return value[src]

    def vote(self, name, args, m):
        if name == "activemask":
            return int(sum(1 << int(lane) for lane in np.flatnonzero(m)))
        pred = _broadcast(truth(args[1])) & m
        if name == "ballot_sync":
            return int(sum(1 << int(lane) for lane in np.flatnonzero(pred)))
        return bool(pred[m].all()) if name == "all_sync" else bool(pred.any())
