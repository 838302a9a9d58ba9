"""FP8 attention's numerics, emulated on the CPU (lesson 15): Q, K and V cast to e4m3 with one scale
per tensor or one per block of rows, with or without an incoherent (random Hadamard) rotation of Q
and K, and the attention output's error against float64.

An FP8 tensor-core matmul reads e4m3 operands (4 exponent bits, 3 mantissa bits, largest finite
value 448) and a scale per operand or per block; the error it adds is the cast's. Here the cast is
torch's own (``torch.float8_e4m3fn``, which runs on the CPU), the scaled value is dequantized at
once, and everything else is computed in float64, so the error measured is the cast's alone.

FlashAttention-3 (Shah, Bikshandi, Zhang, Thakkar, Ramani, Dao 2024, arXiv:2407.08608, section 4.3)
tests FP8 attention on inputs with outlier features: every entry of Q, K and V drawn from N(0, 1),
and 0.1 % of them given an extra N(0, 10^2) term (:func:`outlier_qkv`). It reports the output's
RMSE against an FP64 reference of 2.4e-2 for FP8 with per-tensor scaling and 9.1e-3 for its FP8
kernel (block quantization and incoherent processing), about 2.6x lower.

Why a rotation helps: the error of one score q . k is sum_c (dq_c k_c + q_c dk_c), each rounding
error dq_c about 2^-4 of q_c. When a query and a key both hold an outlier in coordinate c, that one
term, about 2^-4 q_c k_c, dominates the score's error. Multiplying Q and K by the same orthogonal M
(``H diag(+-1) / sqrt(d)``, H a Hadamard matrix) leaves every score unchanged, (QM)(KM)^T = QK^T,
but spreads each outlier over all d coordinates: the one large error term becomes d small ones of
random sign, whose sum grows like sqrt(d), not d.
"""
from __future__ import annotations

import math

import torch

E4M3_MAX = 448.0
"""The largest finite value of float8 e4m3 (``torch.finfo(torch.float8_e4m3fn).max``)."""


def outlier_qkv(heads: int, n: int, d: int, seed: int = 0, fraction: float = 1e-3, outlier_std: float = 10.0):
    """FlashAttention-3's test inputs: Q, K, V of shape (heads, n, d), float64, entries N(0, 1), a
    ``fraction`` of them (0.1 %) with an extra N(0, ``outlier_std``^2) term."""
    g = torch.Generator().manual_seed(seed)

    def one():
        x = torch.randn(heads, n, d, generator=g, dtype=torch.float64)
        hit = torch.rand(heads, n, d, generator=g, dtype=torch.float64) < fraction
        return x + hit * torch.randn(heads, n, d, generator=g, dtype=torch.float64) * outlier_std

    return one(), one(), one()


def cast_e4m3(x: torch.Tensor, block_rows: int | None = None) -> torch.Tensor:
    """``x`` (..., n, d) cast to e4m3 and back, scaled so that the largest magnitude maps to 448:
    one scale per tensor (the last two dimensions) when ``block_rows`` is None, else one per block
    of ``block_rows`` rows (a ragged last block gets its own scale). Returns float64."""
    x = x.to(torch.float64)
    if block_rows is None:
        return _cast(x, x.abs().amax(dim=(-2, -1), keepdim=True))
    blocks = [x[..., i:i + block_rows, :] for i in range(0, x.shape[-2], block_rows)]
    return torch.cat([_cast(b, b.abs().amax(dim=(-2, -1), keepdim=True)) for b in blocks], dim=-2)


def _cast(x: torch.Tensor, amax: torch.Tensor) -> torch.Tensor:
    scale = torch.where(amax > 0, amax / E4M3_MAX, torch.ones_like(amax))
    return (x / scale).to(torch.float8_e4m3fn).to(torch.float64) * scale


def random_hadamard(d: int, seed: int = 0) -> torch.Tensor:
    """An orthogonal (d, d) float64 matrix ``H diag(s) / sqrt(d)``: H the Sylvester Hadamard matrix
    (entries +-1), s random signs. ``d`` must be a power of two."""
    if d < 1 or d & (d - 1):
        raise ValueError(f"d must be a power of two, got {d}")
    h = torch.ones(1, 1, dtype=torch.float64)
    while h.shape[0] < d:
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)], 0)
    g = torch.Generator().manual_seed(seed)
    signs = torch.randint(0, 2, (d,), generator=g).to(torch.float64) * 2 - 1
    return h * signs / math.sqrt(d)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """softmax(q k^T / sqrt(d)) v in float64 (the reference and the emulation's arithmetic)."""
    s = q.to(torch.float64) @ k.to(torch.float64).transpose(-2, -1) / math.sqrt(q.shape[-1])
    return torch.softmax(s, dim=-1) @ v.to(torch.float64)


def fp8_attention(q, k, v, block_rows: int | None = None, rotate: bool = False, seed: int = 0) -> torch.Tensor:
    """Attention with Q, K, V cast to e4m3 (:func:`cast_e4m3`, per tensor or per ``block_rows``),
    Q and K first rotated by one :func:`random_hadamard` when ``rotate`` (the scores are unchanged
    by it in exact arithmetic)."""
    if rotate:
        m = random_hadamard(q.shape[-1], seed)
        q, k = q.to(torch.float64) @ m, k.to(torch.float64) @ m
    return attention(cast_e4m3(q, block_rows), cast_e4m3(k, block_rows), cast_e4m3(v, block_rows))


def rmse(a: torch.Tensor, b: torch.Tensor) -> float:
    """Root mean squared difference of two tensors (in their units)."""
    return float(((a.to(torch.float64) - b.to(torch.float64)) ** 2).mean().sqrt())


def compare(q, k, v, block_rows: int = 64) -> dict[str, float]:
    """RMSE of the attention output against float64 for each way of computing it: float16 and
    bfloat16 inputs, FP8 per tensor, per block of ``block_rows`` rows, and each with the rotation."""
    ref = attention(q, k, v)
    rows = {f"{name} inputs": rmse(attention(*(t.to(dtype) for t in (q, k, v))), ref)
            for name, dtype in (("float16", torch.float16), ("bfloat16", torch.bfloat16))}
    for label, block, rotate in (("FP8, one scale per tensor", None, False),
                                 (f"FP8, one scale per {block_rows} rows", block_rows, False),
                                 ("FP8, per tensor, Q and K rotated", None, True),
                                 (f"FP8, per {block_rows} rows, Q and K rotated", block_rows, True)):
        rows[label] = rmse(fp8_attention(q, k, v, block, rotate), ref)
    return rows
