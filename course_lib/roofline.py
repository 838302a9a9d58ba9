"""The roofline model: how fast can a kernel run on this machine (lesson 01; lesson 12 recalls it)?

Two ceilings bound every kernel: the peak arithmetic rate (FLOP/s, measured with a
large matrix multiply) and the memory bandwidth (bytes/s, measured with a large
copy, counting bytes read plus bytes written). A kernel doing ``I`` FLOPs per byte
moved (its arithmetic intensity) can reach at most ``min(peak, I * bandwidth)``.
"""
from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import torch

from .devices import default_device
from .hardware import describe_device
from .timing import Timing, benchmark


def matmul_flops(n: int, m: int | None = None, k: int | None = None) -> int:
    """FLOPs of an (n x k) @ (k x m) matrix product: one multiply and one add per term."""
    m = n if m is None else m
    k = n if k is None else k
    return 2 * n * m * k


def measure_peak_flops(n: int = 2048, dtype=None, device=None, repeat: int = 5) -> tuple[float, Timing]:
    """Measured matmul rate in FLOP/s on ``device`` for n x n matrices, and the timing behind it."""
    device = default_device(device)
    dtype = dtype or torch.float32
    a = torch.randn(n, n, dtype=dtype, device=device)
    b = torch.randn(n, n, dtype=dtype, device=device)
    timing = benchmark(lambda: torch.mm(a, b), label=f"{n}x{n} matmul", device=device,
                       warmup=1, repeat=repeat)
    return matmul_flops(n) / timing.median, timing


def measure_bandwidth(nbytes: int = 256 * 2**20, device=None, repeat: int = 5) -> tuple[float, Timing]:
    """Measured copy bandwidth in bytes/s: each copy reads ``nbytes`` and writes ``nbytes``.

    Use a size far larger than the last-level cache, or the figure is the cache's bandwidth.
    """
    device = default_device(device)
    src = torch.ones(nbytes // 4, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    timing = benchmark(lambda: dst.copy_(src), label=f"copy {nbytes / 2**20:.0f} MiB",
                       device=device, warmup=1, repeat=repeat)
    return 2 * src.numel() * 4 / timing.median, timing


def theoretical_peak_flops(cores: int, clock_hz: float, simd_bits: int, dtype_bits: int = 32,
                           fma_units: int = 2) -> float:
    """Spec-sheet peak in FLOP/s: cores x clock x lanes x 2 (a fused multiply-add is 2 FLOPs)
    x FMA units per core. Lanes = simd_bits / dtype_bits."""
    return cores * clock_hz * (simd_bits // dtype_bits) * 2 * fma_units


def arithmetic_intensity(flops: float, bytes_moved: float) -> float:
    """FLOPs per byte moved to or from memory."""
    return flops / bytes_moved


def attainable_flops(intensity: float, peak_flops: float, bandwidth: float) -> float:
    """The roofline: min(peak, intensity x bandwidth), in FLOP/s."""
    return min(peak_flops, intensity * bandwidth)


def ridge_point(peak_flops: float, bandwidth: float) -> float:
    """Intensity (FLOP/byte) where the two ceilings meet: below it a kernel is memory-bound."""
    return peak_flops / bandwidth


@dataclass
class Roofline:
    """The two ceilings of one device: peak in FLOP/s, bandwidth in bytes/s."""
    device: str
    peak_flops: float
    bandwidth: float

    @property
    def ridge(self) -> float:
        return ridge_point(self.peak_flops, self.bandwidth)

    def attainable(self, intensity: float) -> float:
        return attainable_flops(intensity, self.peak_flops, self.bandwidth)

    def bound(self, intensity: float) -> str:
        """'memory-bound' or 'compute-bound' for a kernel of this intensity."""
        return "memory-bound" if intensity < self.ridge else "compute-bound"


def measure(device=None, n: int = 2048, nbytes: int = 256 * 2**20) -> Roofline:
    """Measure both ceilings of ``device`` (default: the CUDA GPU if any, else the CPU)."""
    dev = default_device(device)
    peak, _ = measure_peak_flops(n, device=dev)
    bw, _ = measure_bandwidth(nbytes, device=dev)
    return Roofline(describe_device(dev), peak, bw)


def plot(roofs: list[Roofline], kernels: dict[str, float] | None = None, ax=None):
    """Log-log roofline of one or more devices, with kernels marked at their intensity.

    ``kernels`` maps a name to an arithmetic intensity (FLOP/byte). Returns the axes.
    """
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4.5))
    lo = min([0.01] + list((kernels or {}).values()))
    hi = max([1000.0] + [4 * r.ridge for r in roofs])
    x = np.logspace(np.log10(lo), np.log10(hi), 200)
    for roof in roofs:
        y = np.minimum(roof.peak_flops, x * roof.bandwidth)
        line, = ax.plot(x, y, lw=2, label=f"{roof.device}: {roof.peak_flops / 1e9:.0f} GFLOP/s, "
                                          f"{roof.bandwidth / 1e9:.0f} GB/s")
        ax.axvline(roof.ridge, color=line.get_color(), ls=":", lw=1)
    for name, intensity in (kernels or {}).items():
        ax.axvline(intensity, color="grey", ls="--", lw=1)
        ax.annotate(name, (intensity, ax.get_ylim()[0] if ax.get_ylim()[0] > 0 else 1e8),
                    rotation=90, va="bottom", ha="right", fontsize=9, color="grey")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP per byte)")
    ax.set_ylabel("attainable FLOP/s")
    ax.set_title("Roofline")
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(True, which="both", alpha=0.3)
    return ax
