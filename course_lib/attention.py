"""Attention's memory and arithmetic, the online softmax, and which back-end torch chose (lesson 15).

Scaled dot-product attention for one head: ``O = softmax(scale * Q K^T) V`` with Q, K, V and O of
shape (N, d), the sequence length N and the head dimension d. Written *naively* it is three
kernels, each a round trip through the GPU's main memory (HBM): ``S = scale * Q K^T`` writes an
N x N matrix, the row softmax reads S and writes ``P`` (N x N again), and ``O = P V`` reads P.
The N x N intermediates make memory grow as N^2 and make the softmax kernel memory-bound.

FlashAttention (Dao et al., NeurIPS 2022) never writes S or P: it walks over blocks of K and V,
keeps a *running* row maximum ``m`` and row sum ``l`` of the exponentials (the online softmax,
Milakov and Gimelshein 2018), and rescales what it accumulated whenever the maximum grows. This
module holds the counting models (:func:`naive_kernels`, :func:`score_matrix_bytes`,
:func:`attention_flops`, :func:`backward_flops`, :func:`saved_for_backward_bytes`, and the
measured :func:`saved_tensor_bytes`), a naive attention in torch (:func:`naive_attention`), the online
softmax of one *vector*, shown step by step (:func:`online_softmax_steps`), and the probe that
says which of torch's ``scaled_dot_product_attention`` back-ends ran (:func:`sdpa_backend_used`),
and the GPU figures the lecture plots where it has no GPU (:func:`gpu_figures_on_record`).
The Triton kernels are in :mod:`course_lib.attention_kernels`.

Units: bytes, FLOPs (a multiply and an add are 2), seconds; N and d are element counts.
"""
from __future__ import annotations

import math
import os
import sys
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np


# ------------------------------------------------------------------ counting models
def attention_flops(n: int, d: int, causal: bool = False, heads: int = 1) -> float:
    """FLOPs of one attention forward over ``heads`` (batch x heads) of length ``n``: two matrix
    products of 2 n^2 d each (the convention of the FlashAttention papers' benchmarks; the
    softmax's O(n^2) is left out); half of it when causal."""
    flops = 4.0 * n * n * d * heads
    return flops / 2 if causal else flops


def backward_flops(n: int, d: int, causal: bool = False, heads: int = 1) -> float:
    """FLOPs of one attention backward over ``heads`` heads of length ``n``: five matrix products
    of 2 n^2 d each (S recomputed from Q and K, dV = P^T dO, dP = dO V^T, dQ = dS K, dK = dS^T Q),
    2.5 times the forward's two (the convention of the FlashAttention-2 paper's benchmarks); half
    of it when causal. A backward that stored P instead of recomputing it would do four."""
    return 2.5 * attention_flops(n, d, causal, heads)


def saved_for_backward_bytes(n: int, d: int, heads: int = 1, element_bytes: int = 2, store_p: bool = False) -> int:
    """Bytes a training step keeps from attention's forward for its backward, per ``heads`` heads:
    Q, K, V and O (n x d each) and the row log-sum-exp L (n floats, float32) when P is recomputed
    (FlashAttention); the N x N probabilities P as well with ``store_p`` (naive attention's autograd)."""
    kept = (4 * n * d * element_bytes + 4 * n) * heads
    return kept + (n * n * element_bytes * heads if store_p else 0)


