"""The Triton kernels lesson 14's lecture shows, and the helpers that explain them.

Triton's unit of work is a *program* that handles a whole block of elements: ``tl.program_id``
says which program this is, ``tl.arange`` makes the block of indices, a mask switches off the
lanes past the end, ``tl.load``/``tl.store`` move a block at once, ``tl.sum``/``tl.max`` reduce a
block, ``tl.dot`` multiplies two tiles. Compare lesson 03's SIMT kernels, where each *thread*
handles one element and the block's cooperation is written by hand.

The kernels here are the lecture's: a scale, a ReLU, the two fused, a row sum (a reduction in
one program) and a product of one tile pair. The exercises' kernels (vector add, fused softmax,
bias + GELU, tiled matmul with a K loop) are not here. Importing this module first calls
:func:`course_lib.triton_traffic.prepare` (``TRITON_INTERPRET=1`` without a GPU); it needs
Triton, which has Linux wheels only. Sizes are elements unless a name says bytes.
"""
from __future__ import annotations

import inspect
import textwrap

from .triton_traffic import prepare

prepare()   # before the decorators below run: the interpreter where no GPU can compile them

import numpy as np  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402


@triton.jit
def scale_kernel(x_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
    """out[i] = alpha * x[i] for i < n; program p handles elements p*BLOCK ... p*BLOCK+BLOCK-1."""
    idx = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = idx < n
    v = tl.load(x_ptr + idx, mask=inside)
    tl.store(out_ptr + idx, alpha * v, mask=inside)


@triton.jit
def relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """out[i] = max(x[i], 0) for i < n."""
    idx = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = idx < n
    v = tl.load(x_ptr + idx, mask=inside)
    tl.store(out_ptr + idx, tl.maximum(v, 0.0), mask=inside)


@triton.jit
def scale_relu_kernel(x_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
    """out[i] = max(alpha * x[i], 0): the two kernels above fused, one load and one store."""
    idx = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = idx < n
    v = tl.load(x_ptr + idx, mask=inside)
    tl.store(out_ptr + idx, tl.maximum(alpha * v, 0.0), mask=inside)


@triton.jit
def row_sum_kernel(x_ptr, out_ptr, n_cols, row_stride, BLOCK: tl.constexpr):
    """out[r] = sum of row r of x: one program per row, the row one block (BLOCK >= n_cols)."""
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * row_stride + cols, mask=cols < n_cols, other=0.0)
    tl.store(out_ptr + row, tl.sum(x, axis=0))


@triton.jit
def tile_dot_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK: tl.constexpr):
    """c = a @ b for contiguous a (M x K), b (K x N), c (M x N), all at most BLOCK x BLOCK:
    one program, one tile pair, one tl.dot (no grid of tiles, no loop over K)."""
    r = tl.arange(0, BLOCK)
    a = tl.load(a_ptr + r[:, None] * K + r[None, :], mask=(r[:, None] < M) & (r[None, :] < K), other=0.0)
    b = tl.load(b_ptr + r[:, None] * N + r[None, :], mask=(r[:, None] < K) & (r[None, :] < N), other=0.0)
    c = tl.dot(a, b, input_precision="ieee")
    tl.store(c_ptr + r[:, None] * N + r[None, :], c, mask=(r[:, None] < M) & (r[None, :] < N))


def source(kernel) -> str:
    """The Python source of a ``@triton.jit`` kernel, decorator included, for a slide."""
    fn = getattr(kernel, "fn", kernel)
    return textwrap.dedent(inspect.getsource(fn))


def lane_mask(n: int, block: int) -> np.ndarray:
    """(programs, block) booleans: which lanes of each program are inside ``n`` elements."""
    programs = triton.cdiv(n, block)
    offs = np.arange(programs)[:, None] * block + np.arange(block)[None, :]
    return offs < n


def softmax_bytes(n_rows: int, n_cols: int, element_bytes: int = 4) -> dict:
    """Bytes moved by a row softmax of an (n_rows, n_cols) matrix, by a model of its kernels:
    fused (one kernel: read x once, write out once) and unfused (three kernels: row max reads
    x and writes the maxima; exp-and-sum reads x and the maxima, writes exp and the sums; divide
    reads exp and the sums, writes out). {"fused": (read, written), "unfused": (read, written)}."""
    n, r, e = n_rows * n_cols, n_rows, element_bytes
    return {"fused": (n * e, n * e),
            "unfused": ((n + n + r + n + r) * e, (r + n + r + n) * e)}


def time_on_gpu(fn, bytes_moved: float = 0.0, flops: float = 0.0) -> dict:
    """Time ``fn()`` on the GPU with ``triton.testing.do_bench`` (warm-up, synchronised,
    median of many runs): {"ms": milliseconds, "gbs": bytes_moved / time in GB/s,
    "tflops": flops / time in TFLOP/s}. Only on a GPU (raises RuntimeError elsewhere)."""
    import torch

    if not torch.cuda.is_available() or prepare()[0] != "gpu":
        raise RuntimeError("time_on_gpu needs a GPU that Triton compiles for")
    ms = float(triton.testing.do_bench(fn, return_mode="median"))
    seconds = ms / 1e3
    return {"ms": ms, "gbs": bytes_moved / seconds / 1e9, "tflops": flops / seconds / 1e12}
