"""Launching a kernel in the course's SIMT engine (lessons 03 and 04): blocks, their warps, barriers,
the schedule, and what comes back (results in place, access counts, races, traffic).

A block's warps run one at a time up to the next ``cuda.syncthreads()`` (or to the end), in the order
the schedule gives, and the block goes on once every warp still running has reached the barrier;
every thread that has not exited must wait at that same barrier, else a DivergentBarrier
(:mod:`course_lib.simt.barriers`: undefined behaviour on a GPU).
Blocks run one after the other, also in schedule order. Schedules: ``'in_order'`` (warps and blocks
in index order; where several lanes of one instruction store to one slot the last lane wins),
``'reversed'`` (everything backwards, the first lane wins), ``'random'`` (a fresh random order of
warps for every barrier interval and of lanes for every colliding store, from ``seed``). A correct
kernel gives the same result under every schedule; a racy one may not, and the race detector
(:mod:`course_lib.simt.races`) names it under every schedule.

Shared memory is fresh for every block and poisoned (NaN, or an integer sentinel): a slot read before
any thread of the block wrote it is reported (``uninitialised``) and shows in the output.
"""
from __future__ import annotations

import builtins
import time
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from . import memory
from .barriers import Arrival, check_arrivals
from .counts import ACCESS_KINDS, AccessCounts, SharedMemoryRace
from .kernel_source import kernel_source
from .races import ATOMIC, READ, WRITE, RaceLog
from .traffic import Traffic
from .values import _MISSING, WARP, resolve_global
from .warp import Warp

SCHEDULES = ("in_order", "reversed", "random")


class Schedule:
    """The order in which blocks, warps and colliding lanes go (see the module docstring)."""

    def __init__(self, name: str = "in_order", seed: int = 0):
        if name not in SCHEDULES:
            raise ValueError(f"schedule must be one of {SCHEDULES}, not {name!r}")
        self.name = name
        self.rng = np.random.default_rng(seed)

    def order(self, items: list) -> list:
        if self.name == "in_order":
            return list(items)
        if self.name == "reversed":
            return list(reversed(items))
        return [items[k] for k in self.rng.permutation(len(items))]

    def lane_order(self, n: int):
        """Order of n colliding lanes' stores (the last one wins), or None for index order."""
        if self.name == "in_order" or n < 2:
            return None
        return np.arange(n)[::-1] if self.name == "reversed" else self.rng.permutation(n)


@dataclass
class Uninitialised:
    """A shared-array read of slots no thread of the block had written (they hold poison)."""

    line: int
    array: str
    text: str
    block: tuple
    lanes: int

    def __str__(self) -> str:
        return (f"line {self.line} reads {self.text}: {self.lanes} thread(s) of block {self.block} read "
                f"slot(s) of {self.array} that no thread had written (shared memory starts undefined)")


@dataclass
class Result:
    """What one launch in the SIMT engine measured. ``counts``: accesses per thread, as
    :class:`course_lib.simt.counts.AccessCounts`; ``races``: shared-memory races found;
    ``uninitialised``: reads of unwritten shared slots; ``traffic``: the traffic model's record
    (None when launched with ``traffic=False``); ``shared_bytes``: shared memory per block (bytes);
    ``seconds``: wall time of the simulation on this machine."""

    kernel: str
    grid: tuple
    block: tuple
    counts: AccessCounts
    races: list
    uninitialised: list
    traffic: Traffic | None
    shared_bytes: int
    schedule: str
    seconds: float
    args: tuple = field(repr=False, default=())

    @property
    def threads_per_block(self) -> int:
        return int(np.prod(self.block))

    @property
    def blocks(self) -> int:
        return int(np.prod(self.grid))

    def report(self) -> str:
        """The traffic report, the races and the uninitialised reads, in sentences."""
        parts = [f"{self.kernel}: grid {self.grid}, block {self.block}, {self.shared_bytes} bytes of shared "
                 "memory per block"]
        if self.threads_per_block % 32:
            parts.append(f"blocks of {self.threads_per_block} threads leave {32 - self.threads_per_block % 32} "
                         "lanes of their last warp empty (use a multiple of 32 threads)")
        if self.traffic is not None:
            parts.append(self.traffic.report())
        parts += [str(r) for r in self.races[:5]] + [str(u) for u in self.uninitialised[:5]]
        return "\n".join(parts)


def _dim3(value) -> tuple:
    parts = tuple(int(v) for v in value) if isinstance(value, (tuple, list)) else (int(value),)
    if not 1 <= len(parts) <= 3 or any(p < 1 for p in parts):
        raise ValueError(f"a launch dimension must be 1 to 3 positive integers, got {value!r}")
    return parts + (1,) * (3 - len(parts))


