"""A predicted time for a kernel launch on a named GPU, from the SIMT engine's traffic model
(lessons 03 and 04): a roofline estimate with its parts shown.

    time = launch overhead + max(memory time, compute time)

- **memory time** = bytes moved between DRAM and the SMs / the GPU's DRAM bandwidth (datasheet,
  ``data/device_specs.csv``). Two bounds: ``uncached_bytes`` = 32 bytes x every sector of every
  warp-level global access (an atomic moves its sectors twice: read and write), as if no cache ever
  served a sector twice; ``cached_bytes`` = every distinct sector once, as if L1/L2 caught all reuse.
  The estimate takes ``cached_bytes`` when that footprint fits in the GPU's L2 cache
  (``data/gpu_sm_limits.csv``, from NVIDIA's whitepapers) and ``uncached_bytes`` otherwise. The truth
  lies in between: L1 and L2 serve part of the repeated and wasted sectors of large launches too
  (CUDA C++ Best Practices Guide, "Coalesced Access to Global Memory" and "L2 Cache"), so large
  uncoalesced kernels are predicted somewhat slower than they run; both bounds are shown.
- **compute time** = floating-point operations (every ``+ - * / **`` on floats, per active lane) /
  the peak of their precision (fp32 or fp64, datasheet). No tensor cores, no FMA pairing.
- **both rates are scaled** by the fraction of SMs that have a block: a launch of 4 blocks uses
  4 SMs of an H100's 132 (``data/gpu_sm_limits.csv``).
- **launch overhead**: the cited cost of launching a kernel (``data/latency_numbers.csv``, 10 µs).

Units: seconds, bytes, FLOPs, bytes per second.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..hardware import device_specs, latency_numbers
from .occupancy import Occupancy, limits_for, occupancy
from .traffic import SECTOR

GPUS = ("NVIDIA H100 SXM5", "NVIDIA A100 SXM4 80GB", "NVIDIA GeForce RTX 4090")
"""The GPUs the lessons name: a data-centre GPU of each of the last two generations and a consumer card."""


def launch_overhead() -> float:
    """Seconds to launch a kernel (data/latency_numbers.csv, 'Launch a CUDA kernel')."""
    return next(r["seconds"] for r in latency_numbers() if r["action"] == "Launch a CUDA kernel")


def gpu_spec(gpu: str) -> dict:
    """The ``data/device_specs.csv`` row of the GPU named ``gpu`` (exact name or model number)."""
    rows = [r for r in device_specs() if r["kind"] == "GPU"]
    for row in rows:
        if row["device"] == gpu:
            return row
    words = set(gpu.replace("-", " ").split())
    for row in rows:
        model = next((w for w in row["device"].split() if any(c.isdigit() for c in w)), None)
        if model in words:
            return row
    raise KeyError(f"no datasheet row for {gpu!r} in data/device_specs.csv")


@dataclass(frozen=True)
class Prediction:
    """The estimate and its parts (seconds, bytes, FLOPs) for one launch on one GPU."""

    gpu: str
    seconds: float
    bound: str
    launch_s: float
    memory_s: float
    compute_s: float
    moved_bytes: int
    cached_bytes: int
    uncached_bytes: int
    l2_bytes: int
    useful_bytes: int
    flops32: int
    flops64: int
    bandwidth: float
    sm_fraction: float
    occupancy: Occupancy

    def _seconds(self, moved: int) -> float:
        return self.launch_s + max(moved / (self.bandwidth * self.sm_fraction), self.compute_s)

    @property
    def cached_seconds(self) -> float:
        """The estimate if caches caught every reuse (the low end of the range)."""
        return self._seconds(self.cached_bytes)

    @property
    def uncached_seconds(self) -> float:
        """The estimate if no cache served any sector twice (the high end of the range)."""
        return self._seconds(self.uncached_bytes)

    def parts(self) -> dict:
        return {"launch overhead (s)": self.launch_s, "memory (s)": self.memory_s, "compute (s)": self.compute_s,
                "bytes moved": self.moved_bytes, "bytes if cached": self.cached_bytes,
                "bytes if not cached": self.uncached_bytes, "L2 cache (bytes)": self.l2_bytes,
                "bytes used": self.useful_bytes, "fp32 FLOPs": self.flops32, "fp64 FLOPs": self.flops64}

    def sentence(self) -> str:
        which = ("the working set fits in L2: each sector once" if self.moved_bytes == self.cached_bytes
                 and self.cached_bytes <= self.l2_bytes else "the working set exceeds L2: every sector of every warp")
        return (f"on an {self.gpu} this kernel would take about {_fmt(self.seconds)}, bound by {self.bound} "
                f"(launch {_fmt(self.launch_s)}; memory {_fmt(self.memory_s)} = {self.moved_bytes:,} bytes / "
                f"{self.bandwidth / 1e9:.0f} GB/s x {self.sm_fraction:.0%} of the SMs ({which}; warps request "
                f"{self.uncached_bytes:,} bytes in sectors, {self.useful_bytes:,} of them used); compute "
                f"{_fmt(self.compute_s)} for {self.flops32 + self.flops64:,} FLOPs; "
                f"between {_fmt(self.cached_seconds)} if caches caught every reuse "
                f"and {_fmt(self.uncached_seconds)} if none did)")


def _fmt(seconds: float) -> str:
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3g} ms"
    if seconds >= 1e-6:
        return f"{seconds * 1e6:.3g} µs"
    return f"{seconds * 1e9:.3g} ns"


def predict(result, gpu: str, registers_per_thread: int | None = None, scale: float = 1.0) -> Prediction:
    """The roofline estimate for a :class:`course_lib.simt.Result` (run with ``traffic=True``) on the GPU
    named ``gpu`` (see :data:`GPUS`).

    ``scale``: predict a launch ``scale`` times larger than the one simulated, with the same blocks
    doing the same work (blocks, bytes and FLOPs multiplied by ``scale``): simulate a 64 x 64 slice
    of a transpose, predict the 4096 x 4096 one with ``scale=4096 ** 2 / 64 ** 2``. Valid when every
    block does the same work, as in the lessons' kernels."""
    traffic = result.traffic
    if traffic is None:
        raise ValueError("predict needs the traffic model: run the kernel with traffic=True")
    spec, limits = gpu_spec(gpu), limits_for(gpu)
    occ = occupancy(gpu, result.threads_per_block, result.shared_bytes, registers_per_thread)
    if scale < 1:
        raise ValueError("scale must be at least 1 (a launch larger than the one simulated)")
    fraction = min(1.0, result.blocks * scale / limits["sms"])
    bandwidth = spec["bandwidth_gbs"] * 1e9
    uncached = round(traffic.sectors * SECTOR * scale)
    cached = round(traffic.distinct_sectors * SECTOR * scale)
    l2 = round(limits["l2_mb"] * 2**20)
    moved = cached if cached <= l2 else uncached
    memory = moved / (bandwidth * fraction)
    f32, f64 = round(traffic.flops.get(4, 0) * scale), round(traffic.flops.get(8, 0) * scale)
    compute = (f32 / (spec["fp32_tflops"] * 1e12) + f64 / (spec["fp64_tflops"] * 1e12)) / fraction
    launch = launch_overhead()
    parts = {"launch overhead": launch, "memory bandwidth": memory, "compute": compute}
    bound = max(parts, key=parts.get)
    useful = round(sum(s.ideal_sectors for s in traffic.global_sites()) * SECTOR * scale)
    return Prediction(spec["device"], launch + max(memory, compute), bound, launch, memory, compute, moved,
                      cached, uncached, l2, useful, f32, f64, bandwidth, fraction, occ)
