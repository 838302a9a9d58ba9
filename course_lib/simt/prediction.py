"""A predicted time for a kernel launch on a named GPU, from the SIMT engine's traffic model
(lessons 03 and 04): the time of each pipe a launch goes through, and the slowest of them.

    kernel time = max(DRAM, L2, L1, shared memory, compute)      (the launch cost is reported apart)

Each pipe's time is what the launch asks of it over the rate at which the GPU serves it; the pipes
work at the same time, so the slowest one (the ``bound``) sets the kernel's time. A kernel near
two limits is slower than this maximum: the model is a lower bound of the same kind as a roofline.

- **DRAM**: bytes between DRAM and L2 / the GPU's DRAM bandwidth: a recorded copy on that GPU where
  the course has one (``data/gpu_recorded.csv``, named in ``data/gpu_pipes.csv``), else the
  datasheet's (``data/device_specs.csv``). Two bounds on the bytes: ``uncached_bytes`` = 32 bytes x
  every sector of every warp-level global access (an atomic moves its sectors twice: read and
  write), as if L2 never served a sector twice; ``cached_bytes`` = every distinct sector once. The
  estimate takes ``cached_bytes`` when that footprint fits in the GPU's L2 (``data/gpu_sm_limits.csv``)
  and ``uncached_bytes`` otherwise. With ``repeated=True`` (a benchmark loop running the launch again
  and again on the same arrays) a footprint that fits in L2 stays there and DRAM moves nothing.
- **L2**: every sector of every warp-level global access crosses between the SMs and L2 (no L1 hit
  is modelled): 32 bytes x sectors / the L2 bandwidth (``data/gpu_pipes.csv``, measured). A
  stride-32 float32 warp access moves 32 sectors for 128 useful bytes here, as on the GPU.
- **L1**: the L1 of an SM handles one 128-byte line of a warp access at a time (up to 4 sectors):
  a coalesced float32 warp access is 1 line, a stride-32 one 32 lines. Time = 128 bytes x lines /
  the L1 bandwidth of all SMs (``data/gpu_pipes.csv``, measured with coalesced loads).
- **shared memory**: each warp-level shared access takes as many passes (wavefronts) as its bank
  conflict degree (:mod:`course_lib.simt.traffic`); an SM serves one pass of 32 banks x 4 bytes per
  clock (CUDA C++ Programming Guide, "Shared Memory", compute capability 5.x and later). Time =
  passes / (SMs x clock).
- **compute**: floating-point operations (every ``+ - * / **`` on floats, per active lane) / the
  peak of their precision (fp32 or fp64, datasheet). No tensor cores, no FMA pairing.
- every rate is scaled by the fraction of SMs that have a block: a launch of 4 blocks uses 4 SMs of
  an H100's 132 (``data/gpu_sm_limits.csv``).
- **launch cost**: the cited cost of launching a kernel (``data/latency_numbers.csv``, 10 µs) is not
  part of the kernel's time; it is reported beside it (``launch_s``, ``with_launch_s``).

Left out: latency. A pipe's rate is reached only with enough memory requests in flight (Little's
law: bytes in flight = bandwidth x latency); a kernel whose warps each have one load outstanding
and then wait at a barrier, or that spends its time in a tree of barriers (the lesson's
reductions), runs well below every rate here. Also left out: instruction issue (statements are not
SASS instructions), TLB misses of very large strides, and what a partial-sector write costs beyond
its sector.

Units: seconds, bytes, FLOPs, bytes per second.
"""
from __future__ import annotations

import csv
import functools
from dataclasses import dataclass

from ..hardware import DATA_DIR, device_specs, latency_numbers
from ..recorded import figure
from .occupancy import Occupancy, limits_for, occupancy
from .races import ATOMIC
from .traffic import BANK_WORD, BANKS, LINE, SECTOR

GPUS = ("NVIDIA H100 SXM5", "NVIDIA A100 SXM4 80GB", "NVIDIA GeForce RTX 4090")
"""The GPUs the lessons name: a data-centre GPU of each of the last two generations and a consumer card."""

PIPES = ("DRAM", "L2", "L1", "shared memory", "compute")
"""The pipes a launch is timed on, in the order the report lists them."""


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


@functools.cache
def _pipe_rows() -> dict:
    with (DATA_DIR / "gpu_pipes.csv").open(newline="") as fh:
        return {row["device"]: row for row in csv.DictReader(fh)}