class _Block:
    __slots__ = ("index", "shared", "shared_used", "races")

    def __init__(self, index: tuple):
        self.index, self.shared, self.shared_used, self.races = index, {}, 0, RaceLog()


class Launch:
    """One launch: its shape, the arrays, the schedule, and what is being recorded."""

    def __init__(self, kernel, grid, block, args, schedule: Schedule, traffic: bool):
        self.source = kernel_source(kernel)
        self.grid_dim, self.block_dim = _dim3(grid), _dim3(block)
        self.schedule = schedule
        self.traffic = Traffic() if traffic else None
        self.kinds = ACCESS_KINDS
        self.kind_index = {k: i for i, k in enumerate(ACCESS_KINDS)}
        self.args = [self._argument(a, name, k) for k, (a, name) in
                     enumerate(zip(args, self.source.params + [""] * len(args)))]
        if len(args) != len(self.source.params):
            raise TypeError(f"{self.source.name} takes {len(self.source.params)} arguments, got {len(args)}")
        self.per_thread: dict = {}
        self.races: list = []
        self.uninitialised: list = []
        self.shared_bytes = 0

    @staticmethod
    def _argument(value, name: str, ident: int):
        if type(value).__name__ == "FakeCUDAArray":
            value = value._ary
        if isinstance(value, np.ndarray) and value.ndim > 0:
            return memory.Array(value, "global", name, 0, ident + 1)
        if hasattr(value, "__cuda_array_interface__"):
            raise TypeError(f"argument {name} lives on a GPU: the SIMT engine takes NumPy arrays")
        return value

    def resolved(self, source, name: str):
        found = source.resolved.get(name, _MISSING)
        if found is _MISSING:
            value = source.names.get(name, _MISSING)
            if value is _MISSING:
                value = getattr(builtins, name, _MISSING)
            found = _MISSING if value is _MISSING else resolve_global(value)
            source.resolved[name] = found
        return found

    # ---------------------------------------------------------------- memory
    def access(self, warp: Warp, arr, how: int, lanes, offs, node) -> None:
        kind = f"{arr.space}_{'reads' if how == READ else 'writes'}"
        warp.counts[lanes, self.kind_index[kind]] += 1
        if arr.space == "shared":
            self._shared(warp, arr, how, lanes, offs, node)
        if self.traffic is not None:
            self.traffic.access(warp.source, node, arr, how, lanes, offs, warp.number)

    def atomic_access(self, warp: Warp, arr, op: str, lanes, offs, node) -> None:
        """Every atomic (add, max, cas, ...) is a read-modify-write, so one atomic plus one read and
        one write of its memory space (as the Numba-simulator oracle, tests/numba_oracle.py, counts)."""
        warp.counts[lanes, self.kind_index["shared_atomics" if arr.space == "shared" else "atomics"]] += 1
        warp.counts[lanes, self.kind_index[f"{arr.space}_reads"]] += 1
        warp.counts[lanes, self.kind_index[f"{arr.space}_writes"]] += 1
        if arr.space == "shared":
            self._shared(warp, arr, ATOMIC, lanes, offs, node)
        if self.traffic is not None:
            self.traffic.access(warp.source, node, arr, ATOMIC, lanes, offs, warp.number)

    def _shared(self, warp: Warp, arr, how: int, lanes, offs, node) -> None:
        warp.block.races.add(arr, offs, warp.tids[lanes], how, warp.number, warp.intervals[lanes],
                             warp.epochs[lanes])
        if how != WRITE:
            unwritten = ~arr.written[offs]
            if unwritten.any():
                self.uninitialised.append(Uninitialised(warp.source.line(node), arr.name, warp.source.text(node),
                                                        _short(warp.block.index), int(unwritten.sum())))
        if how != READ:
            arr.written[offs] = True

    def shared_array(self, warp: Warp, node, m):
        block = warp.block
        key = (id(warp.source), node)
        found = block.shared.get(key)
        if found is None:
            shape, dtype = warp._shape_dtype(node, m)
            name = warp.source.shared_names.get(node, f"shared array of line {warp.source.line(node)}")
            base = memory.next_shared_base(block.shared_used)
            found = memory.shared_array(shape, dtype, name, base, -(len(block.shared) + 1))
            block.shared_used = base + found.data.nbytes
            block.shared[key] = found
            self.shared_bytes = max(self.shared_bytes, block.shared_used)
        return found

    # ---------------------------------------------------------------- running
    def thread_index(self, tid: int) -> tuple:
        bx, by, _ = self.block_dim
        return (tid % bx, (tid // bx) % by, tid // (bx * by))

    def run(self) -> None:
        gx, gy, gz = self.grid_dim
        blocks = [(x, y, z) for z in range(gz) for y in range(gy) for x in range(gx)]
        for index in self.schedule.order(blocks):
            self.run_block(index)

    def run_block(self, index: tuple) -> None:
        block = _Block(index)
        n = int(np.prod(self.block_dim))
        warps = []
        for w in range(-(-n // WARP)):
            tids = w * WARP + np.arange(WARP)
            warps.append(Warp(self, block, w, tids, tids < n))
        runs = [w.run(self.source, self.args) for w in warps]
        pending, reply = list(range(len(warps))), None
        while pending:
            arrived, votes = [], []
            for w in self.schedule.order(pending):
                try:
                    votes.append(runs[w].send(reply))
                except StopIteration:
                    continue
                arrived.append(w)
            check_arrivals(index, n, [Arrival(warps[w], vote[3], vote[2], warps[w].exists & ~warps[w].frame.returned)
                                   for w, vote in zip(arrived, votes)], self.thread_index)
            reply = _vote(votes)
            pending = sorted(arrived)
        self._finish_block(block, warps)

    def _finish_block(self, block: _Block, warps: list) -> None:
        self.races += block.races.races(block.index, self.thread_index)
        if self.traffic is not None:
            self.traffic.end_block()
        kinds = self.kinds
        for warp in warps:
            for lane in np.flatnonzero(warp.exists):
                row = warp.counts[lane]
                counter = Counter({k: int(v) for k, v in zip(kinds, row) if v})
                self.per_thread[(block.index, self.thread_index(int(warp.tids[lane])))] = counter


def _vote(votes: list):
    """The value ``cuda.syncthreads_count/and/or`` returns to every thread (None for syncthreads)."""
    ops = {vote[0] for vote in votes}
    if not votes or ops == {"syncthreads"}:
        return None
    op = (ops - {"syncthreads"}).pop()
    preds = [(p, m) for _, p, m, _ in votes if p is not None]
    if op == "syncthreads_count":
        return int(sum(int(p.sum()) for p, _ in preds))
    if op == "syncthreads_and":
        return int(all(bool(p[m].all()) for p, m in preds))
    return int(any(bool(p.any()) for p, _ in preds))


def _short(index: tuple) -> tuple:
    values = list(index)
    while len(values) > 1 and values[-1] == 0:
        values.pop()
    return tuple(values)


def run(kernel, grid, block, *args, schedule: str = "in_order", seed: int = 0, traffic: bool = True,
        races: str = "raise") -> Result:
    """Run ``kernel[grid, block](*args)`` in the SIMT engine and return its :class:`Result`.

    ``kernel`` is a ``@cuda.jit`` kernel (real or simulated) or its plain Python function; NumPy
    array arguments are global memory and are updated in place, as after a launch. An index outside
    an array raises IndexError. With ``races='raise'`` a shared-memory race raises
    :class:`course_lib.simt.counts.SharedMemoryRace` (as the oracle, tests/numba_oracle.py,
    does); with ``'record'`` races are only listed. A ``cuda.syncthreads()`` that some of a block's
    running threads reach and others do not raises :class:`~course_lib.simt.barriers.DivergentBarrier`
    (whatever ``races`` says). ``traffic=False`` skips the traffic model.
    """
    if races not in ("raise", "record"):
        raise ValueError("races must be 'raise' or 'record'")
    start = time.perf_counter()
    launch = Launch(kernel, grid, block, args, Schedule(schedule, seed), traffic)
    launch.run()
    result = Result(launch.source.name, launch.grid_dim, launch.block_dim,
                    AccessCounts(launch.per_thread, launch.races), launch.races, launch.uninitialised,
                    launch.traffic, launch.shared_bytes, schedule, time.perf_counter() - start, tuple(args))
    if launch.races and races == "raise":
        first, more = launch.races[0], len(launch.races) - 1
        raise SharedMemoryRace(f"{first}" + (f" ({more} more racy slot(s))" if more else "") + f". {first.remedy}")
    return result


def count_accesses(kernel, grid, block, *args, races: str = "raise", schedule: str = "in_order",
                   seed: int = 0) -> AccessCounts:
    """One launch's per-thread counts (GPU-Puzzles' count; what every counted or checked launch of the
    course runs): the same counts, races and errors as the Numba-simulator oracle in ``tests/``
    (tests/lib/test_simt_agreement.py), no traffic model."""
    return run(kernel, grid, block, *args, schedule=schedule, seed=seed, traffic=False, races=races).counts
