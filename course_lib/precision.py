"""Low-precision number formats and what they cost in accuracy (lesson 12).

Accelerators get much of their speed from narrow numbers: a 16-bit multiplier is
about a quarter of the silicon of a 32-bit one, and half the bytes move through
memory. This module measures the price: the error of a matrix product computed in
float16, bfloat16 and int8 against the same product in float64, and shows the two
ways a format fails, overflow (too large becomes ``inf``) and underflow (too small
becomes 0).

Formats are named by their torch dtype names: ``"float64"``, ``"float32"``,
``"bfloat16"``, ``"float16"`` and ``"int8"``.
"""
from __future__ import annotations

import csv
import math
from pathlib import Path

import matplotlib.pyplot as plt
import torch

from .timing import Timing, benchmark

RATES_CSV = Path(__file__).resolve().parents[1] / "data" / "low_precision_rates.csv"

FLOAT_FORMATS = ("float64", "float32", "bfloat16", "float16")
FORMATS = FLOAT_FORMATS + ("int8",)


def dtype_of(name: str) -> torch.dtype:
    """The torch dtype called ``name`` (``"bfloat16"`` -> ``torch.bfloat16``)."""
    if name not in FORMATS:
        raise ValueError(f"unknown format {name!r}; known: {FORMATS}")
    return getattr(torch, name)


def format_info(name: str) -> dict:
    """Bits and range of one format, read from ``torch.finfo`` / ``torch.iinfo``.

    Keys: ``format``, ``bits``, ``exponent_bits``, ``mantissa_bits`` (stored fraction
    bits), ``max`` (largest finite value), ``smallest_normal``, ``smallest_subnormal``,
    ``eps`` (gap between 1 and the next representable number), ``decimal_digits``.
    For int8 the range is the integers -128..127 (eps 1, no exponent).
    """
    dtype = dtype_of(name)
    if not dtype.is_floating_point:
        info = torch.iinfo(dtype)
        return {"format": name, "bits": info.bits, "exponent_bits": 0, "mantissa_bits": info.bits - 1,
                "max": float(info.max), "smallest_normal": 1.0, "smallest_subnormal": 1.0,
                "eps": 1.0, "decimal_digits": math.log10(info.max)}
    info = torch.finfo(dtype)
    mantissa = int(round(-math.log2(info.eps)))
    return {
        "format": name,
        "bits": info.bits,
        "exponent_bits": info.bits - 1 - mantissa,
        "mantissa_bits": mantissa,
        "max": float(info.max),
        "smallest_normal": float(info.smallest_normal),
        "smallest_subnormal": float(info.smallest_normal) * float(info.eps),
        "eps": float(info.eps),
        "decimal_digits": -math.log10(info.eps),
    }


def format_table(names=FORMATS) -> list[dict]:
    """:func:`format_info` for several formats, one dict per row."""
    return [format_info(name) for name in names]


def fits(name: str, max_abs: float, min_abs: float) -> bool:
    """Can a float format hold magnitudes from ``min_abs`` to ``max_abs`` as normal numbers?"""
    info = format_info(name)
    return max_abs <= info["max"] and min_abs >= info["smallest_normal"]


# ----------------------------------------------------------------- error measures
def relative_error(approx, exact) -> float:
    """Frobenius-norm relative error ``||approx - exact|| / ||exact||`` (computed in float64)."""
    approx = torch.as_tensor(approx).double()
    exact = torch.as_tensor(exact).double()
    return float(torch.linalg.norm(approx - exact) / torch.linalg.norm(exact))


def max_abs_error(approx, exact) -> float:
    """Largest element-wise absolute difference (computed in float64)."""
    return float((torch.as_tensor(approx).double() - torch.as_tensor(exact).double()).abs().max())


# ----------------------------------------------------------------- int8 quantization
def quantize_int8(x: torch.Tensor) -> tuple[torch.Tensor, float]:
    """Symmetric per-tensor int8 quantization: ``x ≈ scale * q`` with ``q`` in [-127, 127].

    ``scale = max|x| / 127`` (1.0 for an all-zero tensor); ``q = round(x / scale)``.
    Returns ``(q as torch.int8, scale)``. -128 is left unused so that the range is
    symmetric and ``-q`` never overflows.
    """
    x = torch.as_tensor(x).double()
    peak = float(x.abs().max()) if x.numel() else 0.0
    scale = peak / 127.0 if peak > 0 else 1.0
    q = torch.clamp(torch.round(x / scale), -127, 127).to(torch.int8)
    return q, scale


def dequantize(q: torch.Tensor, scale: float) -> torch.Tensor:
    """Back from int8 codes to float32 values: ``scale * q``."""
    return q.to(torch.float32) * scale


