"""A block-scaled (MXFP4) matrix multiply in Triton, and its bytes against bf16 (lesson 12).

An MXFP4 operand (OCP Microscaling Formats (MX) Specification v1.0, section 6.3, as
:mod:`course_lib.microscaling` computes it bit for bit) is stored as two arrays:

- **codes**: fp4 e2m1 codes (``S EE M``, values 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives),
  packed two per byte along K: byte ``j`` of a row holds element ``2j`` in its low four bits and
  element ``2j + 1`` in its high four bits (:func:`pack_fp4`); a row of K values is ``K / 2`` bytes;
- **scales**: one e8m0 code per block of 32 consecutive values of a row (``2^(code - 127)``),
  ``K / 32`` bytes per row.

So a value costs 0.5 + 1/32 bytes against bf16's 2. :func:`mxfp4_matmul_kernel` computes
``c = A @ W.T`` (``W`` stored ``(N, K)`` as ``nn.Linear`` keeps its weight, both operands
block-scaled along K, as block-scaled tensor cores take them): each program owns one
``BLOCK_M x BLOCK_N`` tile of ``c`` and walks K one MX block (32 values, 16 bytes) at a time; it
loads the packed bytes and the two blocks' scales, splits each byte into its two codes, decodes
them in registers (:func:`e2m1_value`), multiplies the even and the odd elements' tiles
(``tl.dot`` twice) and applies the scales to the float32 partial product. Nothing dequantised
reaches memory. :func:`bf16_matmul_kernel` is the same tiling on bf16 operands, for the bytes.

Both kernels are the lecture's: contiguous operands, ``M`` and ``N`` multiples of the blocks
(no masks), K a multiple of 32. :func:`counted` runs one in Triton's interpreter on CPU tensors
and counts its bytes (:func:`course_lib.triton_traffic.count`); :func:`matmul_bytes_loaded` is the
count predicted from the tiling. Importing this module calls
:func:`course_lib.triton_traffic.prepare` first (``TRITON_INTERPRET=1`` without a GPU); it needs
Triton (Linux wheels only). Units: bytes; sizes are elements (values), not bytes, unless a name
says bytes.
"""
from __future__ import annotations

import numpy as np

from . import microscaling
from .triton_traffic import prepare

prepare()   # before the decorators below run: the interpreter where no GPU can compile them

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from . import triton_traffic  # noqa: E402

MX_BLOCK = microscaling.MX_BLOCK        # values per e8m0 scale (32)
BYTES_PER_BLOCK = MX_BLOCK // 2         # packed bytes of one block of fp4 codes (16)


# ----------------------------------------------------------------- operands
def pack_fp4(codes) -> torch.Tensor:
    """fp4 codes (integers 0..15, last dimension even) packed two per byte, as uint8: byte ``j``
    of a row holds element ``2j`` in bits 0-3 and element ``2j + 1`` in bits 4-7."""
    codes = torch.as_tensor(np.asarray(codes), dtype=torch.int64)
    if codes.shape[-1] % 2 or bool(((codes < 0) | (codes > 15)).any()):
        raise ValueError("fp4 codes are integers 0..15 along an even last dimension")
    return (codes[..., 0::2] | (codes[..., 1::2] << 4)).to(torch.uint8)


def unpack_fp4(packed) -> torch.Tensor:
    """The fp4 codes (int64) of uint8 bytes packed by :func:`pack_fp4`: twice as many along the last dimension."""
    packed = torch.as_tensor(packed).to(torch.int64)
    return torch.stack([packed & 15, packed >> 4], dim=-1).flatten(-2)


def mxfp4_operand(x) -> tuple[torch.Tensor, torch.Tensor]:
    """``x`` (rows x K float32, K a multiple of 32) quantised to MXFP4 by the spec's rule
    (:func:`course_lib.microscaling.mx_quantize`): (packed codes, uint8 of shape (rows, K / 2);
    e8m0 scale codes, uint8 of shape (rows, K / 32))."""
    t = microscaling.mx_quantize(np.asarray(x, dtype=np.float32), "e2m1")
    return pack_fp4(t.codes), torch.as_tensor(t.scales).to(torch.uint8)


def dequantize(packed, scales) -> torch.Tensor:
    """The values an MXFP4 operand stands for, float64, shape (rows, K): each code's e2m1 value
    times its block's ``2^(scale - 127)``."""
    codes = unpack_fp4(packed).numpy()
    t = microscaling.MXTensor(torch.as_tensor(scales).to(torch.int64).numpy(), codes, "e2m1")
    return torch.from_numpy(t.dequantize())


def reference_matmul(a, a_scales, w, w_scales) -> torch.Tensor:
    """``dequantize(a) @ dequantize(w).T`` in float64: what the kernels must compute (M x N)."""
    return dequantize(a, a_scales) @ dequantize(w, w_scales).T


