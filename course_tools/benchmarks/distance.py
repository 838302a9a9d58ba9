"""Distance matrix at n=4096, d=3: our fastest CPU backend against SciPy's cdist, and
against the CPU's memory-bandwidth floor (writing the n x n float64 output at the CPU's copy
bandwidth). With a GPU that CuPy can use, the CuPy backend on device-resident arrays
(``gpu_*`` keys) against the GPU's own bandwidth floor. Every floor uses the bandwidth of the
device the work ran on.

Targets: cdist time / ours >= 1.5; ours / floor <= 3. Both ratios come from this run.
"""
from __future__ import annotations

import numpy as np
from scipy.spatial.distance import cdist

from course_lib.distance import sqdist_cupy, sqdist_numba_cpu
from course_lib.hardware import cupy_usable, describe_device
from course_lib.roofline import measure_bandwidth
from course_lib.timing import benchmark

N_POINTS = 4096
DIMENSIONS = 3
OUTPUT_BYTES = N_POINTS * N_POINTS * 8
"""Bytes of the n x n float64 result: the least memory traffic any backend has."""


def gpu_figures(x: np.ndarray) -> dict:
    """CuPy on the GPU, inputs already on the device: seconds and the GPU's bandwidth floor."""
    import cupy  # optional: only with a GPU that CuPy can use

    x_gpu = cupy.asarray(x)
    if not np.allclose(cupy.asnumpy(sqdist_cupy(x_gpu)), cdist(x, x, "sqeuclidean")):
        raise AssertionError("cupy distance matrix disagrees with scipy cdist")
    timing = benchmark(lambda: sqdist_cupy(x_gpu), label="cupy", device="cupy", warmup=2, repeat=9)
    bandwidth, _ = measure_bandwidth(2**30, device=timing.device)
    floor = OUTPUT_BYTES / bandwidth
    return {
        "gpu_device": describe_device(timing.device),
        "gpu_cupy_seconds": timing.median,
        "gpu_copy_bandwidth_bytes_per_s": bandwidth,
        "gpu_bandwidth_floor_seconds": floor,
        "gpu_cupy_over_bandwidth_floor_ratio": timing.median / floor,
    }


def run() -> dict:
    x = np.random.default_rng(0).random((N_POINTS, DIMENSIONS))
    if not np.allclose(sqdist_numba_cpu(x), cdist(x, x, "sqeuclidean")):
        raise AssertionError("numba-cpu distance matrix disagrees with scipy cdist")
    # Both write into an output allocated once (cdist takes out= too), so neither pays
    # the operating system's first-touch page faults; fresh-output times are reported too.
    ours_out = np.empty((N_POINTS, N_POINTS))
    scipy_out = np.empty((N_POINTS, N_POINTS))
    ours = benchmark(lambda: sqdist_numba_cpu(x, out=ours_out), label="numba-cpu", warmup=2, repeat=9)
    theirs = benchmark(lambda: cdist(x, x, "sqeuclidean", out=scipy_out), label="cdist", warmup=1, repeat=9)
    ours_fresh = benchmark(lambda: sqdist_numba_cpu(x), label="numba-cpu fresh", warmup=1, repeat=5)
    theirs_fresh = benchmark(lambda: cdist(x, x, "sqeuclidean"), label="cdist fresh", warmup=1, repeat=5)
    bandwidth, _ = measure_bandwidth(256 * 2**20, device="cpu")  # the CPU computed: its bandwidth
    floor = OUTPUT_BYTES / bandwidth
    figures = {
        "device": describe_device(ours.device),
        "n_points": N_POINTS,
        "dimensions": DIMENSIONS,
        "numba_cpu_seconds": ours.median,
        "cdist_seconds": theirs.median,
        "cdist_over_ours_ratio": theirs.median / ours.median,
        "cdist_over_ours_target_min": 1.5,
        "numba_cpu_fresh_output_seconds": ours_fresh.median,
        "cdist_fresh_output_seconds": theirs_fresh.median,
        "cdist_over_ours_fresh_output_ratio": theirs_fresh.median / ours_fresh.median,
        "copy_bandwidth_bytes_per_s": bandwidth,
        "output_bytes": OUTPUT_BYTES,
        "bandwidth_floor_seconds": floor,
        "ours_over_bandwidth_floor_ratio": ours.median / floor,
        "ours_over_bandwidth_floor_target_max": 3.0,
    }
    if cupy_usable():
        figures.update(gpu_figures(x))
    return figures