def saved_tensor_bytes(fn, *inputs) -> int:
    """Bytes of the tensors torch's autograd saves for the backward while ``fn(*inputs)`` runs,
    each storage counted once (``torch.autograd.graph.saved_tensors_hooks`` sees every one)."""
    import torch

    storages = {}

    def pack(t):
        storage = t.untyped_storage()
        storages[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn(*inputs)
    return sum(storages.values())


def score_matrix_bytes(n: int, heads: int = 1, element_bytes: int = 2) -> int:
    """Bytes of one N x N score matrix per head, for ``heads`` (batch x heads) of them: what naive
    attention keeps in HBM (twice: S and P)."""
    return n * n * heads * element_bytes


@dataclass
class KernelCount:
    """One kernel of naive attention: its name, FLOPs, bytes read and written (from HBM)."""
    name: str
    flops: float
    bytes_read: int
    bytes_written: int

    @property
    def intensity(self) -> float:
        """Arithmetic intensity in FLOPs per byte moved (read + written)."""
        return self.flops / (self.bytes_read + self.bytes_written)


def naive_kernels(n: int, d: int, element_bytes: int = 2) -> list[KernelCount]:
    """The three kernels of naive attention for one head, by a model of their HBM traffic (each
    operand read once, each result written once): ``S = scale * Q K^T``, ``P = softmax(S)``
    (about 5 FLOPs per element: max, subtract, exp, sum, divide), ``O = P V``."""
    e = element_bytes
    return [KernelCount("S = QK^T", 2.0 * n * n * d, 2 * n * d * e, n * n * e),
            KernelCount("P = softmax(S)", 5.0 * n * n, n * n * e, n * n * e),
            KernelCount("O = PV", 2.0 * n * n * d, (n * n + n * d) * e, n * d * e)]


def naive_bytes(n: int, d: int, element_bytes: int = 2) -> int:
    """HBM bytes moved (read + written) by the three naive kernels of one head."""
    return sum(k.bytes_read + k.bytes_written for k in naive_kernels(n, d, element_bytes))


def io_floor_bytes(n: int, d: int, element_bytes: int = 2) -> int:
    """The least HBM traffic attention of one head can have: Q, K, V read once and O written
    once, 4 n d elements. A fused kernel approaches it; it re-reads K and V once per block of
    queries it holds on chip, which counting in the interpreter shows."""
    return 4 * n * d * element_bytes


# ------------------------------------------------------------------ naive attention in torch
def naive_attention(q, k, v, causal: bool = False, scale: float | None = None):
    """softmax(scale * q k^T) v written as three separate operations (three kernels on a GPU),
    q, k, v of shape (..., N, d); ``scale`` defaults to 1/sqrt(d). With ``causal``, the scores of
    keys after the query are set to -inf *before* the softmax."""
    import torch

    scale = q.shape[-1] ** -0.5 if scale is None else scale
    scores = (q @ k.transpose(-2, -1)) * scale
    if causal:
        n = q.shape[-2]
        future = torch.ones(n, k.shape[-2], dtype=torch.bool, device=q.device).triu(1)
        scores = scores.masked_fill(future, float("-inf"))
    probs = torch.softmax(scores.float(), dim=-1).to(q.dtype)
    return probs @ v


# ------------------------------------------------------------------ the online softmax of a vector
@dataclass
class OnlineState:
    """The state after some blocks of a vector: ``running_max`` of the elements seen and
    ``running_sum`` of exp(element - running_max) over them; ``block`` is how many blocks."""
    block: int
    running_max: float
    running_sum: float


def online_softmax_steps(x, block: int) -> list[OnlineState]:
    """Read ``x`` (1-D) one block of ``block`` elements at a time, keeping only a running maximum
    and a running sum of exponentials; when a block raises the maximum from ``old`` to ``new``,
    the sum so far is multiplied by exp(old - new), which puts it on the new maximum's scale.
    Returns the state after every block (the last one describes the whole vector)."""
    values = np.asarray(x, dtype=np.float64).ravel()
    top, total, states = -math.inf, 0.0, []
    for i, start in enumerate(range(0, values.size, block)):
        chunk = values[start:start + block]
        highest = max(top, float(chunk.max()))
        correction = math.exp(top - highest) if top > -math.inf else 0.0
        total = total * correction + float(np.exp(chunk - highest).sum())
        top = highest
        states.append(OnlineState(i + 1, top, total))
    return states


def online_softmax(x, block: int) -> np.ndarray:
    """softmax(x) of a 1-D ``x`` from one streaming pass of :func:`online_softmax_steps` for the
    maximum and the sum, then exp(x - max) / sum (float64)."""
    last = online_softmax_steps(x, block)[-1]
    return np.exp(np.asarray(x, dtype=np.float64).ravel() - last.running_max) / last.running_sum


# ------------------------------------------------------------------ torch's back-ends
@contextmanager
def _profiler_quiet():
    """Silence what torch's profiler library writes straight to the process's stderr (file
    descriptor 2: 'profiler_start' lines), which a notebook would show as an error stream."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):
        yield
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


BACKEND_OPS = {"flash": ("_scaled_dot_product_flash_attention", "_flash_attention_forward"),
               "memory-efficient": ("_scaled_dot_product_efficient_attention", "_efficient_attention_forward"),
               "cudnn": ("_scaled_dot_product_cudnn_attention", "_cudnn_attention"),
               "math": ("_scaled_dot_product_attention_math",)}


def sdpa_backend_used(q, k, v, causal: bool = False) -> tuple[str, str]:
    """Which implementation ``torch.nn.functional.scaled_dot_product_attention`` dispatched to for
    these tensors: (back-end name, the aten operator the profiler recorded). When the profiler
    sees no fused operator, the math back-end ran (plain matmul and softmax operators)."""
    import torch.nn.functional as F
    from torch.profiler import ProfilerActivity, profile

    with _profiler_quiet(), profile(activities=[ProfilerActivity.CPU]) as prof:
        F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    names = [e.key for e in prof.key_averages()]
    for backend, ops in BACKEND_OPS.items():
        for name in names:
            if any(op in name for op in ops):
                return backend, name
    return "math", "aten::matmul + aten::_softmax (no fused operator)"


def sdpa_backends_available(q, k, v, causal: bool = False) -> dict[str, str]:
    """{back-end: "runs" or the first line of why not} for each of torch's SDPA back-ends alone
    (``torch.nn.attention.sdpa_kernel([backend])``) on these tensors."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    out = {}
    for name, backend in (("flash", SDPBackend.FLASH_ATTENTION), ("memory-efficient", SDPBackend.EFFICIENT_ATTENTION),
                          ("cudnn", SDPBackend.CUDNN_ATTENTION), ("math", SDPBackend.MATH)):
        try:
            with sdpa_kernel([backend]):
                F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            out[name] = "runs"
        except RuntimeError as exc:
            text = str(exc).strip().splitlines()[0]
            out[name] = ("not available for these tensors on this device (torch found no viable kernel)"
                         if text.startswith("No viable backend") else text[:120])
    return out


# ------------------------------------------------------------------ GPU figures on record
@dataclass(frozen=True)
class GpuFigure:
    """One figure a GPU reached, for the lecture to plot where this machine has none: ``value`` in
    ``unit`` (TFLOP/s: 1e12 FLOPs per second; GB/s: 1e9 bytes per second), the ``device`` and
    ``date`` it comes from, and its ``origin``: 'recorded' (printed by one of the course's own
    runs, ``data/gpu_recorded.csv``; 'recorded, 4 notebooks at once' when the GPU was shared) or
    'cited: <paper>'."""
    what: str
    value: float
    unit: str
    device: str
    date: str
    origin: str

    @property
    def label(self) -> str:
        """Three lines for a bar: what it is; the device and date; the origin."""
        return f"{self.what}\n{self.device}, {self.date}\n{self.origin}"


# the FlashAttention papers' headline throughputs, as the lecture's table and references cite them
CITED_ATTENTION_TFLOPS = (
    GpuFigure("FlashAttention-2, training GPT, per GPU", 225.0, "TFLOP/s", "NVIDIA A100", "2023",
              "cited: Dao 2023 (arXiv:2307.08691)"),
    GpuFigure("FlashAttention-3, FP16", 740.0, "TFLOP/s", "NVIDIA H100", "2024",
              "cited: Shah et al. 2024 (arXiv:2407.08608)"),
)


def _recorded(what: str, key: str, value: float | None = None, unit: str | None = None) -> GpuFigure:
    """The figure ``key`` of ``data/gpu_recorded.csv`` (or ``value`` in ``unit`` derived from it)."""
    from .recorded import ALONE, figure

    fig = figure(key)
    origin = "recorded" if fig.sharing == ALONE else f"recorded, {fig.sharing}"
    return GpuFigure(what, fig.value if value is None else value, unit or fig.unit, fig.device, fig.date, origin)


def gpu_figures_on_record() -> dict[str, list[GpuFigure]]:
    """What the lecture plots where there is no GPU to run its benchmark on, by unit, every figure
    read through :mod:`course_lib.recorded` or cited. TFLOP/s: matrix products (attention is two
    of them per head) and the lesson's own fused kernel beside SDPA's flash back-end, recorded on an
    H200 by the course's run of 2026-11-28 (each notebook alone), and the attention throughput the
    FlashAttention papers report (cited). GB/s: lesson 14's row softmax unfused and
    fused into one kernel, recorded, beside the device's copy bandwidth, the most a memory-bound
    kernel can reach (fusing S, softmax and P V is what FlashAttention does)."""
    from .recorded import figure

    gflops = {fmt: figure(f"12.{fmt}_gflops_n4096_h200").value for fmt in ("fp32", "bf16")}   # one run, alone
    tflops = [_recorded("fp32 matmul 4096²", "12.fp32_gflops_n4096_h200", gflops["fp32"] / 1e3, "TFLOP/s"),
              _recorded("bf16 matmul 4096² (tensor cores)", "12.bf16_gflops_n4096_h200", gflops["bf16"] / 1e3,
                        "TFLOP/s"),
              _recorded("fused attention: this lesson's Triton kernel, bf16, N = 4096", "15.fused_triton_tflops_n4096"),
              _recorded("SDPA's flash back-end, same tensors", "15.sdpa_flash_tflops_n4096"),
              *CITED_ATTENTION_TFLOPS]
    bandwidth = [_recorded("row softmax, unfused (eager)", "14.softmax_eager_gbs"),
                 _recorded("row softmax, fused (one Triton kernel)", "14.softmax_inductor_gbs"),
                 _recorded("device-to-device copy", "01.copy_bandwidth_gbs")]
    return {"TFLOP/s": tflops, "GB/s": bandwidth}


# ------------------------------------------------------------------ memory a call allocates
def allocated_bytes(fn) -> int:
    """Bytes that the operators of one call of ``fn()`` allocated, on the CPU: the sum of each
    operator's own allocations as ``torch.profiler`` (``profile_memory=True``) records them,
    frees not subtracted. On a GPU use ``torch.cuda.max_memory_allocated`` instead (the peak)."""
    from torch.profiler import ProfilerActivity, profile

    with _profiler_quiet(), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    return int(sum(max(0, e.self_cpu_memory_usage) for e in prof.key_averages()))


def kernel_source(name: str) -> str:
    """The source of one function of :mod:`course_lib.attention_kernels` (decorator included),
    read from its file without importing Triton, so that it can be shown where Triton cannot run."""
    from .triton_traffic import lecture_kernel_source

    return lecture_kernel_source(name, module="attention_kernels")
