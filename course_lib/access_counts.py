"""Counting memory accesses of a Numba CUDA kernel in the simulator (lessons 03 and 04).

:func:`count_accesses` runs a kernel in Numba's CUDA simulator with every array argument
and every shared-memory array wrapped in a counting proxy, and reports how many global and
shared reads and writes, and atomic operations, each thread made (the idea of
GPU-Puzzles). The counts depend only on the kernel's code and the launch configuration,
never on timing. The simulator's classes are patched for the duration of one launch only.
"""
from __future__ import annotations

import sys
import threading
from collections import Counter
from dataclasses import dataclass, field
from unittest import mock

import numpy as np

ACCESS_KINDS = ("global_reads", "global_writes", "shared_reads", "shared_writes", "atomics")
"""What is counted, per thread."""


@dataclass
class AccessCounts:
    """Memory accesses of one simulated launch, per thread.

    ``per_thread`` maps (blockIdx, threadIdx) (tuples of 3 ints) to a Counter over
    :data:`ACCESS_KINDS`. Every launched thread has an entry, even one that did nothing.
    """

    per_thread: dict = field(repr=False)

    @property
    def threads(self) -> int:
        return len(self.per_thread)

    def _values(self, kind: str) -> list[int]:
        if kind not in ACCESS_KINDS:
            raise KeyError(f"unknown access kind {kind!r}; choose from {ACCESS_KINDS}")
        return [c[kind] for c in self.per_thread.values()]

    def max_per_thread(self, kind: str) -> int:
        """The most accesses of this kind any one thread made."""
        return max(self._values(kind), default=0)

    def mean_per_thread(self, kind: str) -> float:
        """Accesses of this kind per launched thread, on average."""
        values = self._values(kind)
        return sum(values) / len(values) if values else 0.0

    def total(self, kind: str) -> int:
        """Accesses of this kind by all threads together."""
        return sum(self._values(kind))

    def of_thread(self, block: tuple, thread: tuple) -> dict:
        """The counts of one thread; indices may be given with fewer than 3 entries."""
        key = (tuple(block) + (0,) * (3 - len(block)), tuple(thread) + (0,) * (3 - len(thread)))
        return {k: self.per_thread[key][k] for k in ACCESS_KINDS}

    def summary(self) -> dict:
        """{kind: {'max': ..., 'mean': ..., 'total': ...}} for every kind."""
        return {k: {"max": self.max_per_thread(k), "mean": self.mean_per_thread(k),
                    "total": self.total(k)} for k in ACCESS_KINDS}


class _Recorder:
    """Thread-safe tally of accesses, keyed by the simulated thread's indices."""

    def __init__(self):
        self.lock = threading.Lock()
        self.per_thread: dict = {}

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


class CountingArray:
    """An array stand-in that counts element reads and writes of the calling thread.

    ``space`` is 'global' or 'shared'. Shape, size, ndim and dtype are free (on a GPU
    they are kernel parameters, not memory traffic).
    """

    def __init__(self, array: np.ndarray, space: str, recorder: _Recorder):
        self._array = array
        self._space = space
        self._recorder = recorder
        self.shape = array.shape
        self.size = array.size
        self.ndim = array.ndim
        self.dtype = array.dtype

    def __len__(self):
        return len(self._array)

    def __getitem__(self, index):
        value = self._array[index]
        self._recorder.add(f"{self._space}_reads", int(np.size(value)))
        return value

    def __setitem__(self, index, value):
        self._array[index] = value
        self._recorder.add(f"{self._space}_writes", int(np.size(self._array[index])))


def _counting_shared_array(recorder: _Recorder):
    """A replacement for the simulator's ``cuda.shared.array`` returning counting arrays.

    Like the simulator, one allocation per source line of the kernel, shared by the
    threads of a block (the simulator makes a fresh shared-memory object per block).
    """
    from numba.core import types
    from numba.np import numpy_support

    lock = threading.Lock()

    def array(self, shape, dtype):
        if isinstance(dtype, types.Type):
            dtype = numpy_support.as_dtype(dtype)
        caller = sys._getframe(1)
        key = (caller.f_code.co_filename, caller.f_lineno)
        with lock:
            allocations = self.__dict__.setdefault("_counting_allocations", {})
            if key not in allocations:
                allocations[key] = CountingArray(np.zeros(shape, dtype), "shared", recorder)
            return allocations[key]

    return array


def _counting_atomic_add(recorder: _Recorder):
    lock = threading.Lock()

    def add(self, array, index, val):
        target = array._array if isinstance(array, CountingArray) else array
        recorder.add("atomics")
        with lock:
            old = target[index]
            target[index] += val
        return old

    return add


def count_accesses(kernel, grid, block, *args) -> AccessCounts:
    """Run ``kernel[grid, block](*args)`` in the CUDA simulator and count memory accesses.

    NumPy array arguments are global memory; arrays from ``cuda.shared.array`` are shared
    memory; ``cuda.atomic.add`` counts as one atomic (not as a read plus a write). Array
    arguments are updated in place, as after a normal launch. Works whether or not a GPU
    is present (the kernel's Python source is what runs). Keep launches small: the
    simulator uses one OS thread per GPU thread.
    """
    from numba.cuda.simulator.kernel import FakeCUDAKernel
    from numba.cuda.simulator.kernelapi import FakeCUDAAtomic, FakeCUDAShared

    recorder = _Recorder()
    wrapped = [CountingArray(a, "global", recorder) if isinstance(a, np.ndarray) and a.ndim > 0 else a
               for a in args]
    fn = getattr(kernel, "py_func", kernel)
    simulated = FakeCUDAKernel(fn, device=False)
    with mock.patch.object(FakeCUDAShared, "array", _counting_shared_array(recorder)), \
            mock.patch.object(FakeCUDAAtomic, "add", _counting_atomic_add(recorder)), \
            mock.patch("numba.cuda.simulator.kernel.BlockThread.run", _touching_run(recorder)):
        simulated[grid, block](*wrapped)
    return AccessCounts(dict(recorder.per_thread))


def _touching_run(recorder: _Recorder):
    """BlockThread.run that first registers the thread, so idle threads appear with zeros."""
    from numba.cuda.simulator.kernel import BlockThread

    original = BlockThread.run

    def run(self):
        recorder.touch()
        original(self)

    return run


# ------------------------------------------------------- warps: divergence, coalescing
