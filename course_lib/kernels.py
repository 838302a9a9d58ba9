"""Numba CUDA kernels of lessons 03 and 04, their launch helpers, and the SIMT teaching models.

Every kernel here is plain ``@cuda.jit`` code: on a machine with an NVIDIA GPU it is
compiled for the GPU, elsewhere it runs in Numba's CUDA simulator (one CPU thread per
GPU thread; see :func:`course_lib.hardware.numba_cuda`). The launch helpers choose the
grid and block sizes, copy NumPy inputs to the device and the result back (arrays already on
the device stay there), and without a GPU run every launch in the course's SIMT engine
(:mod:`course_lib.simt`), checked for shared-memory races, out-of-bounds indices and barriers
that only part of a block reaches, with fresh shared memory poisoned (undefined, as on a GPU).

Only kernels that no exercise asks for live here: lesson 03's lecture defines its tiled
matmul and its shared-memory reduction in the notebook, and the exercises ask for other
kernels (pooling, dot product, scan, row sums, ...), so no answer can be imported.

Index convention for 2-D kernels: ``x, y = cuda.grid(2)``; **x is the column, y the
row**. Neighbouring threads of a warp (consecutive ``threadIdx.x``) then touch
neighbouring elements of a row-major array, so their global loads coalesce.

``launch(..., count=True)`` runs a kernel under :func:`course_lib.simt.count_accesses`
(reads and writes per thread, the idea of GPU-Puzzles). :func:`warp_passes` and
:func:`warp_sectors` model divergence and coalescing for one warp; their defaults (32 threads
per warp, 32-byte sectors) are the figures of NVIDIA's CUDA C++ Programming Guide ("SIMT
Architecture") and CUDA C++ Best Practices Guide ("Coalesced Access to Global Memory").
:mod:`course_lib.simt` measures both on a whole launch.
"""
from __future__ import annotations

import math
import sys
import warnings

import numpy as np
from numba.core import config

from .hardware import numba_cuda, numba_cuda_mode, prepare_numba_cuda


def _cuda_module():
    """``numba.cuda``, simulated when no GPU is usable, even if ``numba`` itself was imported
    before: Numba reads NUMBA_ENABLE_CUDASIM into its config at its own import, so the
    config is re-read after ``prepare_numba_cuda`` has set the variable."""
    if "numba.cuda" not in sys.modules:
        prepare_numba_cuda()
        config.reload_config()
    return numba_cuda()


cuda = _cuda_module()

TILE = 8
"""Edge of the square blocks of the 2-D kernels and of lesson 03's tiled matmul, in threads
(elements)."""