def pipe_rates(gpu: str) -> dict:
    """Bytes per second of each pipe of the GPU named ``gpu`` (a ``GPUS`` name or its model number),
    with where each figure comes from: ``dram`` (a recorded copy where the course has one, else the
    datasheet), ``l2``, ``l1`` (all SMs together), ``shared`` (all SMs: 32 banks x 4 bytes per clock
    each), ``clock_hz``, ``sms`` and ``dram_source`` ("recorded copy ..." or "datasheet")."""
    spec, limits = gpu_spec(gpu), limits_for(gpu)
    row = _pipe_rows().get(spec["device"])
    if row is None:
        raise KeyError(f"no pipe rates for {spec['device']!r} in data/gpu_pipes.csv; known: "
                       + ", ".join(_pipe_rows()))
    clock, sms = spec["clock_ghz"] * 1e9, int(limits["sms"])
    dram, dram_source = spec["bandwidth_gbs"] * 1e9, "datasheet"
    if row["copy_figure"]:
        copied = figure(row["copy_figure"])
        dram, dram_source = copied.value * 1e9, f"recorded copy on an {copied.device}"
    return {"dram": dram, "dram_source": dram_source, "l2": float(row["l2_bandwidth_gbs"]) * 1e9,
            "l1": float(row["l1_bandwidth_gbs"]) * 1e9,
            "shared": float(row["shared_bytes_per_clock_per_sm"]) * clock * sms,
            "clock_hz": clock, "sms": sms, "source": row["source"]}


def published(device: str | None = None) -> list[dict]:
    """Published GPU measurements of the lesson's transposes and reductions
    (``data/transpose_published.csv``: device, kernel as published, the lesson's kernel it is,
    threads per block, elements per thread, size, ``bandwidth_gbs`` as a float, whether the model has
    rates for that GPU, source with its address, and the quoted line), of ``device`` if given."""
    with (DATA_DIR / "transpose_published.csv").open(newline="") as fh:
        rows = [dict(row, bandwidth_gbs=float(row["bandwidth_gbs"])) for row in csv.DictReader(fh)]
    return [r for r in rows if device is None or r["device"] == device]


@dataclass(frozen=True)
class Prediction:
    """The estimate and its parts (seconds, bytes, FLOPs, passes) for one launch on one GPU.
    ``seconds`` is the kernel's own time, the slowest pipe of ``pipes``; ``launch_s`` is the cost of
    launching it, reported apart (``with_launch_s`` adds them)."""

    gpu: str
    seconds: float
    bound: str
    pipes: dict
    launch_s: float
    memory_s: float
    compute_s: float
    moved_bytes: int
    cached_bytes: int
    uncached_bytes: int
    l2_bytes: int
    useful_bytes: int
    l2_traffic_bytes: int
    l1_lines: int
    shared_passes: int
    flops32: int
    flops64: int
    bandwidth: float
    bandwidth_source: str
    sm_fraction: float
    repeated: bool
    occupancy: Occupancy

    @property
    def with_launch_s(self) -> float:
        """The kernel's time plus the cost of launching it (seconds)."""
        return self.seconds + self.launch_s

    def _seconds(self, moved: int) -> float:
        others = [s for name, s in self.pipes.items() if name != "DRAM"]
        return max([moved / (self.bandwidth * self.sm_fraction), *others])

    @property
    def cached_seconds(self) -> float:
        """The kernel's time if L2 caught every reuse (each distinct sector once through DRAM)."""
        return self._seconds(self.cached_bytes)

    @property
    def uncached_seconds(self) -> float:
        """The kernel's time if L2 served no sector twice (every sector through DRAM)."""
        return self._seconds(self.uncached_bytes)

    def parts(self) -> dict:
        return {**{f"{name} (s)": s for name, s in self.pipes.items()}, "launch, apart (s)": self.launch_s,
                "DRAM bytes": self.moved_bytes, "DRAM bytes if cached": self.cached_bytes,
                "DRAM bytes if not cached": self.uncached_bytes, "L2 cache (bytes)": self.l2_bytes,
                "L2 traffic (bytes)": self.l2_traffic_bytes, "L1 lines": self.l1_lines,
                "shared-memory passes": self.shared_passes, "bytes used": self.useful_bytes,
                "fp32 FLOPs": self.flops32, "fp64 FLOPs": self.flops64}

    def sentence(self) -> str:
        if self.repeated and self.moved_bytes == 0:
            which = "the working set stays in L2 across repeated launches: no DRAM traffic"
        elif self.moved_bytes == self.cached_bytes and self.cached_bytes <= self.l2_bytes:
            which = "the working set fits in L2: each sector once"
        else:
            which = "the working set exceeds L2: every sector of every warp"
        pipes = "; ".join(f"{name} {_fmt(s)}" for name, s in self.pipes.items())
        return (f"on an {self.gpu} this kernel would take about {_fmt(self.seconds)}, bound by {self.bound} "
                f"(pipes: {pipes}; DRAM {self.moved_bytes:,} bytes at {self.bandwidth / 1e9:.0f} GB/s, "
                f"{self.bandwidth_source}, {which}; L2 {self.l2_traffic_bytes:,} bytes in sectors, "
                f"{self.useful_bytes:,} of them used; L1 {self.l1_lines:,} lines; shared memory "
                f"{self.shared_passes:,} passes; {self.sm_fraction:.0%} of the SMs), plus {_fmt(self.launch_s)} "
                f"to launch it")


