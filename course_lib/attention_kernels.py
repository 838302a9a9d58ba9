"""Attention in Triton: the naive three kernels and one fused kernel (lesson 15's lecture).

Naive attention is three launches, each a round trip through memory: :func:`scores_kernel`
writes ``S = scale * Q K^T`` (N x N), :func:`softmax_rows_kernel` reads S and writes ``P``
(N x N), :func:`weighted_sum_kernel` reads P and V and writes O. :func:`naive_attention_triton`
runs them; :func:`count_naive` counts their bytes in Triton's interpreter
(:func:`course_lib.triton_traffic.count`).

:func:`flash_forward_kernel` is FlashAttention's forward pass (Dao et al. 2022, with
FlashAttention-2's loop order, Dao 2023): program (i, h) holds a block of BLOCK_M queries of head
h on chip and walks over blocks of keys and values, keeping a running row maximum and sum (the
online softmax) and rescaling its accumulator whenever the maximum grows; S and P never reach
memory. It uses ``exp2`` with the scale folded into log2(e) (cheaper on GPUs than ``exp``), and,
when causal, skips the key blocks after the diagonal and masks only the diagonal ones. It is a
*timing* kernel: the sequence length must be a multiple of BLOCK_M (no masks on the sequence),
which the GPU benchmark's powers of two satisfy. :func:`flash_attention` launches it on
(batch, heads, N, d) tensors; :func:`count_fused` counts its bytes in the interpreter;
:func:`benchmark_gpu` times it against torch's SDPA (flash back-end) and the naive version.
:func:`benchmark_gpu_training` times a training step's attention, forward and backward, of SDPA's
flash back-end against naive attention (``scripts/gpu_attention_training.py`` runs it).

Importing this module calls :func:`course_lib.triton_traffic.prepare` first (``TRITON_INTERPRET=1``
without a GPU). Units: bytes, milliseconds, TFLOP/s; sizes are elements.
"""
from __future__ import annotations

import functools

from .triton_traffic import prepare

prepare()   # before the decorators below run: the interpreter where no GPU can compile them

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from . import triton_traffic  # noqa: E402
from .attention import attention_flops, naive_attention  # noqa: E402

LOG2E = 1.4426950408889634     # log2(e): exp(x) = exp2(x * log2(e))


# ------------------------------------------------------------------ naive: three kernels
@triton.jit
def scores_kernel(q_ptr, k_ptr, s_ptr, n, d, scale, CAUSAL: tl.constexpr, TILE: tl.constexpr,
                  HEAD: tl.constexpr):
    """S[i, j] = scale * q[i] . k[j] for contiguous q, k (n x d) into s (n x n); program (a, b)
    writes the TILE x TILE tile of S at rows a*TILE, columns b*TILE; HEAD >= d. Causal: the
    scores of keys after the query are written as -inf."""
    qi = tl.program_id(0) * TILE + tl.arange(0, TILE)
    kj = tl.program_id(1) * TILE + tl.arange(0, TILE)
    hd = tl.arange(0, HEAD)
    q_tile = tl.load(q_ptr + qi[:, None] * d + hd[None, :], mask=(qi[:, None] < n) & (hd[None, :] < d), other=0.0)
    k_cols = tl.load(k_ptr + kj[None, :] * d + hd[:, None], mask=(kj[None, :] < n) & (hd[:, None] < d), other=0.0)
    s = tl.dot(q_tile, k_cols, input_precision="ieee") * scale
    if CAUSAL:
        s = tl.where(kj[None, :] <= qi[:, None], s, -float("inf"))
    tl.store(s_ptr + qi[:, None] * n + kj[None, :], s, mask=(qi[:, None] < n) & (kj[None, :] < n))