def int8_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a @ b`` the way an int8 accelerator computes it, returned in float32.

    Both operands are quantized per tensor (:func:`quantize_int8`), the integer
    product is accumulated in **int32** (int8 x int8 products need 16 bits, sums of
    K of them up to 16 + log2(K) bits), then rescaled by ``scale_a * scale_b``.
    """
    qa, sa = quantize_int8(a)
    qb, sb = quantize_int8(b)
    acc = qa.to(torch.int32) @ qb.to(torch.int32)
    return acc.to(torch.float32) * (sa * sb)


def matmul_in(a: torch.Tensor, b: torch.Tensor, name: str) -> torch.Tensor:
    """``a @ b`` with both operands rounded to format ``name`` and multiplied in it.

    int8 goes through :func:`int8_matmul`. On a CPU, PyTorch's float16 and bfloat16
    matmuls accumulate in float32 internally, as GPU tensor cores do; the result is
    rounded back to the format.
    """
    if name == "int8":
        return int8_matmul(a, b)
    dtype = dtype_of(name)
    return a.to(dtype) @ b.to(dtype)


def matmul_error(a: torch.Tensor, b: torch.Tensor, name: str) -> dict:
    """Error of :func:`matmul_in` against float64: ``relative_error`` and ``max_abs_error``."""
    exact = a.double() @ b.double()
    approx = matmul_in(a, b, name)
    return {"format": name, "relative_error": relative_error(approx, exact),
            "max_abs_error": max_abs_error(approx, exact)}


def error_sweep(sizes=(16, 64, 256, 1024), names=("float32", "bfloat16", "float16", "int8"),
                seed: int = 0) -> list[dict]:
    """:func:`matmul_error` for square ``n x n`` standard-normal matrices, ``n`` in ``sizes``.

    One row per (size, format) with the keys of :func:`matmul_error` plus ``n``.
    """
    gen = torch.Generator().manual_seed(seed)
    rows = []
    for n in sizes:
        a = torch.randn(n, n, generator=gen, dtype=torch.float64)
        b = torch.randn(n, n, generator=gen, dtype=torch.float64)
        for name in names:
            rows.append({"n": n, **matmul_error(a, b, name)})
    return rows


def plot_error_sweep(rows: list[dict], ax=None):
    """Log-log plot of relative error against matrix size, one line per format."""
    if ax is None:
        _, ax = plt.subplots(figsize=(6.5, 3.5))
    for name in dict.fromkeys(r["format"] for r in rows):
        mine = [r for r in rows if r["format"] == name]
        ax.plot([r["n"] for r in mine], [r["relative_error"] for r in mine], "o-", label=name)
    sizes = sorted({r["n"] for r in rows})
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(sizes, [str(n) for n in sizes])
    ax.minorticks_off()
    ax.set_xlabel("matrix size n (n x n @ n x n)")
    ax.set_ylabel("relative error vs float64")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    return ax


# ----------------------------------------------------------------- failure modes
def round_to(value: float, name: str) -> float:
    """``value`` stored in format ``name`` and read back as a Python float."""
    return float(torch.tensor(value, dtype=torch.float64).to(dtype_of(name)).double())


def overflow_underflow_examples(names=("float32", "bfloat16", "float16")) -> list[dict]:
    """Values that break narrow formats, each stored in every format of ``names``.

    Rows: ``what`` (the value's story), ``value`` (exact), and one key per format with
    the value after rounding to it: 70000 overflows float16 to ``inf``; 1e-8 (a small
    gradient) underflows float16 to 0; 1 + 1/1000 loses its fraction in bfloat16.
    """
    cases = [
        ("70000: an activation larger than float16's max", 70000.0),
        ("300 * 300 = 90000: a product of two moderate values", 300.0 * 300.0),
        ("1e-8: a small gradient", 1e-8),
        ("1e-8 * 1024: the same gradient after loss scaling", 1e-8 * 1024),
        ("1.001: one plus a small update", 1.001),
    ]
    return [{"what": what, "value": value, **{n: round_to(value, n) for n in names}}
            for what, value in cases]


def running_sum(values, name: str) -> float:
    """Add ``values`` one at a time in format ``name``, as a naive accumulator would.

    Shows why hardware accumulates low-precision products in float32: adding 1 to a
    float16 sum stops changing it once the sum reaches 2048 (the gap between float16
    numbers there is 2).
    """
    dtype = dtype_of(name)
    total = torch.zeros((), dtype=dtype)
    for value in torch.as_tensor(values, dtype=torch.float64):
        total = total + value.to(dtype)
    return float(total)


def time_matmul_by_format(n: int = 512, names=("float32", "bfloat16", "float16"),
                          device=None) -> list[dict]:
    """Median seconds of an ``n x n`` matmul in each float format on ``device``.

    ``device`` defaults to CUDA when available, else CPU. Rows: ``format``, ``seconds``,
    ``flops_per_second`` (2 n^3 / seconds), ``timing`` (the :class:`Timing`). CPUs
    without native half-precision units often run float16 *slower* than float32;
    GPU tensor cores run it many times faster.
    """
    device = torch.device(device if device is not None else
                          ("cuda" if torch.cuda.is_available() else "cpu"))
    gen = torch.Generator().manual_seed(0)
    base_a = torch.randn(n, n, generator=gen)
    base_b = torch.randn(n, n, generator=gen)
    rows = []
    for name in names:
        a = base_a.to(device, dtype_of(name))
        b = base_b.to(device, dtype_of(name))
        timing: Timing = benchmark(lambda a=a, b=b: a @ b, label=f"{name} {n}x{n} matmul", device=device,
                                   repeat=5)
        rows.append({"format": name, "seconds": timing.median,
                     "flops_per_second": 2 * n**3 / timing.median, "timing": timing})
    return rows


# ----------------------------------------------------------------- cited tensor-core rates
def low_precision_rates(path: Path | str = RATES_CSV) -> list[dict]:
    """Vendor peak rates per device and format (``data/low_precision_rates.csv``): ``device``,
    ``vendor``, ``format`` (bf16, fp16, fp8, fp4), ``dense_tflops`` and ``sparse_tflops`` (floats,
    NaN where blank: with 2:4 structured sparsity), ``derivation`` (how the per-GPU dense figure
    follows from the vendor's), ``document`` and ``source_url``. Cited, never measured here."""
    with Path(path).open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    for row in rows:
        for key in ("dense_tflops", "sparse_tflops"):
            row[key] = float(row[key]) if row[key] else float("nan")
    return rows


def rates_table(path: Path | str = RATES_CSV) -> dict:
    """``{device: {format: dense TFLOP/s}}`` from :func:`low_precision_rates`, devices in file order."""
    table: dict = {}
    for row in low_precision_rates(path):
        table.setdefault(row["device"], {})[row["format"]] = row["dense_tflops"]
    return table