def _fmt(seconds: float) -> str:
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3g} ms"
    if seconds >= 1e-6:
        return f"{seconds * 1e6:.3g} µs"
    return f"{seconds * 1e9:.3g} ns"


def predict(result, gpu: str, registers_per_thread: int | None = None, scale: float = 1.0,
            repeated: bool = False) -> Prediction:
    """The time of a :class:`course_lib.simt.Result` (run with ``traffic=True``) on the GPU named
    ``gpu`` (see :data:`GPUS`), pipe by pipe.

    ``scale``: predict a launch ``scale`` times larger than the one simulated, with the same blocks
    doing the same work (blocks, bytes, passes and FLOPs multiplied by ``scale``): simulate a 64 x 64
    slice of a transpose, predict the 4096 x 4096 one with ``scale=4096 ** 2 / 64 ** 2``. Valid when
    every block does the same work, as in the lessons' kernels. ``repeated``: the launch runs again
    and again on the same arrays, as a benchmark loop times it (a working set that fits in L2 then
    moves nothing through DRAM)."""
    traffic = result.traffic
    if traffic is None:
        raise ValueError("predict needs the traffic model: run the kernel with traffic=True")
    if scale < 1:
        raise ValueError("scale must be at least 1 (a launch larger than the one simulated)")
    spec, limits, rates = gpu_spec(gpu), limits_for(gpu), pipe_rates(gpu)
    occ = occupancy(gpu, result.threads_per_block, result.shared_bytes, registers_per_thread)
    fraction = min(1.0, result.blocks * scale / limits["sms"])
    uncached = round(traffic.sectors * SECTOR * scale)
    cached = round(traffic.distinct_sectors * SECTOR * scale)
    l2 = round(limits["l2_mb"] * 2**20)
    fits = cached <= l2
    moved = 0 if repeated and fits else cached if fits else uncached
    sites = traffic.global_sites()
    lines = round(sum(s.lines * (2 if s.how == ATOMIC else 1) for s in sites) * scale)
    passes = round(sum(s.wavefronts for s in traffic.shared_sites()) * scale)
    f32, f64 = round(traffic.flops.get(4, 0) * scale), round(traffic.flops.get(8, 0) * scale)
    pipes = {"DRAM": moved / (rates["dram"] * fraction),
             "L2": uncached / (rates["l2"] * fraction),
             "L1": lines * LINE / (rates["l1"] * fraction),
             "shared memory": passes * BANKS * BANK_WORD / (rates["shared"] * fraction),
             "compute": (f32 / (spec["fp32_tflops"] * 1e12) + f64 / (spec["fp64_tflops"] * 1e12)) / fraction}
    bound = max(pipes, key=pipes.get)
    useful = round(sum(s.ideal_sectors for s in sites) * SECTOR * scale)
    return Prediction(spec["device"], pipes[bound], bound, pipes, launch_overhead(), pipes["DRAM"],
                      pipes["compute"], moved, cached, uncached, l2, useful, uncached, lines, passes, f32, f64,
                      rates["dram"], rates["dram_source"], fraction, repeated, occ)
