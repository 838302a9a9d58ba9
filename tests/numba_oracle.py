"""The oracle that proves the course's SIMT engine: counting memory accesses of a Numba CUDA kernel,
and finding shared-memory races, in Numba's own CUDA simulator (lessons 03 and 04's kernels).

Every counted or checked launch of the course runs in :mod:`course_lib.simt`; this module stays in
``tests/`` as a second, independent implementation (it patches three private classes of Numba's
simulator with ``unittest.mock``) that tests/lib/test_simt_agreement.py holds the engine to: the same
per-thread counts, races and errors on every kernel of lessons 03 and 04. Unlike the engine, which
poisons fresh shared memory (NaN, as undefined as on a GPU), it zero-fills it per block.

:func:`count_accesses` runs a kernel in Numba's CUDA simulator with every array argument and
every shared-memory array wrapped in a counting proxy, and reports how many global and shared
reads and writes, and atomic operations, each thread made (the idea of GPU-Puzzles); an atomic
is a read-modify-write, so it counts as a read and a write of its slot too. The
counts depend only on the kernel's code and the launch configuration, never on timing.

It also checks what a GPU would not forgive but the simulator often does:

- **Races in shared memory.** Between two ``cuda.syncthreads()`` the threads of a block run
  in no fixed order. A slot of a shared array that one thread writes and another thread
  reads (or also writes, without an atomic) in the same interval between barriers holds a
  value that depends on timing: a race. Atomic updates of one slot by many threads are
  fine among themselves, but not mixed with plain reads or writes of that slot. Every
  access is recorded with the number of barriers its thread has passed, so the check does
  not depend on the order in which the simulator happened to run the threads; a kernel with
  a race raises :class:`SharedMemoryRace` naming the block, the threads, the array and the
  index.
- **Out-of-bounds indices**, including negative ones, which NumPy (and so the plain
  simulator) silently wraps around to the end of the array: they raise ``IndexError``.
- **Fresh shared memory per block.** The plain simulator of numba 0.68 allocates shared
  arrays with ``np.empty`` (uninitialised) once per *launch*, keyed by source line, so every
  block of a launch sees the values the previous block left behind: a kernel that forgets to
  fill its shared array can pass by accident. Here each block gets its own shared arrays,
  zero-initialised (tests/lib/test_numba_oracle.py shows both behaviours).

The simulator's classes are patched for the duration of one launch only.
"""
from __future__ import annotations

import contextlib
import linecache
import re
import sys
import threading
from collections import Counter
from unittest import mock

import numpy as np
from numba.core import types
from numba.np import numpy_support

from course_lib.simt.counts import AccessCounts, Race, SharedMemoryRace


class _Recorder:
    """Thread-safe tally of accesses, keyed by the simulated thread's indices, and the log of
    shared-memory accesses per (block, barrier interval, array, slot) for the race check."""

    def __init__(self):
        self.lock = threading.Lock()
        self.per_thread: dict = {}
        self.barriers: Counter = Counter()   # thread key -> syncthreads() calls passed
        self.slots: dict = {}   # (block, interval, array, index) -> (writers, readers, atomic)

    def key(self):
        t = threading.current_thread()
        return (tuple(t.blockIdx), tuple(t.threadIdx))

    def add(self, kind: str, n: int = 1) -> None:
        key = self.key()
        with self.lock:
            self.per_thread.setdefault(key, Counter())[kind] += n

    def touch(self) -> None:
        key = self.key()
        with self.lock:
            self.per_thread.setdefault(key, Counter())

    def barrier(self) -> None:
        key = self.key()
        with self.lock:
            self.barriers[key] += 1

    def shared_access(self, array: str, indices, how: str) -> None:
        """Note that the calling thread touched these slots; ``how`` is 'write', 'read' or
        'atomic'."""
        block, thread = key = self.key()
        slot = ("write", "read", "atomic").index(how)
        with self.lock:
            interval = self.barriers[key]
            for index in indices:
                sets = self.slots.setdefault((block, interval, array, index), (set(), set(), set()))
                sets[slot].add(thread)

    def races(self) -> list[Race]:
        """Every racy slot, in a fixed order (block, interval, array, index)."""
        found = []
        for (block, interval, array, index), (writers, readers, atomic) in sorted(self.slots.items()):
            if atomic and (writers or readers) and len(atomic | writers | readers) > 1:
                first = min(atomic)
                plain_writers, plain_readers = writers - {first}, readers - {first}
                if plain_writers or plain_readers:
                    other = min(plain_writers or plain_readers)
                    kind = "atomic_write" if plain_writers else "atomic_read"
                else:   # the first thread also touched the slot plainly, another updated it
                    other, first = first, min(atomic - {first})
                    kind = "atomic_write" if other in writers else "atomic_read"
                found.append(Race(block, interval, array, index, first, other, kind))
                continue
            if not writers:
                continue
            first = min(writers)
            others = sorted(writers - {first})
            if others:
                found.append(Race(block, interval, array, index, first, others[0], "write"))
                continue
            readers = sorted(readers - {first})
            if readers:
                found.append(Race(block, interval, array, index, first, readers[0], "read"))
        return found