# ------------------------------------------------------------------ launch geometry
def blocks_for(n: int, threads_per_block: int) -> int:
    """Number of blocks so that ``blocks * threads_per_block >= n`` (ceiling division)."""
    if threads_per_block <= 0:
        raise ValueError("threads_per_block must be positive")
    return max(1, -(-int(n) // int(threads_per_block)))


def grid_1d(n: int, threads_per_block: int = 128) -> tuple[int, int]:
    """(blocks, threads per block) covering ``n`` elements with one thread each."""
    return blocks_for(n, threads_per_block), threads_per_block


def grid_2d(rows: int, cols: int, block: tuple[int, int] = (TILE, TILE)) -> tuple[tuple[int, int], tuple[int, int]]:
    """(grid, block) covering a rows x cols output, x along columns and y along rows.

    ``block`` is (threads along x, threads along y).
    """
    bx, by = block
    return (blocks_for(cols, bx), blocks_for(rows, by)), (bx, by)


# ------------------------------------------------------------------------- kernels
@cuda.jit
def vector_add_kernel(a, b, out):
    """out[i] = a[i] + b[i]; one thread per element, extra threads do nothing."""
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[i] + b[i]


@cuda.jit
def squared_distance_kernel(x, y, out):
    """out[i, j] = sum_k (x[i, k] - y[j, k])**2; one thread per output element."""
    j, i = cuda.grid(2)
    if i < out.shape[0] and j < out.shape[1]:
        acc = 0.0
        for k in range(x.shape[1]):
            diff = x[i, k] - y[j, k]
            acc += diff * diff
        out[i, j] = acc


@cuda.jit
def matmul_naive_kernel(a, b, c):
    """c[i, j] = sum_k a[i, k] * b[k, j], every operand read from global memory."""
    j, i = cuda.grid(2)
    if i < c.shape[0] and j < c.shape[1]:
        acc = 0.0
        for k in range(a.shape[1]):
            acc += a[i, k] * b[k, j]
        c[i, j] = acc


@cuda.jit
def histogram_kernel(x, lo, hi, counts):
    """counts[b] += 1 for the bin b of every x in [lo, hi] (equal-width bins, last one
    closed like NumPy's); threads that hit the same bin collide, so the add is atomic."""
    i = cuda.grid(1)
    if i < x.shape[0]:
        v = x[i]
        if v >= lo and v <= hi:
            nbins = counts.size
            b = int((v - lo) / (hi - lo) * nbins)
            if b >= nbins:
                b = nbins - 1
            cuda.atomic.add(counts, b, 1)


# -------------------------------------------------------------------- launch helpers
def _on_device(value) -> bool:
    """True for an array that already lives on the GPU (a Numba device array, or anything
    with ``__cuda_array_interface__``, e.g. a CuPy array), or the simulator's stand-in for one."""
    return hasattr(value, "__cuda_array_interface__") or type(value).__name__ == "FakeCUDAArray"


def _host_view(value):
    """The NumPy array behind a simulated device array (updated in place by a launch), so the
    checked simulator counts and bounds-checks it like any global array."""
    return value._ary if type(value).__name__ == "FakeCUDAArray" else value


def launch(kernel, grid, block, args, out_index: int = -1, count: bool = False):
    """Launch ``kernel[grid, block](*args)`` and return ``args[out_index]``.

    On a GPU, NumPy arguments are copied to the device first and the output back after, as
    a NumPy array; arguments already on the device are used where they are, and when the
    output is one of them it is returned as it is, nothing copied (call
    ``cuda.synchronize()`` before timing it). Without a GPU every launch is the checked one
    of :func:`course_lib.simt.count_accesses`: shared memory fresh and poisoned per block
    (NaN for floats: a slot read before it is written shows in the output), indices
    bounds-checked, a shared-memory race raises ``SharedMemoryRace`` and a barrier that only
    part of a block reaches ``DivergentBarrier``. With ``count=True`` the launch always runs in
    the engine, also on a GPU, and returns (output, AccessCounts).
    """
    from .simt import count_accesses  # lazy: the engine is only needed without a GPU or to count

    if count:
        counts = count_accesses(kernel, grid, block, *[_host_view(a) for a in args])
        return args[out_index], counts
    if numba_cuda_mode() == "real":
        with warnings.catch_warnings():  # small teaching grids trigger "low occupancy" warnings
            warnings.simplefilter("ignore")
            dev = [cuda.to_device(a) if isinstance(a, np.ndarray) else a for a in args]
            kernel[grid, block](*dev)
            if _on_device(args[out_index]):
                return args[out_index]
            cuda.synchronize()
            return dev[out_index].copy_to_host()
    count_accesses(kernel, grid, block, *[_host_view(a) for a in args])
    return args[out_index]


def vector_add(a, b, threads_per_block: int = 128, count: bool = False):
    """a + b for 1-D arrays of equal length, one GPU thread per element."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"need two 1-D arrays of the same length, got {a.shape} and {b.shape}")
    out = np.zeros(a.shape, dtype=np.result_type(a, b))
    blocks, threads = grid_1d(a.size, threads_per_block)
    return launch(vector_add_kernel, blocks, threads, (a, b, out), 2, count)


def launch_squared_distance(x, y=None, out=None, block: tuple[int, int] = (TILE, TILE),
                            count: bool = False):
    """Launch :func:`squared_distance_kernel` over the (m, n) output for x (m, d) and y (n, d).

    NumPy inputs (float64) are copied to the GPU and the result back, on every call. To keep
    data on the device, pass device arrays (``cuda.to_device(x)`` once) and a device ``out``
    (``cuda.device_array((m, n))`` once): then nothing crosses PCIe and ``out`` is returned
    without a copy (the launch is asynchronous). In the simulator everything is NumPy.
    """
    if _on_device(x):
        y = x if y is None else y
        if out is None:
            out = cuda.device_array((x.shape[0], y.shape[0]), dtype=x.dtype)
    else:
        x = np.ascontiguousarray(x, dtype=np.float64)
        y = x if y is None else np.ascontiguousarray(y, dtype=np.float64)
        if out is None:
            out = np.zeros((x.shape[0], y.shape[0]))
    if len(x.shape) != 2 or len(y.shape) != 2 or x.shape[1] != y.shape[1]:
        raise ValueError(f"need (m, d) and (n, d) arrays, got {x.shape} and {y.shape}")
    if tuple(out.shape) != (x.shape[0], y.shape[0]):
        raise ValueError(f"out has shape {tuple(out.shape)}, need {(x.shape[0], y.shape[0])}")
    grid, block = grid_2d(x.shape[0], y.shape[0], block)
    return launch(squared_distance_kernel, grid, block, (x, y, out), 2, count)


def _matmul_operands(a, b):
    a = np.ascontiguousarray(a, dtype=np.float32)
    b = np.ascontiguousarray(b, dtype=np.float32)
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"cannot multiply shapes {a.shape} and {b.shape}")
    return a, b, np.zeros((a.shape[0], b.shape[1]), dtype=np.float32)


def matmul_naive(a, b, block: tuple[int, int] = (TILE, TILE), count: bool = False):
    """a @ b in float32 with one thread per output element reading straight from global memory."""
    a, b, c = _matmul_operands(a, b)
    grid, block = grid_2d(c.shape[0], c.shape[1], block)
    return launch(matmul_naive_kernel, grid, block, (a, b, c), 2, count)


def histogram(x, bins: int, lo: float, hi: float, threads_per_block: int = 128, count: bool = False):
    """Counts of x in ``bins`` equal-width bins over [lo, hi] (int32), like
    ``np.histogram(x, bins, (lo, hi))[0]``."""
    if not hi > lo:
        raise ValueError("need hi > lo")
    x = np.ascontiguousarray(x, dtype=np.float64).ravel()
    counts = np.zeros(int(bins), dtype=np.int32)
    blocks, threads = grid_1d(x.size, threads_per_block)
    return launch(histogram_kernel, blocks, threads, (x, float(lo), float(hi), counts), 3, count)


def warp_passes(branch_of_thread, warp_size: int = 32) -> int:
    """Instruction passes a launch needs when each warp executes every branch that any of
    its threads takes, one after the other (SIMT divergence). ``branch_of_thread`` lists a
    branch label per thread, in thread order."""
    labels = list(branch_of_thread)
    return sum(len(set(labels[w:w + warp_size])) for w in range(0, len(labels), warp_size))


def warp_sectors(byte_addresses, access_bytes: int = 4, warp_size: int = 32, sector_bytes: int = 32) -> int:
    """32-byte sectors one load or store instruction moves: each warp fetches every distinct
    ``sector_bytes``-aligned sector that the ``access_bytes`` bytes of any of its threads fall in
    (coalescing). Since compute capability 6.0 global memory is served in 32-byte sectors, and a
    128-byte cache line is 4 of them (CUDA C++ Best Practices Guide, "Coalesced Access to Global
    Memory"): 32 threads reading neighbouring float32 move 4 sectors (128 bytes, all used); down a
    column of a row-major matrix they move 32 sectors (1,024 bytes for 128 used, 8x the need), not
    32 whole 128-byte lines (4,096 bytes), which overstates the waste 4x."""
    addresses = list(byte_addresses)
    total = 0
    for w in range(0, len(addresses), warp_size):
        sectors = set()
        for a in addresses[w:w + warp_size]:
            sectors.update(range(a // sector_bytes, (a + access_bytes - 1) // sector_bytes + 1))
        total += len(sectors)
    return total


# ------------------------------------------------------------------ hand counts
def matmul_global_reads_per_thread(k: int, tiled: bool, tile: int = TILE) -> int:
    """Global reads per thread for an output element of a (.., k) @ (k, ..) product, when
    every operand is in bounds: 2k for the naive kernel, 2 per phase (ceil(k/tile) phases)
    for the tiled one."""
    return 2 * math.ceil(k / tile) if tiled else 2 * k