# ----------------------------------------------------------------- kernels
@triton.jit
def e2m1_value(code):
    """The value (float32) of fp4 e2m1 codes 0..15 (any integer type): sign bit 3, exponent bits
    1-2 (bias 1), mantissa bit 0; exponent 0 is subnormal (0 or 0.5)."""
    e = ((code >> 1) & 3).to(tl.float32)
    m = (code & 1).to(tl.float32)
    magnitude = tl.where(e == 0.0, 0.5 * m, (1.0 + 0.5 * m) * tl.exp2(e - 1.0))
    return tl.where((code & 8) != 0, -magnitude, magnitude)


@triton.jit
def mxfp4_matmul_kernel(a_ptr, a_scale_ptr, w_ptr, w_scale_ptr, c_ptr, M, N, K,
                        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """c (M x N float32) = dequant(a) @ dequant(w).T for contiguous MXFP4 operands: a's packed
    codes (M x K/2 uint8) and scales (M x K/32 uint8), w's (N x K/2, N x K/32). Program (i, j)
    owns the BLOCK_M x BLOCK_N tile of c; M, N multiples of the blocks, K of 32 (no masks)."""
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    rb = tl.arange(0, 16)                                      # the 16 bytes of one block of 32 codes
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for blk in range(0, K // 32):
        a = tl.load(a_ptr + rm[:, None] * (K // 2) + blk * 16 + rb[None, :])    # (BLOCK_M, 16) bytes
        w = tl.load(w_ptr + rn[None, :] * (K // 2) + blk * 16 + rb[:, None])    # (16, BLOCK_N) bytes: w.T
        even = tl.dot(e2m1_value(a & 15), e2m1_value(w & 15), input_precision="ieee")   # elements 2j
        odd = tl.dot(e2m1_value(a >> 4), e2m1_value(w >> 4), input_precision="ieee")    # elements 2j + 1
        sa = tl.exp2(tl.load(a_scale_ptr + rm * (K // 32) + blk).to(tl.float32) - 127.0)
        sw = tl.exp2(tl.load(w_scale_ptr + rn * (K // 32) + blk).to(tl.float32) - 127.0)
        acc += (even + odd) * sa[:, None] * sw[None, :]
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc)


@triton.jit
def bf16_matmul_kernel(a_ptr, w_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                       BLOCK_K: tl.constexpr):
    """c (M x N float32) = a @ w.T for contiguous bf16 a (M x K) and w (N x K), the same tiles
    as :func:`mxfp4_matmul_kernel`, K in steps of BLOCK_K; M, N, K multiples of the blocks."""
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :]).to(tl.float32)   # bf16 products are exact
        w = tl.load(w_ptr + rn[None, :] * K + (k + rk)[:, None]).to(tl.float32)   # in float32
        acc = tl.dot(a, w, acc, input_precision="ieee")
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc)


# ----------------------------------------------------------------- bytes
def matmul_bytes_loaded(M: int, N: int, K: int, block_m: int, block_n: int, fmt: str) -> float:
    """Bytes a tiled ``A @ W.T`` loads when each of its ``(M / block_m) x (N / block_n)`` programs
    reads its row panel of A and its row panel of W once: ``fmt`` "mxfp4" (0.5 bytes per value +
    1 scale byte per 32) or "bf16" (2 bytes per value)."""
    per_value = {"mxfp4": 0.5 + 1 / MX_BLOCK, "bf16": 2.0}[fmt]
    return per_value * K * ((N // block_n) * M + (M // block_m) * N)


def counted(fmt: str, a, w, block_m: int = 16, block_n: int = 16):
    """Run the lecture's kernel for ``fmt`` ("mxfp4" or "bf16") on float32 ``a`` (M x K) and
    ``w`` (N x K), quantised first (MXFP4 by the spec's rule, or rounded to bf16), in Triton's
    interpreter: (c float32 M x N, Traffic, the float64 reference it must equal)."""
    a, w = torch.as_tensor(a, dtype=torch.float32), torch.as_tensor(w, dtype=torch.float32)
    (M, K), N = a.shape, w.shape[0]
    c = torch.zeros(M, N)
    grid = (M // block_m, N // block_n)
    if fmt == "mxfp4":
        (qa, sa), (qw, sw) = mxfp4_operand(a), mxfp4_operand(w)
        traffic = triton_traffic.count(mxfp4_matmul_kernel, grid, qa, sa, qw, sw, c, M, N, K,
                                       outputs=(4,), BLOCK_M=block_m, BLOCK_N=block_n)
        return c, traffic, reference_matmul(qa, sa, qw, sw)
    if fmt == "bf16":
        ha, hw = a.to(torch.bfloat16), w.to(torch.bfloat16)
        traffic = triton_traffic.count(bf16_matmul_kernel, grid, ha, hw, c, M, N, K, outputs=(2,),
                                       BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=MX_BLOCK)
        return c, traffic, ha.double() @ hw.double().T
    raise ValueError(f"fmt is 'mxfp4' or 'bf16', got {fmt!r}")
