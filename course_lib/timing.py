"""Timing code correctly: synchronize the device, warm up, repeat, report the median.

GPU work is queued asynchronously, so a timer that does not synchronize measures only
how long it took to *enqueue* the work. ``benchmark`` synchronizes before starting
and after stopping the clock on every repeat.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import Callable


@dataclass
class Timing:
    """Result of :func:`benchmark`. All times in seconds, per call of the function."""

    label: str
    times: list[float] = field(repr=False)
    number: int = 1

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    @property
    def min(self) -> float:
        return min(self.times)

    @property
    def iqr(self) -> float:
        """Interquartile range (seconds): the spread that ignores the worst outliers."""
        if len(self.times) < 2:
            return 0.0
        q = statistics.quantiles(self.times, n=4, method="inclusive")
        return q[2] - q[0]

    def __str__(self) -> str:
        return (f"{self.label}: median {format_seconds(self.median)} "
                f"(IQR {format_seconds(self.iqr)}, {len(self.times)} repeats x {self.number} calls)")


def format_seconds(seconds: float) -> str:
    """Seconds as a short human string with a fitting unit: '12.3 ms', '850 ns'."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9)):
        if abs(seconds) >= scale or unit == "ns":
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds} s"


def synchronize(device=None) -> None:
    """Wait until queued work on ``device`` has finished (no-op on the CPU).

    ``device`` is a torch device, a string like 'cuda:0', or 'cupy' for CuPy's current stream.
    """
    if device is None:
        return
    name = str(device)
    if name.startswith("cuda"):
        import torch

        torch.cuda.synchronize(device)
    elif name == "cupy":
        import cupy

        cupy.cuda.get_current_stream().synchronize()
    elif name.startswith("mps"):
        import torch

        torch.mps.synchronize()


def _calls_for(fn: Callable[[], object], device, target: float) -> int:
    """How many calls per repeat make one repeat last about ``target`` seconds."""
    number = 1
    while True:
        synchronize(device)
        start = time.perf_counter()
        for _ in range(number):
            fn()
        synchronize(device)
        elapsed = time.perf_counter() - start
        if elapsed >= target or number >= 1 << 20:
            return number
        number *= 10 if elapsed < target / 10 else 2


def benchmark(fn: Callable[[], object], *, label: str = "", device=None, warmup: int = 2,
              repeat: int = 7, number: int | None = None, min_repeat_time: float = 0.02) -> Timing:
    """Time ``fn()`` and return a :class:`Timing` with per-call seconds for each repeat.

    Runs ``warmup`` untimed calls (caches, lazy initialisation, JIT compilation), then
    ``repeat`` repeats of ``number`` calls each. When ``number`` is None it is chosen so
    one repeat lasts at least ``min_repeat_time`` seconds, which keeps the timer's own
    resolution out of the figure. ``device`` is synchronized around every repeat.
    """
    for _ in range(warmup):
        fn()
    if number is None:
        number = _calls_for(fn, device, min_repeat_time)
    times = []
    for _ in range(repeat):
        synchronize(device)
        start = time.perf_counter()
        for _ in range(number):
            fn()
        synchronize(device)
        times.append((time.perf_counter() - start) / number)
    return Timing(label or getattr(fn, "__name__", "fn"), times, number)
