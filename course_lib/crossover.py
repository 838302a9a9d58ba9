"""Benchmark sweeps over problem size and the crossover plot of lesson 04.

A GPU pays a fixed cost per call (kernel launch, transfers, Python overhead) and then
processes large problems quickly; a CPU starts faster but grows steeply. The size where
the lines cross is the *crossover*. Here every line is measured on this machine; GPU
backends are timed only on a real GPU (the Numba CUDA simulator is never timed), with their
data kept on the device between calls, and the GPU figures of ETH Zurich's course section
"Graphics Processing Units" (Scientific IT Services, 2020-2021) are drawn beside the local
lines, labelled with their source. (Finding the crossover size in a sweep is lesson 04's
exercise 4, so it is not a library function.)
"""
from __future__ import annotations

import csv
from dataclasses import dataclass, field

import matplotlib.pyplot as plt
import numpy as np

from .distance import BACKENDS, available_backends, sqdist_numba_cuda, squared_distances
from .hardware import DATA_DIR, numba_cuda_mode
from .timing import benchmark


@dataclass
class Sweep:
    """Median seconds per call of each backend at each size (NaN where not timed), and for each
    backend the label line of the device its timings ran on (``Timing.measured_on()``)."""

    sizes: list[int]
    seconds: dict[str, list[float]] = field(default_factory=dict)
    measured_on: dict[str, str] = field(default_factory=dict)
    not_timed: dict[str, str] = field(default_factory=dict)


def timed_backends() -> tuple[list[str], dict[str, str]]:
    """(backends to time here, {backend: why it is not timed}) for the distance matrix."""
    skipped = {}
    chosen = []
    for name in BACKENDS:
        if name not in available_backends():
            skipped[name] = "no GPU that CuPy can use"
        elif name == "numba-cuda" and numba_cuda_mode() == "simulator":
            skipped[name] = "runs in the CUDA simulator here: correct results, not timed"
        else:
            chosen.append(name)
    return chosen, skipped


def _call_for(backend: str, x):
    """(the call to time, the device it computes on) for one backend and a NumPy input x.

    GPU backends get their data on the device once, before timing: CuPy a CuPy array,
    Numba CUDA device arrays for x and for the output, which every call reuses; the timed
    call then only launches kernels (a copy through host memory on every call would cost
    more than the kernel, and would hide the GPU's advantage at every size).
    """
    if backend == "cupy":
        import cupy  # lazy: optional, installed only on machines with a GPU

        x_gpu = cupy.asarray(x)
        return (lambda: squared_distances(x_gpu, x_gpu, backend)), "cupy"
    if backend == "numba-cuda":
        from .kernels import cuda  # lazy: imports numba.cuda, which only this backend needs

        x_dev = cuda.to_device(x)
        out_dev = cuda.device_array((len(x), len(x)), dtype=x.dtype)
        def call():
            sqdist_numba_cuda(x_dev, x_dev, out=out_dev)
            cuda.synchronize()      # Numba's own stream; torch's synchronize may not see it

        return call, "cuda:0"
    return (lambda: squared_distances(x, x, backend)), "cpu"


def sweep(sizes, backends=None, d: int = 3, repeat: int = 3, seed: int = 0,
          max_seconds_per_call: float = 0.5) -> Sweep:
    """Time ``distance.squared_distances(x, x, backend)`` for n points in d dimensions.

    GPU backends keep x and the output on the device (see :func:`_call_for`). A backend that
    took longer than ``max_seconds_per_call`` at one size is not run at larger sizes (NaN
    there), which keeps a sweep short on a slow machine.
    """
    chosen, skipped = timed_backends()
    if backends is not None:
        chosen = [b for b in chosen if b in backends]
        skipped = {b: why for b, why in skipped.items() if b in backends}
    rng = np.random.default_rng(seed)
    result = Sweep(list(sizes), {b: [] for b in chosen}, {}, skipped)
    for backend in chosen:
        too_slow = False
        for n in sizes:
            if too_slow:
                result.seconds[backend].append(float("nan"))
                continue
            fn, device = _call_for(backend, rng.random((n, d)))
            t = benchmark(fn, device=device, warmup=1, repeat=repeat, min_repeat_time=0.005)
            result.seconds[backend].append(t.median)
            result.measured_on[backend] = t.measured_on()
            too_slow = t.median > max_seconds_per_call
    return result


def cited_gpu_figures() -> list[dict]:
    """The cited GPU figures for the distance matrix (``data/eth_gpu_distance.csv``: ETH Zurich
    Scientific IT Services, course section "Graphics Processing Units", 2020-2021), each row a
    dict with its figure name, float value, unit, number of points, device and source."""
    with (DATA_DIR / "eth_gpu_distance.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    for row in rows:
        row["value"] = float(row["value"])
    return rows


def plot(result: Sweep, baseline: str = "numpy-matmul", axes=None):
    """Two panels: seconds against n (measured here), and speed-up over ``baseline`` with
    the cited GPU speed-up (:func:`cited_gpu_figures`) marked. Untimed backends are named in the title."""
    if axes is None:
        _, axes = plt.subplots(1, 2, figsize=(11, 4))
    left, right = axes
    sizes = np.asarray(result.sizes)
    for backend, secs in result.seconds.items():
        left.plot(sizes, secs, "o-", label=f"{backend} (measured)")
    left.set_xscale("log")
    left.set_yscale("log")
    left.set_xlabel("number of points n (d = 3)")
    left.set_ylabel("median seconds per call")
    left.set_title("\n".join(sorted(set(result.measured_on.values()))), fontsize=9)
    left.grid(True, which="both", alpha=0.3)
    left.legend(fontsize=8)

    base = np.asarray(result.seconds.get(baseline, [np.nan] * len(sizes)))
    for backend, secs in result.seconds.items():
        right.plot(sizes, base / np.asarray(secs), "o-", label=f"{backend} (measured)")
    for fig in cited_gpu_figures():
        if fig["figure"] == "cupy_speedup_over_numpy":
            right.plot([float(fig["points"])], [fig["value"]], "r*", ms=14,
                       label="CuPy on a GPU, cited (ETH course)")
        if fig["figure"] == "cpu_faster_below_points":
            right.axvspan(sizes.min(), fig["value"], color="orange", alpha=0.12,
                          label="CPU beat the GPU in here, cited (ETH course)")
    right.axhline(1.0, color="grey", lw=1)
    right.set_xscale("log")
    right.set_yscale("log")
    right.set_xlabel("number of points n (d = 3)")
    right.set_ylabel(f"speed-up over {baseline}")
    right.grid(True, which="both", alpha=0.3)
    right.legend(fontsize=7, loc="best", framealpha=0.8)
    if result.not_timed:
        right.set_title("not timed here: " + "; ".join(f"{b} ({why})" for b, why in result.not_timed.items()),
                        fontsize=7, wrap=True)
    return axes
