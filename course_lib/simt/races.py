"""The race detector of the course's SIMT engine (lessons 03 and 04), the course's only one: it
reports :class:`~course_lib.simt.counts.Race` records and raises
:class:`~course_lib.simt.counts.SharedMemoryRace`; the Numba-simulator oracle in ``tests/`` finds the
same races on every kernel of the lessons (tests/lib/test_simt_agreement.py).

Between two ``cuda.syncthreads()`` the threads of a block run in no fixed order, and since Volta
not even the lanes of one warp are guaranteed to run in step (CUDA C++ Programming Guide, "SIMT
Architecture", independent thread scheduling). So a shared slot that one thread writes and another
thread reads or writes (without atomics) in the same barrier interval is a race, whatever order the
engine happened to run them in: the check works on the log of who touched which slot in which
interval, never on values. ``cuda.syncwarp()`` orders the lanes of one warp: two accesses by lanes of
the same warp separated by a ``syncwarp`` do not race.
"""
from __future__ import annotations

import numpy as np

from .counts import Race

WRITE, READ, ATOMIC = 0, 1, 2


class RaceLog:
    """Shared-memory accesses of one block: for each warp-level access, the slots, the threads,
    how (write/read/atomic), and each lane's barrier interval and syncwarp epoch."""

    def __init__(self):
        self.parts: list = []

    def add(self, array, offsets, tids, how: int, warp: int, intervals, epochs) -> None:
        """Note one warp-level access (all vectors hold one entry per active lane)."""
        self.parts.append((array, offsets, tids, how, warp, intervals, epochs))

    def races(self, block: tuple, thread_index) -> list[Race]:
        """Every racy slot of this block in the oracle's order (interval, array, index);
        ``thread_index(tid)`` gives a thread's (x, y, z)."""
        groups: dict = {}
        for array, offsets, tids, how, warp, intervals, epochs in self.parts:
            for off, tid, interval, epoch in zip(offsets.tolist(), tids.tolist(), intervals.tolist(), epochs.tolist()):
                groups.setdefault((interval, array.name, off), (array, []))[1].append((tid, warp, epoch, how))
        found = []
        for (interval, name, off), (array, entries) in sorted(groups.items(), key=lambda kv: kv[0]):
            if len(entries) < 2 or all(e[3] == READ for e in entries):
                continue
            pair = _first_conflict(entries, thread_index)
            if pair:
                first, other, kind = pair
                index = tuple(int(i) for i in np.unravel_index(off, array.shape))
                found.append(Race(block, interval, name, index, thread_index(first), thread_index(other), kind))
        return found


def _conflict(a, b) -> bool:
    """Two accesses (tid, warp, epoch, how) by different threads not ordered by a syncwarp."""
    return a[0] != b[0] and (a[1] != b[1] or a[2] == b[2])


def _first_conflict(entries, thread_index):
    """(thread, other thread, kind) of the slot's race, chosen as the oracle chooses it, or None."""
    order = sorted(entries, key=lambda e: thread_index(e[0]))
    atomic = [e for e in order if e[3] == ATOMIC]
    writers = [e for e in order if e[3] == WRITE]
    readers = [e for e in order if e[3] == READ]
    if atomic:
        for plain, kind in ((writers, "atomic_write"), (readers, "atomic_read")):
            for a in atomic:
                for p in plain:
                    if _conflict(a, p):
                        return a[0], p[0], kind
        return None
    for others, kind in ((writers, "write"), (readers, "read")):
        for w in writers:
            for o in others:
                if _conflict(w, o):
                    return w[0], o[0], kind
    return None
