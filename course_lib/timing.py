"""Timing code correctly: synchronize the device, warm up, repeat, report the median (lesson 06
teaches it; every lesson's measurements use it).

GPU work is queued asynchronously, so a timer that does not synchronize measures only
how long it took to *enqueue* the work. ``benchmark`` synchronizes before starting
and after stopping the clock on every repeat.

A :class:`Timing` carries its provenance, as ``torch.utils.benchmark``'s ``Measurement``
does: the device the work ran on and the number of CPU threads torch used, so the label
``Timing.measured_on()`` prints comes from the measurement, never from what the machine
happens to have besides.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import Callable

import torch

from .hardware import describe_device


@dataclass
class Timing:
    """Result of :func:`benchmark`. All times in seconds, per call of the function.

    ``device`` is the torch device string the work ran on ('cpu', 'cuda:0'); ``threads`` is
    ``torch.get_num_threads()`` when it was measured.
    """

    label: str
    times: list[float] = field(repr=False)
    number: int = 1
    device: str = "cpu"
    threads: int = 1

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

    def measured_on(self) -> str:
        """The label line 'measured here on: <the device this timing ran on>'."""
        return measured_on(self.device, threads=self.threads)

    def __str__(self) -> str:
        return (f"{self.label}: median {format_seconds(self.median)} "
                f"(IQR {format_seconds(self.iqr)}, {len(self.times)} repeats x {self.number} calls)")


def measured_on(device="cpu", threads: int | None = None) -> str:
    """The label line 'measured here on: ...' for a figure measured on ``device`` without
    :func:`benchmark` (e.g. a training run's seconds); ``threads`` defaults to torch's now."""
    return f"measured here on: {describe_device(device_name(device), threads=threads)}"


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
        torch.cuda.synchronize(device)
    elif name == "cupy":
        import cupy  # lazy: optional, installed only on machines with a GPU

        cupy.cuda.get_current_stream().synchronize()
    elif name.startswith("mps"):
        torch.mps.synchronize()


def device_name(device=None) -> str:
    """The torch device string work on ``device`` runs on: None -> 'cpu', 'cuda' -> 'cuda:0'
    (the current device), 'cupy' -> CuPy's current device as 'cuda:N'."""
    if device is None:
        return "cpu"
    name = str(device)
    if name == "cupy":
        import cupy  # lazy: optional, installed only on machines with a GPU

        return f"cuda:{cupy.cuda.Device().id}"
    dev = torch.device(name)
    if dev.type == "cuda" and dev.index is None:
        return f"cuda:{torch.cuda.current_device()}"
    return str(dev)


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


def benchmark(fn: Callable[[], object], *, label: str = "", device="cpu", warmup: int = 2,
              repeat: int = 7, number: int | None = None, min_repeat_time: float = 0.02) -> Timing:
    """Time ``fn()`` and return a :class:`Timing` with per-call seconds for each repeat.

    Runs ``warmup`` untimed calls (caches, lazy initialisation, JIT compilation), then
    ``repeat`` repeats of ``number`` calls each. When ``number`` is None it is chosen so
    one repeat lasts at least ``min_repeat_time`` seconds, which keeps the timer's own
    resolution out of the figure. ``device`` (where ``fn`` computes: 'cpu', 'cuda:0', a
    ``torch.device``, or 'cupy') is synchronized around every repeat and recorded in the result
    with torch's thread count, for :meth:`Timing.measured_on`.
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
    return Timing(label or getattr(fn, "__name__", "fn"), times, number, device=device_name(device),
                  threads=torch.get_num_threads())