@triton.jit
def softmax_rows_kernel(s_ptr, p_ptr, n, TILE: tl.constexpr):
    """P[r] = softmax(S[r]) for an n x n S, one program per row, the row read in pieces of TILE:
    a first pass finds the row's maximum and sum of exponentials, a second writes P (S is read
    twice, P written once: two of the trips through memory fusion removes)."""
    row = tl.program_id(0)
    top = -float("inf")
    total = 0.0
    for c0 in range(0, n, TILE):
        c = c0 + tl.arange(0, TILE)
        piece = tl.load(s_ptr + row * n + c, mask=c < n, other=-float("inf"))
        new_top = tl.maximum(top, tl.max(piece, axis=0))
        total = total * tl.exp(top - new_top) + tl.sum(tl.exp(piece - new_top), axis=0)
        top = new_top
    for c0 in range(0, n, TILE):
        c = c0 + tl.arange(0, TILE)
        piece = tl.load(s_ptr + row * n + c, mask=c < n, other=-float("inf"))
        tl.store(p_ptr + row * n + c, tl.exp(piece - top) / total, mask=c < n)


@triton.jit
def weighted_sum_kernel(p_ptr, v_ptr, o_ptr, n, d, TILE: tl.constexpr, HEAD: tl.constexpr):
    """O = P V for an n x n P and contiguous v, o (n x d); program a computes rows a*TILE ...,
    walking the keys in tiles of TILE."""
    qi = tl.program_id(0) * TILE + tl.arange(0, TILE)
    hd = tl.arange(0, HEAD)
    total = tl.zeros((TILE, HEAD), dtype=tl.float32)
    for j0 in range(0, n, TILE):
        kj = j0 + tl.arange(0, TILE)
        weights = tl.load(p_ptr + qi[:, None] * n + kj[None, :], mask=(qi[:, None] < n) & (kj[None, :] < n), other=0.0)
        values = tl.load(v_ptr + kj[:, None] * d + hd[None, :], mask=(kj[:, None] < n) & (hd[None, :] < d), other=0.0)
        total += tl.dot(weights, values, input_precision="ieee")
    tl.store(o_ptr + qi[:, None] * d + hd[None, :], total, mask=(qi[:, None] < n) & (hd[None, :] < d))


def _head(d: int) -> int:
    return max(16, triton.next_power_of_2(d))


def naive_attention_triton(q, k, v, causal: bool = False, tile: int = 16, counted: bool = False):
    """Attention of one head (q, k, v: contiguous float32 (n, d) CPU tensors) as the three naive
    kernels. Returns (o, [Traffic of each kernel]) when ``counted`` (in the interpreter), else
    (o, [])."""
    n, d = q.shape
    s, p, o = torch.empty(n, n), torch.empty(n, n), torch.empty(n, d)
    t = triton.cdiv(n, tile)
    launches = [(scores_kernel, (t, t), (q, k, s, n, d, d ** -0.5), (2,), {"CAUSAL": causal, "TILE": tile,
                                                                             "HEAD": _head(d)}),
                (softmax_rows_kernel, (n,), (s, p, n), (1,), {"TILE": tile}),
                (weighted_sum_kernel, (t,), (p, v, o, n, d), (2,), {"TILE": tile, "HEAD": _head(d)})]
    counts = []
    for kernel, grid, args, out, meta in launches:
        if counted:
            counts.append(triton_traffic.count(kernel, grid, *args, outputs=out, **meta))
        else:
            triton_traffic.launch(kernel, grid, *args, outputs=out, **meta)
    return o, counts


# ------------------------------------------------------------------ fused: FlashAttention's forward
@triton.jit
def _attend_block(acc, l_i, m_i, q_tile, k_base, v_base, start_n, offs_m, offs_n, offs_d, stride_n, qk_scale,
                  MASKED: tl.constexpr):
    """One step of the online softmax: fold keys start_n ... start_n + BLOCK_N - 1 into the
    running (acc, l_i, m_i) of a block of queries; scores are in log2 units (qk_scale includes
    log2(e)). MASKED: the diagonal block of a causal head (keys after the query get -inf).
    (Its name starts with _: the exercises' grader refuses a kernel that calls it, or calls
    flash_forward_kernel, so the lecture's kernel cannot stand in for Exercise 2's.)"""
    k_cols = tl.load(k_base + (start_n + offs_n)[None, :] * stride_n + offs_d[:, None])
    s = tl.dot(q_tile, k_cols) * qk_scale
    if MASKED:
        s = tl.where(offs_m[:, None] >= (start_n + offs_n)[None, :], s, -float("inf"))
    m_next = tl.maximum(m_i, tl.max(s, 1))
    weights = tl.math.exp2(s - m_next[:, None])
    shrink = tl.math.exp2(m_i - m_next)
    v_tile = tl.load(v_base + (start_n + offs_n)[:, None] * stride_n + offs_d[None, :])
    acc = acc * shrink[:, None] + tl.dot(weights.to(v_tile.dtype), v_tile)
    return acc, l_i * shrink + tl.sum(weights, 1), m_next


