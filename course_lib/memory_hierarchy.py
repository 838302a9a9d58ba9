"""Experiments that make the memory hierarchy visible from Python (lesson 01).

* ``stride_sweep``: touch every k-th float of a large array. Memory moves whole cache
  lines (64 bytes on most CPUs), so until k floats span a line every access still pulls
  a full line: the time per *touched element* grows with k, then levels off.
* ``working_set_sweep``: read arrays of growing size again and again. While the array
  fits in a cache the read bandwidth is that cache's; past the last level it drops to
  main memory's.
* ``false_sharing``: two threads each increment their own counter; with the counters in one
  cache line the line travels between the cores on every write, with them a few lines apart
  it does not.
"""
from __future__ import annotations

import functools
import os
import threading
import time

import matplotlib.pyplot as plt
import numba
import numpy as np

from .timing import benchmark


def stride_sweep(strides=(1, 2, 4, 8, 16, 32, 64, 128), nbytes: int = 64 * 2**20,
                 repeat: int = 5) -> list[dict]:
    """Sum every ``stride``-th float32 of an ``nbytes`` array; one row per stride with
    seconds (median per sum), elements touched and nanoseconds per touched element."""
    data = np.ones(nbytes // 4, dtype=np.float32)
    rows = []
    for stride in strides:
        view = data[::stride]
        timing = benchmark(view.sum, label=f"stride {stride}", warmup=1, repeat=repeat, number=1)
        rows.append({"stride": stride, "stride_bytes": 4 * stride, "elements": view.size,
                     "seconds": timing.median, "ns_per_element": timing.median / view.size * 1e9})
    return rows


@functools.lru_cache(maxsize=1)
def _repeated_sum():
    """A compiled loop that sums one array ``reps`` times: no interpreter between passes,
    so small (in-cache) arrays are timed at the cache's speed, not Python's call overhead."""
    @numba.njit(fastmath=True, cache=False)
    def repeated_sum(data, reps):
        total = 0.0
        for _ in range(reps):
            acc = numba.float32(0.0)
            for i in range(data.size):
                acc += data[i]
            total += acc
        return total

    return repeated_sum


def working_set_sweep(sizes_bytes=None, repeat: int = 5, bytes_per_repeat: int = 64 * 2**20) -> list[dict]:
    """Read bandwidth (bytes/s) of summing a float32 array over and over, one row per
    working-set size. Each timed repeat reads about ``bytes_per_repeat`` bytes in total."""
    if sizes_bytes is None:
        sizes_bytes = [2**p for p in range(12, 28)]  # 4 KiB .. 128 MiB
    repeated_sum = _repeated_sum()
    repeated_sum(np.ones(16, dtype=np.float32), 1)  # compile once, outside the timings
    rows = []
    for size in sizes_bytes:
        data = np.ones(max(size // 4, 1), dtype=np.float32)
        reps = max(1, bytes_per_repeat // data.nbytes)
        timing = benchmark(lambda data=data, reps=reps: repeated_sum(data, reps), label=f"{size} B", warmup=1,
                           repeat=repeat, number=1)
        rows.append({"bytes": data.nbytes, "seconds": timing.median / reps,
                     "bandwidth": data.nbytes * reps / timing.median})
    return rows


@functools.lru_cache(maxsize=1)
def _bump():
    """A compiled loop, free of the GIL, that adds 1 to ``counters[slots[i % slots.size]]``
    ``n`` times. Reading the slot from memory every time keeps the compiler from holding the
    counter in a register, so every iteration loads and stores the counter's cache line."""
    @numba.njit(nogil=True, cache=False)
    def bump(counters, slots, n):
        for i in range(n):
            counters[slots[i % slots.size]] += 1

    return bump


def _run_threads(slots: list[int], increments: int) -> float:
    """Seconds for one thread per entry of ``slots``, thread t bumping ``counters[slots[t]]``."""
    bump = _bump()
    counters = np.zeros(64, dtype=np.int64)  # 512 bytes: room for slots up to 63
    threads = [threading.Thread(target=bump, args=(counters, np.full(8, slot, dtype=np.int64),
                                                    increments)) for slot in slots]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.perf_counter() - start


def _usable_cores() -> int:
    """CPU cores this process may run on (the affinity mask where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def false_sharing(increments: int = 4_000_000, gap_bytes: int = 128, repeat: int = 4,
                  together_factor: float = 1.6) -> dict:
    """Two threads each add 1 to their own 8-byte int64 counter ``increments`` times.

    Returns seconds (best of ``repeat``, the three cases interleaved so that load changes hit
    all of them alike): ``alone`` (one thread), ``padded`` (two threads, counters ``gap_bytes``
    apart, so in different cache lines) and ``adjacent`` (two threads, counters 8 bytes apart,
    one cache line); ``slowdown`` = adjacent / padded (a ratio); ``cores`` usable here; and
    ``ran_together``: False when the machine could not show the effect, i.e. fewer than 2 usable
    cores, or the padded pair took more than ``together_factor`` times one thread's time (the
    threads took turns, so they rarely fought over the line). Each case runs in milliseconds
    to tens of milliseconds on a current CPU.
    """
    if gap_bytes % 8 or not 8 < gap_bytes <= 63 * 8:
        raise ValueError(f"gap_bytes must be a multiple of 8 in 16..504, got {gap_bytes}")
    _bump()(np.zeros(2, dtype=np.int64), np.zeros(1, dtype=np.int64), 1)  # compile, untimed
    runs = [(_run_threads([0], increments), _run_threads([0, gap_bytes // 8], increments),
             _run_threads([0, 1], increments)) for _ in range(repeat)]
    alone, padded, adjacent = (min(column) for column in zip(*runs))
    cores = _usable_cores()
    return {"alone": alone, "padded": padded, "adjacent": adjacent, "slowdown": adjacent / padded,
            "gap_bytes": gap_bytes, "counter_bytes": 8, "increments": increments, "cores": cores,
            "ran_together": cores >= 2 and padded <= together_factor * alone}


def plot_stride(rows: list[dict], line_bytes: int = 64, ax=None):
    """Nanoseconds per touched element against stride in bytes, cache-line size marked."""
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot([r["stride_bytes"] for r in rows], [r["ns_per_element"] for r in rows], "o-")
    ax.axvline(line_bytes, color="grey", ls="--", lw=1)
    ax.annotate(f"{line_bytes}-byte cache line", (line_bytes, ax.get_ylim()[1]), ha="left",
                va="top", fontsize=9, color="grey")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("distance between touched floats (bytes)")
    ax.set_ylabel("ns per touched element")
    ax.grid(True, alpha=0.3)
    return ax


def plot_working_set(rows: list[dict], caches: dict[str, int] | None = None, ax=None):
    """Read bandwidth (GB/s) against working-set size with this CPU's cache sizes marked."""
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot([r["bytes"] for r in rows], [r["bandwidth"] / 1e9 for r in rows], "o-")
    for name, size in (caches or {}).items():
        if name.endswith("i"):
            continue
        ax.axvline(size, color="grey", ls="--", lw=1)
        ax.annotate(name, (size, ax.get_ylim()[1]), ha="right", va="top", fontsize=9,
                    color="grey", rotation=90)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("working set (bytes)")
    ax.set_ylabel("read bandwidth (GB/s)")
    ax.grid(True, alpha=0.3)
    return ax
