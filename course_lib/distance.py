"""The Euclidean distance matrix, one API and several backends (lesson 04).

``squared_distances(x, y, backend=...)`` returns the (m, n) matrix of squared distances
between the rows of x (m, d) and y (n, d); ``distances`` takes its square root.

Backends (:data:`BACKENDS`):

- ``numpy-broadcast``: ``((x[:, None, :] - y[None, :, :])**2).sum(-1)``; simple, but it
  materialises an (m, n, d) temporary;
- ``numpy-matmul``: ``|x|^2 - 2 x.y^T + |y|^2``; the heavy part is one matrix product
  (BLAS), temporaries are (m, n);
- ``cupy``: the matmul form on the GPU with CuPy (needs a usable GPU);
- ``numba-cpu``: a compiled loop nest, rows split across CPU cores (``prange``);
- ``numba-cuda``: the kernel of :mod:`course_lib.kernels` (GPU, or the simulator); pass
  device arrays to keep the data on the GPU between calls (:func:`sqdist_numba_cuda`).

``chunked_squared_distances`` computes the matrix a block of rows at a time so that the
temporaries of one block stay under a memory budget (bytes).
"""
from __future__ import annotations

import numpy as np
from numba import njit, parallel_chunksize, prange

from .arrays import asnumpy, get_array_module
from .arrays import xp as array_module
from .hardware import cupy_usable
from .timing import benchmark

BACKENDS = ("numpy-broadcast", "numpy-matmul", "cupy", "numba-cpu", "numba-cuda")
CPU_BACKENDS = ("numpy-broadcast", "numpy-matmul", "numba-cpu")


def _pair(x, y):
    xp = get_array_module(x)
    x = xp.asarray(x, dtype=xp.float64) if x.dtype.kind != "f" else x
    y = x if y is None else (xp.asarray(y, dtype=x.dtype) if y.dtype.kind != "f" else y)
    if x.ndim != 2 or y.ndim != 2 or x.shape[1] != y.shape[1]:
        raise ValueError(f"need (m, d) and (n, d) arrays, got {x.shape} and {y.shape}")
    return x, y


def sqdist_broadcast(x, y=None):
    """Squared distances by broadcasting; works for NumPy and CuPy arrays alike."""
    x, y = _pair(x, y)
    diff = x[:, None, :] - y[None, :, :]
    return (diff * diff).sum(axis=-1)


def sqdist_matmul(x, y=None):
    """Squared distances as |x|^2 - 2 x.y^T + |y|^2, clipped at zero (rounding can make
    the difference of two nearly equal numbers slightly negative). NumPy or CuPy."""
    xp = get_array_module(x)
    x, y = _pair(x, y)
    x2 = (x * x).sum(axis=1)[:, None]
    y2 = (y * y).sum(axis=1)[None, :]
    out = x @ y.T
    out *= -2.0
    out += x2
    out += y2
    return xp.maximum(out, 0.0, out=out)


_numba_cpu_kernels: dict = {}
PARALLEL_MIN_OUTPUT = 2**22
"""Outputs with fewer elements than this (a count, not bytes) run the serial loop: below
it, waking and scheduling the worker threads (milliseconds on a busy machine) costs more
than the work they would share."""


def _compile_numba_cpu(parallel: bool):
    """Compile (once per process; cached on disk) the CPU loop nest, parallel or serial."""
    if parallel not in _numba_cpu_kernels:
        def kernel(x, y_t, out):  # pragma: no cover - compiled
            m, d = x.shape
            n = y_t.shape[1]
            for i in prange(m):
                row = out[i]
                x0 = x[i, 0]
                y0 = y_t[0]
                for j in range(n):       # the first coordinate initialises the row ...
                    diff = x0 - y0[j]
                    row[j] = diff * diff
                for k in range(1, d):    # ... the others add to it while it sits in L1;
                    xik = x[i, k]        # every j loop is contiguous, so it vectorises
                    yk = y_t[k]
                    for j in range(n):
                        diff = xik - yk[j]
                        row[j] += diff * diff

        # a distinct name per variant, so the two never share an on-disk cache entry
        kernel.__qualname__ = "sqdist_rows_" + ("parallel" if parallel else "serial")
        _numba_cpu_kernels[parallel] = njit(parallel=parallel, fastmath=True, cache=True)(kernel)
    return _numba_cpu_kernels[parallel]


def sqdist_numba_cpu(x, y=None, out=None):
    """Squared distances with a Numba-compiled loop nest, rows spread over CPU cores
    (``prange``); the innermost loop runs along a row of the output, so it uses SIMD.

    ``out`` (optional): a C-contiguous (m, n) array of x's dtype to write into, which
    saves allocating (and first-touching) a fresh output on every call.
    """
    x, y = _pair(np.asarray(x), None if y is None else np.asarray(y))
    x = np.ascontiguousarray(x)
    y_t = np.ascontiguousarray(y.T)  # (d, n): coordinate k of every y is contiguous
    if out is None:
        out = np.empty((x.shape[0], y.shape[0]), dtype=x.dtype)
    if x.shape[1] == 0:          # no coordinates: every distance is zero
        out[...] = 0.0
        return out
    if out.size < PARALLEL_MIN_OUTPUT:
        _compile_numba_cpu(parallel=False)(x, y_t, out)
        return out
    with parallel_chunksize(64):  # threads take 64 rows at a time: a busy core delays no one
        _compile_numba_cpu(parallel=True)(x, y_t, out)
    return out