@triton.jit
def flash_forward_kernel(Q, K, V, Out, stride_h, stride_n, n_ctx, sm_scale, HEAD_DIM: tl.constexpr,
                         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr):
    """Out = softmax(sm_scale * Q K^T) V for (heads, n_ctx, HEAD_DIM) tensors with strides
    (stride_h, stride_n, 1); program (i, h) computes query rows i*BLOCK_M ... of head h.
    n_ctx must be a multiple of BLOCK_M, and BLOCK_M of BLOCK_N."""
    start_m = tl.program_id(0)
    base = tl.program_id(1).to(tl.int64) * stride_h
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    q_tile = tl.load(Q + base + offs_m[:, None] * stride_n + offs_d[None, :])
    m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.4426950408889634
    if CAUSAL:
        stop = start_m * BLOCK_M         # key blocks wholly before the queries: no mask needed
    else:
        stop = n_ctx
    for start_n in range(0, stop, BLOCK_N):
        acc, l_i, m_i = _attend_block(acc, l_i, m_i, q_tile, K + base, V + base, start_n, offs_m, offs_n, offs_d,
                                     stride_n, qk_scale, False)
    if CAUSAL:                           # the diagonal: masked; the blocks after it are skipped
        for start_n in range(start_m * BLOCK_M, (start_m + 1) * BLOCK_M, BLOCK_N):
            acc, l_i, m_i = _attend_block(acc, l_i, m_i, q_tile, K + base, V + base, start_n, offs_m, offs_n, offs_d,
                                         stride_n, qk_scale, True)
    out = acc / l_i[:, None]
    tl.store(Out + base + offs_m[:, None] * stride_n + offs_d[None, :], out.to(Out.dtype.element_ty))


