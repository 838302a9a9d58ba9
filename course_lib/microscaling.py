"""Block scaling: MX formats (MXFP8, MXFP6, MXFP4) and NVFP4, against one scale per tensor (lesson 12).

An fp4 value has 15 distinct values from -6 to 6; to hold real data it needs a scale. One scale
for a whole tensor lets one outlier push every other value into the zero bucket; a scale per
small block of neighbours keeps each block's values on the grid. Two recipes, both computed
here bit for bit on float32 data:

- **MX** (OCP Microscaling Formats (MX) Specification v1.0, 2023, section 6.3): blocks of 32
  values along the last dimension share one e8m0 scale ``X = 2^shared_exp`` with
  ``shared_exp = floor(log2(amax)) - emax_elem`` (``amax`` the block's largest magnitude,
  ``emax_elem`` the element format's largest exponent: 2 for fp4 e2m1, 8 for fp8 e4m3); every
  element is ``V / X`` rounded to the element format, values past its largest clamped to it. A
  block holding NaN or infinity gets the NaN scale (0xFF).
- **NVFP4** (NVIDIA, *Pretraining Large Language Models with NVFP4*, arXiv:2509.25149, 2025,
  appendix; Blackwell's fp4 tensor cores): blocks of 16 fp4 e2m1 values share an fp8 e4m3 scale,
  and the tensor one fp32 scale, ``amax_tensor / (6 * 448)``, which brings every block scale
  ``amax_block / 6`` into e4m3's range.

Element codes are kept one per int64 here (hardware packs two fp4 codes per byte); the byte
counts below are what the packed formats store.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import formats

MX_BLOCK = 32
NVFP4_BLOCK = 16


def emax(element: str) -> int:
    """The exponent of an element format's largest power of two (e2m1: 2, e4m3: 8, e5m2: 15)."""
    return int(np.floor(np.log2(formats.describe(element)["max"])))