def _flat_indices(shape: tuple, index) -> list[tuple]:
    """The element indices an index expression touches, each checked to be inside ``shape``
    (negative indices are out of bounds on a GPU; NumPy would wrap them)."""
    parts = index if isinstance(index, tuple) else (index,)
    if all(isinstance(p, (int, np.integer)) for p in parts):
        if len(parts) != len(shape) or any(not 0 <= int(p) < s for p, s in zip(parts, shape)):
            raise IndexError(f"index {tuple(int(p) for p in parts)} is out of bounds for an array "
                             f"of shape {shape} (a GPU reads or writes outside the array here)")
        return [tuple(int(p) for p in parts)]
    grid = np.indices(shape).reshape(len(shape), -1).T.reshape(shape + (len(shape),))
    return [tuple(int(v) for v in row) for row in np.asarray(grid[index]).reshape(-1, len(shape))]


class CountingArray:
    """An array stand-in that counts element reads and writes of the calling thread.

    ``space`` is 'global' or 'shared'; ``name`` names a shared array in race reports. Shape,
    size, ndim and dtype are free (on a GPU they are kernel parameters, not memory traffic).
    """

    def __init__(self, array: np.ndarray, space: str, recorder: _Recorder, name: str = ""):
        self._array = array
        self._space = space
        self._recorder = recorder
        self._name = name
        self.shape = array.shape
        self.size = array.size
        self.ndim = array.ndim
        self.dtype = array.dtype

    def __len__(self):
        return len(self._array)

    def _touch(self, index, write: bool) -> None:
        cells = _flat_indices(self.shape, index)
        kind = "writes" if write else "reads"
        self._recorder.add(f"{self._space}_{kind}", len(cells))
        if self._space == "shared":
            self._recorder.shared_access(self._name, cells, "write" if write else "read")

    def __getitem__(self, index):
        result = self._array[index]
        if isinstance(result, np.ndarray):  # a view: accesses through it would not be counted
            raise TypeError(f"count_accesses counts element accesses: {self._name or 'this array'}[{index!r}] "
                            "is a slice; read one element at a time")
        self._touch(index, write=False)
        return result

    def __setitem__(self, index, value):
        self._touch(index, write=True)
        self._array[index] = value


_NAME = re.compile(r"(\w+)\s*=\s*cuda\.shared\.array")


def _counting_shared_array(recorder: _Recorder):
    """A replacement for ``cuda.shared.array``: one zero-filled counting array per block and
    per source line of the kernel (the plain simulator keeps one per launch, uninitialised)."""
    lock = threading.Lock()
    allocations: dict = {}

    def array(self, shape, dtype):
        if isinstance(dtype, types.Type):
            dtype = numpy_support.as_dtype(dtype)
        caller = sys._getframe(1)
        block = tuple(threading.current_thread().blockIdx)
        key = (block, caller.f_code.co_filename, caller.f_lineno)
        with lock:
            if key not in allocations:
                found = _NAME.search(linecache.getline(caller.f_code.co_filename, caller.f_lineno))
                name = found.group(1) if found else f"shared array of line {caller.f_lineno}"
                shape = tuple(shape) if isinstance(shape, tuple) else (int(shape),)
                allocations[key] = CountingArray(np.zeros(shape, dtype), "shared", recorder, name)
            return allocations[key]

    return array


