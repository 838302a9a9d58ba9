"""The cost of lesson 03's SIMT engine and traffic model, and, on a GPU, how its predicted times
compare with measured ones.

* ``traffic_overhead``: seconds of ``simt.run`` with the traffic model over seconds without it,
  on the lecture's kernels at the lecture's sizes (target, issue 24: at most 1.5);
* ``engine_over_numba_simulator``: the engine's seconds over Numba's CUDA simulator's on the same
  launches (where Numba runs simulated; target: at most 1, "at least as fast");
* on a CUDA GPU (Numba compiling for it): each transpose timed at 4096 x 4096 and predicted for
  the GPU's spec row, ``predicted_over_measured`` per kernel (target: within 3x for these
  bandwidth-bound kernels) and whether the model ranks the pair as the GPU does.

The fastest of a few alternated runs; ratios within one run only.
"""
from __future__ import annotations

import statistics
import time

import numpy as np

from course_lib import hardware  # first: course_lib decides, before numba.cuda is imported, GPU or simulator

# isort: split
from numba import cuda, float32, float64  # module globals: Numba's simulator swaps `cuda` in a kernel's globals

TILE = 32             # the lecture's TILE_T: blocks of TILE x TILE threads for the transposes
LECTURE_KERNELS = ("transpose_naive", "transpose_tiled", "block_sum_kernel")
N_MODEL = 64          # the simulated slice (the lecture's size)
N_GPU = 4096          # the size timed and predicted on a GPU


def _kernels() -> dict:
    """Lesson 03's lecture kernels, compiled from the lecture's own cells (the transposes whose
    times the lecture predicts, and its block sum): what is timed is what the lecture shows."""
    import json
    import linecache

    from ..paths import NOTEBOOKS

    lecture = json.loads((NOTEBOOKS / "03_simt_programming_model" / "lecture.ipynb").read_text())
    found: dict = {}
    for number, cell in enumerate(lecture["cells"]):
        source = "".join(cell["source"])
        if cell["cell_type"] != "code" or not any(f"def {n}(" in source for n in LECTURE_KERNELS):
            continue
        filename = f"<lecture 03 cell {number}>"   # the SIMT engine reads a kernel's source
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        space = {"cuda": cuda, "float32": float32, "float64": float64, "np": np}
        exec(compile(source, filename, "exec"), space)  # noqa: S102 - the course's own lecture
        found.update({name: space[name] for name in LECTURE_KERNELS if name in space})
    missing = sorted(set(LECTURE_KERNELS) - set(found))
    if missing:
        raise RuntimeError(f"lecture 03 no longer defines {missing}: update course_tools/benchmarks/simt.py")
    return found


def _launches(kernels: dict, rng) -> list[tuple]:
    a = rng.random((N_MODEL, N_MODEL)).astype(np.float32)
    x = rng.random(4 * 64)                        # block_sum_kernel: THREADS = 64 per block, float64
    grid = (N_MODEL // TILE, N_MODEL // TILE)
    return [(kernels["transpose_naive"], grid, (TILE, TILE), (a, np.zeros_like(a))),
            (kernels["transpose_tiled"], grid, (TILE, TILE), (a, np.zeros_like(a))),
            (kernels["block_sum_kernel"], 4, 64, (x, np.zeros(4)))]


def _median_seconds(fn, repeats: int = 3) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _model_cost(launches, repeats: int = 5) -> dict:
    """Engine seconds with and without the traffic model, runs alternated after a warm-up (the
    kernels' sources parsed once), the fastest of each kept (least disturbed by other work)."""
    from course_lib import simt

    def all_runs(traffic: bool) -> float:
        start = time.perf_counter()
        for kernel, grid, block, args in launches:
            simt.run(kernel, grid, block, *[np.copy(v) for v in args], traffic=traffic)
        return time.perf_counter() - start

    all_runs(True)
    pairs = [(all_runs(True), all_runs(False)) for _ in range(repeats)]
    with_model, without = min(p[0] for p in pairs), min(p[1] for p in pairs)
    return {"engine_seconds_with_traffic": round(with_model, 3), "engine_seconds_without_traffic": round(without, 3),
            "traffic_overhead (target <= 1.5)": round(with_model / without, 2), "_without": without}


def _numba_simulator_cost(launches) -> float:
    def all_runs():
        for kernel, grid, block, args in launches:
            kernel[grid, block](*[np.copy(v) for v in args])

    return _median_seconds(all_runs, repeats=2)


def _gpu_check(kernels: dict) -> dict:
    """Each transpose timed on the GPU at N_GPU x N_GPU, and predicted for this GPU's spec row."""
    from course_lib import simt, timing
    from course_lib.simt.prediction import GPUS

    name = cuda.get_current_device().name.decode() if isinstance(cuda.get_current_device().name, bytes) \
        else str(cuda.get_current_device().name)
    spec = next((g for g in GPUS if g.split()[1] in name), GPUS[0])
    rng = np.random.default_rng(1)
    a = rng.random((N_MODEL, N_MODEL)).astype(np.float32)
    big = cuda.to_device(rng.random((N_GPU, N_GPU)).astype(np.float32))
    dst = cuda.device_array((N_GPU, N_GPU), np.float32)
    figures, predicted, measured = {"gpu": name, "predicted_for": spec}, {}, {}
    grid = (N_GPU // TILE, N_GPU // TILE)
    for label in ("transpose_naive", "transpose_tiled"):
        kernel = kernels[label]
        result = simt.run(kernel, (N_MODEL // TILE, N_MODEL // TILE), (TILE, TILE), a, np.zeros_like(a))
        predicted[label] = simt.predict(result, spec, scale=(N_GPU / N_MODEL) ** 2).seconds
        t = timing.benchmark(lambda kernel=kernel: kernel[grid, (TILE, TILE)](big, dst), label=label,
                             device="cuda:0")
        measured[label] = t.median
        figures[f"{label}_predicted_s"] = predicted[label]
        figures[f"{label}_measured_s"] = t.median
        figures[f"{label}_predicted_over_measured (target within 3x)"] = round(predicted[label] / t.median, 2)
    figures["ranked_as_on_the_gpu"] = ((predicted["transpose_naive"] > predicted["transpose_tiled"])
                                       == (measured["transpose_naive"] > measured["transpose_tiled"]))
    return figures


def run() -> dict:
    kernels = _kernels()
    launches = _launches(kernels, np.random.default_rng(0))
    figures = _model_cost(launches)
    without = figures.pop("_without")
    mode = hardware.numba_cuda_mode()
    figures["numba_cuda_mode"] = mode
    if mode == "real":
        figures.update(_gpu_check(kernels))
    else:
        numba = _numba_simulator_cost(launches)
        figures["numba_simulator_seconds"] = round(numba, 3)
        figures["engine_over_numba_simulator (target <= 1)"] = round(without / numba, 2)
    return figures