def sqdist_cupy(x, y=None):
    """Squared distances on the GPU with CuPy (matmul form); returns a CuPy array."""
    cp = array_module(prefer_gpu=True)
    if cp is np:
        raise RuntimeError("the cupy backend needs a GPU that CuPy can use; none here")
    x = cp.asarray(x)
    return sqdist_matmul(x, None if y is None else cp.asarray(y))


def sqdist_numba_cuda(x, y=None, out=None):
    """Squared distances with lesson 03's Numba CUDA kernel (GPU, or the simulator: keep it
    small there).

    NumPy inputs are copied to the GPU and the result back on every call. Device arrays
    (``cuda.to_device(x)`` once, and ``out=cuda.device_array((m, n))`` once) stay on the
    device: the call then only launches the kernel and returns ``out`` on the device, which
    is how a GPU beats the CPU at large n (the copies cost more than the kernel).
    """
    from .kernels import launch_squared_distance  # lazy: imports numba.cuda, which only this backend needs

    if hasattr(x, "__cuda_array_interface__"):
        return launch_squared_distance(x, y, out)
    return launch_squared_distance(asnumpy(x), None if y is None else asnumpy(y), out)


_IMPLEMENTATIONS = {
    "numpy-broadcast": sqdist_broadcast,
    "numpy-matmul": sqdist_matmul,
    "cupy": sqdist_cupy,
    "numba-cpu": sqdist_numba_cpu,
    "numba-cuda": sqdist_numba_cuda,
}


def available_backends() -> list[str]:
    """The backends that run here (CuPy only with a usable GPU; numba-cuda always, in the
    simulator without a GPU)."""
    return [b for b in BACKENDS if b != "cupy" or cupy_usable()]


def squared_distances(x, y=None, backend: str = "numpy-matmul"):
    """(m, n) squared Euclidean distances between rows of x (m, d) and y (n, d; default x)."""
    if backend not in _IMPLEMENTATIONS:
        raise ValueError(f"unknown backend {backend!r}; choose from {', '.join(BACKENDS)}")
    return _IMPLEMENTATIONS[backend](x, y)


def distances(x, y=None, backend: str = "numpy-matmul"):
    """(m, n) Euclidean distances: the square root of :func:`squared_distances`."""
    sq = squared_distances(x, y, backend)
    return get_array_module(sq).sqrt(sq)


# ------------------------------------------------------------------------ memory
def temporary_bytes(backend: str, m: int, n: int, d: int, itemsize: int = 8) -> int:
    """Bytes of the largest temporaries a backend allocates besides its (m, n) output.

    numpy-broadcast: the (m, n, d) difference array and its square; matmul forms: the two
    norm vectors; compiled loops: nothing.
    """
    if backend == "numpy-broadcast":
        return 2 * m * n * d * itemsize
    if backend in ("numpy-matmul", "cupy"):
        return (m + n) * itemsize
    return 0


def peak_bytes(backend: str, m: int, n: int, d: int, itemsize: int = 8) -> int:
    """Estimated peak memory of one call in bytes: inputs, output and temporaries."""
    return (m + n) * d * itemsize + m * n * itemsize + temporary_bytes(backend, m, n, d, itemsize)


def rows_per_chunk(n: int, d: int, budget_bytes: int, backend: str = "numpy-broadcast",
                   itemsize: int = 8) -> int:
    """Largest number of rows of x whose temporaries against all n rows of y fit in
    ``budget_bytes`` (at least 1)."""
    per_row = temporary_bytes(backend, 1, n, d, itemsize) + n * itemsize  # temps + chunk result
    return max(1, int(budget_bytes // per_row))


def chunked_squared_distances(x, y=None, budget_bytes: int = 64 * 2**20,
                              backend: str = "numpy-broadcast", out=None):
    """Squared distances computed in blocks of rows, each block's working memory under
    ``budget_bytes`` (the output itself is not counted: on a GPU it can go to the host
    block by block). Returns an array of the module that owns x."""
    xp = get_array_module(x)
    x, y = _pair(x, y)
    m, d = x.shape
    n = y.shape[0]
    rows = rows_per_chunk(n, d, budget_bytes, backend, x.dtype.itemsize)
    if out is None:
        out = xp.empty((m, n), dtype=x.dtype)
    for start in range(0, m, rows):
        out[start:start + rows] = squared_distances(x[start:start + rows], y, backend)
    return out


# --------------------------------------------------------------------- profiling
def time_matmul_form_steps(x, repeat: int = 5) -> dict:
    """{line: Timing} for each line of the matmul form for x against itself, the way a line
    profiler (``kernprof -l``, ``%lprun``) would attribute time: squared norms, the matrix
    product, and combining the three terms. Works for NumPy and CuPy arrays; each Timing
    (seconds per call in ``.median``) names the device it ran on (``.measured_on()``)."""
    xp = get_array_module(x)
    device = "cupy" if xp is not np else "cpu"
    norms = (x * x).sum(axis=1)
    gram = x @ x.T
    steps = {
        "norms: (x * x).sum(1)": lambda: (x * x).sum(axis=1),
        "product: x @ x.T": lambda: x @ x.T,
        "combine: x2 - 2 xy + y2": lambda: xp.maximum(norms[:, None] - 2.0 * gram + norms[None, :], 0.0),
    }
    return {name: benchmark(fn, label=name, device=device, warmup=1, repeat=repeat, min_repeat_time=0.005)
            for name, fn in steps.items()}