ATOMIC_OPS = ("add", "sub", "and_", "or_", "xor", "inc", "dec", "exch", "max", "min", "nanmax", "nanmin",
              "compare_and_swap", "cas")
"""The ``cuda.atomic`` operations of Numba's simulator, all counted by :func:`count_accesses`."""


def _counting_atomic(recorder: _Recorder, op: str, original):
    """A replacement for the simulator's ``cuda.atomic.<op>`` (``original``): it runs ``original``
    on the plain NumPy array (so the update stays atomic under the simulator's lock) and counts
    one atomic plus one read and one write of the slot, in the array's memory space; a slot of
    a shared array is noted as updated atomically for the race check."""

    def atomic(self, array, *rest):
        counted = isinstance(array, CountingArray)
        target = array._array if counted else array
        if counted:
            index = (0,) * array.ndim if op == "compare_and_swap" else rest[0]
            cells = _flat_indices(array.shape, index)   # bounds check
            space = array._space
            if space == "shared":
                recorder.shared_access(array._name, cells, "atomic")
            recorder.add("shared_atomics" if space == "shared" else "atomics")
            recorder.add(f"{space}_reads")
            recorder.add(f"{space}_writes")
        return original(self, target, *rest)

    atomic.__name__ = op
    return atomic


def _recording_sync(recorder: _Recorder, original):
    """The simulator's ``BlockThread.syncthreads`` (``original``), first noting the barrier for
    the calling thread."""

    def syncthreads(self):
        recorder.barrier()
        original(self)

    return syncthreads


def _touching_run(recorder: _Recorder, original):
    """The simulator's ``BlockThread.run`` (``original``), first registering the thread, so idle
    threads appear with zeros."""

    def run(self):
        recorder.touch()
        original(self)

    return run


def count_accesses(kernel, grid, block, *args, races: str = "raise") -> AccessCounts:
    """Run ``kernel[grid, block](*args)`` in the CUDA simulator and count memory accesses.

    NumPy array arguments are global memory; arrays from ``cuda.shared.array`` are shared
    memory (zero-filled, one set per block); every ``cuda.atomic.<op>`` counts as one atomic
    and as the read and the write it makes (a read-modify-write of one slot). Array arguments
    are updated in place, as after a normal launch.
    An index outside an array raises ``IndexError``. With ``races='raise'`` (default) a
    shared-memory race raises :class:`SharedMemoryRace` after the launch, naming the first
    few; with ``races='record'`` they are only listed in ``AccessCounts.races``. Works
    whether or not a GPU is present (the kernel's Python source is what runs). Keep launches
    small: the simulator uses one OS thread per GPU thread.
    """
    # lazy: these import numba.cuda, which must wait until course_lib has chosen GPU or simulator
    from numba.cuda.simulator.kernel import BlockThread, FakeCUDAKernel
    from numba.cuda.simulator.kernelapi import FakeCUDAAtomic, FakeCUDAShared

    if races not in ("raise", "record"):
        raise ValueError("races must be 'raise' or 'record'")
    recorder = _Recorder()
    wrapped = [CountingArray(a, "global", recorder) if isinstance(a, np.ndarray) and a.ndim > 0 else a
               for a in args]
    fn = getattr(kernel, "py_func", kernel)
    simulated = FakeCUDAKernel(fn, device=False)
    sync, run = _recording_sync(recorder, BlockThread.syncthreads), _touching_run(recorder, BlockThread.run)
    atomics = [mock.patch.object(FakeCUDAAtomic, op, _counting_atomic(recorder, op, getattr(FakeCUDAAtomic, op)))
               for op in ATOMIC_OPS]
    with mock.patch.object(FakeCUDAShared, "array", _counting_shared_array(recorder)), \
            mock.patch.object(BlockThread, "syncthreads", sync), mock.patch.object(BlockThread, "run", run), \
            contextlib.ExitStack() as stack:
        for patch in atomics:
            stack.enter_context(patch)
        simulated[grid, block](*wrapped)
    result = AccessCounts(dict(recorder.per_thread), recorder.races())
    if result.races and races == "raise":
        more = len(result.races) - 1
        first = result.races[0]
        raise SharedMemoryRace(f"{first}" + (f" ({more} more racy slot(s))" if more else "")
                               + f". {first.remedy}")
    return result