def _blocks(x, block: int) -> np.ndarray:
    """``x`` as float32 with its last dimension split into blocks: shape (..., n // block, block)."""
    x = np.asarray(x, dtype=np.float32)
    if x.ndim == 0 or x.shape[-1] % block:
        raise ValueError(f"the last dimension ({x.shape[-1:]}) must be a multiple of the block, {block}")
    return x.reshape(*x.shape[:-1], x.shape[-1] // block, block)


# ----------------------------------------------------------------- MX
@dataclass
class MXTensor:
    """An MX tensor: e8m0 scale codes (one per block) and element codes (one per value)."""

    scales: np.ndarray      # uint8-valued int64, shape (..., n // block)
    codes: np.ndarray       # element codes, int64, shape (..., n)
    element: str
    block: int = MX_BLOCK

    def dequantize(self) -> np.ndarray:
        """The values the tensor stands for (float64): element value x 2^(scale - 127)."""
        values = formats.decode(self.codes, self.element)
        scale = formats.decode(self.scales, "e8m0")
        shaped = values.reshape(*self.scales.shape, self.block) * scale[..., None]
        return shaped.reshape(self.codes.shape)


def shared_exponent(amax, element: str) -> np.ndarray:
    """The spec's shared exponent ``floor(log2(amax)) - emax_elem`` (int64), kept within e8m0's
    -127..127; an all-zero block (amax 0) gets -127. ``floor(log2)`` is read exactly with frexp."""
    amax = np.asarray(amax, dtype=np.float64)
    _, exponent = np.frexp(amax)                 # amax = m * 2^exponent with m in [0.5, 1)
    shared = exponent.astype(np.int64) - 1 - emax(element)
    return np.clip(np.where(amax > 0, shared, -127), -127, 127)


def mx_quantize(x, element: str = "e2m1", block: int = MX_BLOCK) -> MXTensor:
    """``x`` (float32, last dimension a multiple of ``block``) as an MX tensor: MXFP4 for
    ``"e2m1"``, MXFP6 for ``"e2m3"``/``"e3m2"``, MXFP8 for ``"e4m3"``/``"e5m2"``."""
    blocks = _blocks(x, block)
    bad = ~np.isfinite(blocks).all(axis=-1)
    amax = np.abs(np.where(np.isfinite(blocks), blocks, 0)).max(axis=-1)
    shared = shared_exponent(amax, element)
    scaled = np.ldexp(np.where(bad[..., None], 0, blocks), -shared[..., None]).astype(np.float32)
    codes = formats.encode(scaled, element, saturate=True)
    scales = np.where(bad, formats.get("e8m0").nan, shared + 127)
    return MXTensor(scales.astype(np.int64), codes.reshape(np.shape(x)), element, block)


# ----------------------------------------------------------------- NVFP4
@dataclass
class NVFP4Tensor:
    """An NVFP4 tensor: one fp32 tensor scale, e4m3 codes of the block scales, e2m1 codes."""

    tensor_scale: float     # fp32 decode scale, amax / (6 * 448)
    scales: np.ndarray      # e4m3 codes, shape (..., n // 16)
    codes: np.ndarray       # e2m1 codes, shape (..., n)
    block: int = NVFP4_BLOCK

    def dequantize(self) -> np.ndarray:
        """Element value x block scale x tensor scale, float64."""
        values = formats.decode(self.codes, "e2m1").reshape(*self.scales.shape, self.block)
        scale = formats.decode(self.scales, "e4m3")[..., None] * self.tensor_scale
        return (values * scale).reshape(self.codes.shape)


def nvfp4_quantize(x, block: int = NVFP4_BLOCK) -> NVFP4Tensor:
    """``x`` (finite float32) as NVFP4: each block's scale ``amax_block / 6`` divided by the tensor
    scale and rounded to e4m3 (saturating), each element divided by its decoded block scale times
    the tensor scale (in float32) and rounded to e2m1."""
    blocks = _blocks(x, block)
    amax = float(np.abs(blocks).max()) if blocks.size else 0.0
    tensor_scale = np.float32(amax / (6 * 448)) if amax > 0 else np.float32(1.0)
    block_amax = np.abs(blocks).max(axis=-1)
    scales = formats.encode((block_amax / np.float32(6)) / tensor_scale, "e4m3", saturate=True)
    decoded = (formats.decode(scales, "e4m3") * tensor_scale).astype(np.float32)
    safe = np.where(decoded > 0, decoded, np.float32(1.0))[..., None]
    scaled = np.where(decoded[..., None] > 0, blocks / safe, 0).astype(np.float32)
    codes = formats.encode(scaled, "e2m1", saturate=True)
    return NVFP4Tensor(float(tensor_scale), scales, codes.reshape(np.shape(x)), block)


# ----------------------------------------------------------------- one scale per tensor
def per_tensor_round(x, element: str) -> np.ndarray:
    """``x`` rounded to ``element`` with one fp32 scale for the whole tensor, ``amax / max_elem``
    (the largest value lands on the format's largest), read back as float64."""
    x = np.asarray(x, dtype=np.float32)
    amax = float(np.abs(x).max()) if x.size else 0.0
    scale = np.float32(amax / formats.describe(element)["max"]) if amax > 0 else np.float32(1.0)
    return formats.round_to((x / scale).astype(np.float32), element, saturate=True) * float(scale)


# ----------------------------------------------------------------- comparing
METHODS = {
    # name: (bytes per value for n values, rounding of a float32 array)
    "bf16": (lambda n: 2.0, lambda x: formats.round_to(x, "bf16")),
    "fp8 e4m3, one scale": (lambda n: 1 + 4 / n, lambda x: per_tensor_round(x, "e4m3")),
    "MXFP8 e4m3": (lambda n: 1 + 1 / MX_BLOCK, lambda x: mx_quantize(x, "e4m3").dequantize()),
    "MXFP6 e2m3": (lambda n: 0.75 + 1 / MX_BLOCK, lambda x: mx_quantize(x, "e2m3").dequantize()),
    "fp4 e2m1, one scale": (lambda n: 0.5 + 4 / n, lambda x: per_tensor_round(x, "e2m1")),
    "MXFP4": (lambda n: 0.5 + 1 / MX_BLOCK, lambda x: mx_quantize(x, "e2m1").dequantize()),
    "NVFP4": (lambda n: 0.5 + 1 / NVFP4_BLOCK + 4 / n, lambda x: nvfp4_quantize(x).dequantize()),
}
"""Each recipe's storage (bytes per value, scales included) and its round trip."""


def relative_error(approx, exact) -> float:
    """``||approx - exact|| / ||exact||`` in float64."""
    exact = np.asarray(exact, dtype=np.float64)
    return float(np.linalg.norm(np.asarray(approx, dtype=np.float64) - exact) / np.linalg.norm(exact))


def with_outliers(n: int = 4096, every: int = 512, size: float = 100.0, seed: int = 0):
    """Standard-normal float32 values with one value ``size`` times larger every ``every`` values
    (activations of large language models have such outlier features: Dettmers et al., LLM.int8(),
    2022). Returns ``(x, ordinary)``, ``ordinary`` the mask of the values left as they were."""
    x = np.random.default_rng(seed).standard_normal(n).astype(np.float32)
    ordinary = np.ones(n, bool)
    ordinary[::every] = False
    x[~ordinary] *= np.float32(size)
    return x, ordinary


def error_vs_bytes(x, methods=tuple(METHODS), ordinary=None) -> list[dict]:
    """Per recipe: ``method``, ``bytes_per_value`` and ``relative_error`` of ``x``'s round trip,
    measured on the values where the boolean mask ``ordinary`` is true (all values by default):
    an outlier's own error is small beside its size, and would hide what it costs the others."""
    x = np.asarray(x, dtype=np.float32)
    keep = np.ones(x.shape, bool) if ordinary is None else np.asarray(ordinary, bool)
    return [{"method": m, "bytes_per_value": METHODS[m][0](x.size),
             "relative_error": relative_error(METHODS[m][1](x)[keep], x[keep])} for m in methods]


def plot_error_vs_bytes(rows_by_input: dict, ax=None):
    """Relative error (log) against bytes per value, one marker per recipe, one colour per input."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(6.5, 3.0))
    markers = dict(zip(METHODS, "osD^vpX"))
    for colour, (label, rows) in zip(("C0", "C3", "C2"), rows_by_input.items()):
        for r in rows:
            ax.scatter(r["bytes_per_value"], r["relative_error"], marker=markers[r["method"]], color=colour,
                       label=r["method"] if colour == "C0" else None)
        ax.plot([], [], color=colour, label=label)
    ax.set_yscale("log")
    ax.set_xlabel("bytes per value (block scales included)")
    ax.set_ylabel("relative error of the round trip")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7, ncol=2)
    return ax