def _fused_args(q, k, v, o, block_m: int):
    heads, n, d = q.shape[0] * q.shape[1], q.shape[2], q.shape[3]
    if n % block_m:
        raise ValueError(f"flash_forward_kernel needs the sequence length to be a multiple of BLOCK_M = {block_m}, "
                         f"got {n} (it has no masks on the sequence; the exercises' kernel does)")
    return (n // block_m, heads), (q, k, v, o, n * d, d, n, d ** -0.5)


def flash_attention(q, k, v, causal: bool = False, block_m: int = 128, block_n: int = 64, num_warps: int = 4,
                    num_stages: int = 3):
    """Attention of (batch, heads, n, d) tensors with :func:`flash_forward_kernel`, compiled for
    the GPU where there is one (``num_warps``/``num_stages`` apply there), else interpreted."""
    q, k, v = (t.contiguous() for t in (q, k, v))
    o = torch.empty_like(q)
    grid, args = _fused_args(q, k, v, o, block_m)
    meta = {"HEAD_DIM": q.shape[-1], "BLOCK_M": block_m, "BLOCK_N": block_n, "CAUSAL": causal}
    if q.is_cuda:
        flash_forward_kernel[grid](*args, num_warps=num_warps, num_stages=num_stages, **meta)
    else:
        triton_traffic.launch(flash_forward_kernel, grid, *args, outputs=(3,), **meta)
    return o


def count_fused(q, k, v, causal: bool = False, block_m: int = 16, block_n: int = 16):
    """(o, Traffic) of :func:`flash_forward_kernel` on CPU (batch, heads, n, d) tensors, counted in
    the interpreter."""
    q, k, v = (t.contiguous() for t in (q, k, v))
    o = torch.empty_like(q)
    grid, args = _fused_args(q, k, v, o, block_m)
    traffic = triton_traffic.count(flash_forward_kernel, grid, *args, outputs=(3,), HEAD_DIM=q.shape[-1],
                                   BLOCK_M=block_m, BLOCK_N=block_n, CAUSAL=causal)
    return o, traffic


def count_naive(q, k, v, causal: bool = False, tile: int = 16):
    """(o, [Traffic of each of the three kernels]) of naive attention on one CPU head (n, d)."""
    return naive_attention_triton(q, k, v, causal=causal, tile=tile, counted=True)


# ------------------------------------------------------------------ timing on a GPU
CONFIGS = ((128, 64, 4, 3), (128, 64, 8, 3), (64, 64, 4, 3), (128, 128, 8, 3))   # BLOCK_M, BLOCK_N, warps, stages


def _peak_bytes(fn) -> int:
    """Bytes allocated at the peak of one call of ``fn`` beyond what was allocated before it."""
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    fn()
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - before


def benchmark_gpu(seq_lens=(1024, 2048, 4096, 8192, 16384), d: int = 64, heads: int = 16, tokens: int = 16384,
                  causal: bool = False, dtype=torch.bfloat16) -> list[dict]:
    """Time the fused Triton kernel (the fastest of :data:`CONFIGS`), torch's SDPA restricted to
    its flash back-end, and naive attention in torch, on (tokens // n, heads, n, d) tensors of
    ``dtype`` on the GPU (``triton.testing.do_bench``: warmed up, synchronised, median).
    Rows: implementation, seq_len, batch, ms, tflops (:func:`course_lib.attention.attention_flops`
    / time), peak_bytes (``torch.cuda.max_memory_allocated`` during one call, beyond the inputs),
    max_error (largest difference from SDPA), note. Only on a GPU (RuntimeError elsewhere)."""
    if not torch.cuda.is_available() or prepare()[0] != "gpu":
        raise RuntimeError("benchmark_gpu needs a CUDA GPU that Triton compiles for")
    rows = []
    for n in seq_lens:
        rows += _benchmark_seq_len(n, d, heads, tokens, causal, dtype)
        torch.cuda.empty_cache()   # the tensors of length n were freed when _benchmark_seq_len returned
    return rows


def _benchmark_seq_len(n: int, d: int, heads: int, tokens: int, causal: bool, dtype) -> list[dict]:
    """The rows of :func:`benchmark_gpu` for sequence length ``n`` (tokens); its tensors live
    until it returns."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    batch = max(1, tokens // n)
    q, k, v = (torch.randn(batch, heads, n, d, device="cuda", dtype=dtype) for _ in range(3))
    flops = attention_flops(n, d, causal, batch * heads)

    def sdpa_flash():
        with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    reference = sdpa_flash()
    best = None
    for bm, bn, warps, stages in CONFIGS:
        if n % bm:
            continue
        fn = functools.partial(flash_attention, q, k, v, causal, block_m=bm, block_n=bn, num_warps=warps,
                               num_stages=stages)
        try:
            ms = float(triton.testing.do_bench(fn, return_mode="median"))
        except Exception as exc:  # noqa: BLE001 - a configuration this GPU cannot compile (shared memory)
            if best is None:
                best = (float("inf"), fn, f"{type(exc).__name__}: {str(exc)[:80]}")
            continue
        if best is None or ms < best[0]:
            best = (ms, fn, f"BLOCK_M={bm}, BLOCK_N={bn}, num_warps={warps}, num_stages={stages}")
    candidates = [("Triton fused (this lesson)", best[1], best[2]), ("SDPA flash", sdpa_flash, ""),
                  ("naive (3 kernels)", functools.partial(naive_attention, q, k, v, causal), "")]
    rows = []
    for name, fn, note in candidates:
        row = {"implementation": name, "seq_len": n, "batch": batch, "ms": float("nan"), "tflops": float("nan"),
               "peak_bytes": float("nan"), "max_error": float("nan"), "note": note}
        rows.append(_measured(row, fn, reference, flops))
    return rows


def _measured(row: dict, fn, reference, flops: float, grad: bool = False) -> dict:
    """``row`` with what one benchmarked call of ``fn`` gave: max_error (against ``reference``), ms
    (``triton.testing.do_bench``'s median), tflops (``flops`` over it), peak_bytes; where it could not
    be measured, a note says why (out of memory, or the error) and the other rows are still measured.
    ``grad``: run with autograd on (a forward and backward step)."""
    try:
        with torch.set_grad_enabled(grad):
            row["max_error"] = float((fn().float() - reference.float()).abs().max())
            row["ms"] = float(triton.testing.do_bench(fn, return_mode="median"))
            row["peak_bytes"] = _peak_bytes(fn)
        row["tflops"] = flops / (row["ms"] / 1e3) / 1e12
    except torch.cuda.OutOfMemoryError:
        row["note"] = "out of GPU memory"
        torch.cuda.empty_cache()
    except Exception as exc:  # noqa: BLE001 - reported in the table, the other rows still measured
        row["note"] = f"failed: {type(exc).__name__}: {str(exc)[:80]}"
    return row


def benchmark_gpu_training(seq_lens=(1024, 4096, 16384), d: int = 64, heads: int = 16, tokens: int = 16384,
                           causal: bool = False, dtype=torch.bfloat16) -> list[dict]:
    """Time one training step of attention, forward and backward, on (tokens // n, heads, n, d)
    tensors of ``dtype`` on the GPU: torch's SDPA restricted to its flash back-end (FlashAttention-2:
    the backward recomputes P from Q, K and the row log-sum-exp) against naive attention, whose
    autograd keeps the N x N probabilities; the forward alone too. ``triton.testing.do_bench``
    (warmed up, synchronised, median); the gradient of O is a fixed random tensor. Rows: implementation,
    pass ('forward' or 'forward+backward'), seq_len, d, batch, ms, tflops (:func:`attention_flops`, and
    3.5 times it for forward+backward: FlashAttention-2's convention, the backward 2.5 times the
    forward), peak_bytes (beyond the inputs, during one call), max_error (of dQ against SDPA flash's,
    forward+backward rows; of O otherwise), note. Only on a GPU (RuntimeError elsewhere)."""
    if not torch.cuda.is_available():
        raise RuntimeError("benchmark_gpu_training needs a CUDA GPU")
    rows = []
    for n in seq_lens:
        rows += _training_rows(n, d, heads, tokens, causal, dtype)
        torch.cuda.empty_cache()
    return rows


def _training_rows(n: int, d: int, heads: int, tokens: int, causal: bool, dtype) -> list[dict]:
    """The rows of :func:`benchmark_gpu_training` for sequence length ``n``."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    batch = max(1, tokens // n)
    q, k, v = (torch.randn(batch, heads, n, d, device="cuda", dtype=dtype, requires_grad=True) for _ in range(3))
    grad = torch.randn(batch, heads, n, d, device="cuda", dtype=dtype)
    flops = attention_flops(n, d, causal, batch * heads)

    def flash():
        with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    def naive():
        return naive_attention(q, k, v, causal)

    def step(forward):
        def run():
            q.grad = k.grad = v.grad = None
            forward().backward(grad)
            return q.grad
        return run

    reference = {"forward": flash().detach(), "forward+backward": step(flash)().detach()}
    rows = []
    for name, forward in (("SDPA flash (FlashAttention-2)", flash), ("naive (autograd keeps P)", naive)):
        for kind, fn, scale in (("forward", forward, 1.0), ("forward+backward", step(forward), 3.5)):
            row = {"implementation": name, "pass": kind, "seq_len": n, "d": d, "batch": batch, "ms": float("nan"),
                   "tflops": float("nan"), "peak_bytes": float("nan"), "max_error": float("nan"), "note": ""}
            rows.append(_measured(row, fn, reference[kind], scale * flops, grad=kind != "forward"))
    return rows
