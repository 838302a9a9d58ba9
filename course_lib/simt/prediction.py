"""A predicted time for a kernel launch on a named GPU, from the SIMT engine's traffic model
(lessons 03 and 04): the time of each pipe a launch goes through, and the slowest of them.

    kernel time = max(DRAM, L2, L1, shared memory, compute)      (the launch cost is reported apart)
    DRAM        = DRAM bytes / DRAM bandwidth + latency           (L2 takes the latency instead when the
    latency     = waves x (memory latency + the resident           working set stays in L2, repeated=True)
                           blocks' shared-memory passes / clock)
    waves       = bytes loaded / (SMs used x bytes in flight per SM)

Each pipe's time is what the launch asks of it over the rate at which the GPU serves it; the pipes
work at the same time, so the slowest one (the ``bound``) sets the kernel's time.

- **DRAM**: bytes between DRAM and L2 / the GPU's DRAM bandwidth: a recorded copy on that GPU where
  the course has one (``data/gpu_recorded.csv``, named in ``data/gpu_pipes.csv``), else the
  datasheet's (``data/device_specs.csv``). Two bounds on the bytes: ``uncached_bytes`` = 32 bytes x
  every sector of every warp-level global access (an atomic moves its sectors twice: read and
  write), as if L2 never served a sector twice; ``cached_bytes`` = every distinct sector once. The
  estimate takes ``cached_bytes`` when that footprint fits in the GPU's L2 (``data/gpu_sm_limits.csv``)
  and ``uncached_bytes`` otherwise. With ``repeated=True`` (a benchmark loop running the launch again
  and again on the same arrays) a footprint that fits in L2 stays there and DRAM moves nothing.
- **latency** (Little's law: J. D. C. Little, "A proof for the queuing formula L = λW", Operations
  Research 9(3), 1961): an SM with I bytes of loads in flight, a round of them taking R seconds,
  sustains I / R bytes per second. I = resident warps per SM (:mod:`course_lib.simt.occupancy`: block
  size and shared memory against ``data/gpu_sm_limits.csv``, no more blocks than the launch has) x the
  bytes each warp loads before it waits (32 x the sectors of its global loads). R = the memory latency
  (``data/gpu_latency.csv``: pointer chasing, DRAM, or L2 when the working set stays there) + the
  shared-memory passes of all the SM's resident blocks at one per clock: a wave's blocks start
  together, wait for their loads together, then work through their shared phases (a transpose's tile,
  a reduction's tree) on the SM's one shared-memory pipe, and load nothing more until new blocks take
  their place (an assumption, the wave model's own; the earlier one, each block's shared phase alone,
  put a reduction's tree of 5 to 10 barrier steps nearly for free: interleaved addressing 0.51 of the
  reference sum on an RTX 3090 against 0.26 measured). Bytes loaded / (SMs used x I) is the number of
  waves of resident blocks, so latency = waves x R. Latency and transfer
  add (R. W. Hockney's t = latency + bytes / bandwidth, "The communication challenge for MPP",
  Parallel Computing 20(3), 1994): a wave's loads wait, then their bytes cross DRAM. Checked against
  measurements the targets do not use (``data/gpu_stream_published.csv``: gpu-benches' one-load
  kernels on an A100 80GB at 3 % to 100 % occupancy), the sum is within 0.79-1.53x of every figure,
  and the larger of the two alone (Little's law as a bound) up to 2.0x too fast.
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

Approximate: every global load of a warp is taken as issued before the warp's first wait (the
engine does not record where its barriers fall): right for the lesson's one-pass kernels, which
load, then sync or store, but a kernel that loads again after each barrier (a tiled matmul's
phases) has its loads in flight overstated and its latency understated. The latencies are one
warp's on an idle GPU, taken from a neighbouring card where the GPU itself was not measured
(``measured_on``); they grow under load, which adding the transfer stands for only roughly:
gpu-stream's read kernel runs 1.5x slower than predicted at 3 % occupancy and 1.27x faster at
100 %, so the time is an estimate, not a bound. Registers per thread, unknown before compiling, are
left out of occupancy, so resident warps may be overstated. Held to published figures
(``data/transpose_published.csv``, tests/lib/test_simt_prediction.py; no constant fitted to them): four
H100 transposes (naive 0.20 of the recorded copy against 0.16 measured, 32-way conflicted tile 0.34
against 0.33, padded 0.62 against 0.57, padded with 4 elements per thread 0.82 against 0.93) and two
RTX 3090 reductions of 2^25 float32 against the published reference sum (interleaved addressing 0.36
against 0.26, sequential addressing 0.49 against 0.38, at the block size predicted fastest; 0.30 to
0.36 and 0.34 to 0.49 over blocks of 64 to 1024 threads). Left out: the latency of a shared-memory
access and of a barrier (each step of a reduction's tree waits a shared-memory round trip and a
barrier: no Ampere figure for a barrier was found, and the engine does not record barrier steps;
both reductions come out somewhat fast, 1.4x and 1.3x), instruction issue (statements are not SASS
instructions: interleaved addressing's `tid % (2 * s)` costs an integer division per step), atomics
to one address serialising in L2, blocks of a wave drifting apart, the last partial wave, TLB misses
of very large strides, and what a partial-sector write costs beyond its sector.

Units: seconds, bytes, FLOPs, bytes per second.
"""
from __future__ import annotations

import csv
import functools
from dataclasses import dataclass

from ..hardware import DATA_DIR, device_specs, latency_numbers
from ..recorded import figure
from .occupancy import Occupancy, limits_for, occupancy
from .races import ATOMIC, READ
from .traffic import BANK_WORD, BANKS, LINE, SECTOR

GPUS = ("NVIDIA H100 SXM5", "NVIDIA A100 SXM4 80GB", "NVIDIA GeForce RTX 4090")
"""The GPUs the lessons name: a data-centre GPU of each of the last two generations and a consumer card."""

PIPES = ("DRAM", "L2", "L1", "shared memory", "compute")
"""The pipes a launch is timed on, in the order the report lists them."""


def launch_overhead() -> float:
    """Seconds to launch a kernel (data/latency_numbers.csv, 'Launch a CUDA kernel')."""
    return next(r["seconds"] for r in latency_numbers() if r["action"] == "Launch a CUDA kernel")


def gpu_spec(gpu: str) -> dict:
    """The ``data/device_specs.csv`` row of the GPU named ``gpu`` (exact name or model number); for a GPU
    that file does not list, the datasheet columns of its ``data/gpu_pipes.csv`` row (``clock_ghz``,
    ``dram_bandwidth_gbs`` as ``bandwidth_gbs``, ``fp32_tflops``, ``fp64_tflops``)."""
    rows = [r for r in device_specs() if r["kind"] == "GPU"]
    rows += [{"device": name, "kind": "GPU", "clock_ghz": float(r["clock_ghz"]),
              "bandwidth_gbs": float(r["dram_bandwidth_gbs"]), "fp32_tflops": float(r["fp32_tflops"]),
              "fp64_tflops": float(r["fp64_tflops"])}
             for name, r in _pipe_rows().items() if r["clock_ghz"] and name not in {s["device"] for s in rows}]
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


@functools.cache
def _latency_rows() -> dict:
    with (DATA_DIR / "gpu_latency.csv").open(newline="") as fh:
        return {row["device"]: row for row in csv.DictReader(fh)}


def memory_latency(gpu: str) -> dict:
    """The measured latency of one load of the GPU named ``gpu`` (``data/gpu_latency.csv``): ``dram_s``
    and ``l2_s`` (seconds, pointer chasing by one warp), ``measured_on`` (the card measured) and ``source``."""
    device = gpu_spec(gpu)["device"]
    row = _latency_rows().get(device)
    if row is None:
        raise KeyError(f"no memory latency for {device!r} in data/gpu_latency.csv; known: "
                       + ", ".join(_latency_rows()))
    return {"dram_s": float(row["dram_latency_ns"]) * 1e-9, "l2_s": float(row["l2_latency_ns"]) * 1e-9,
            "measured_on": row["measured_on"], "source": row["source"]}


def stream_published(device: str | None = None) -> list[dict]:
    """Published bandwidths of one-load streaming kernels at set occupancies (``data/gpu_stream_published.csv``:
    device, kernel ('read': one 8-byte load per thread; 'scale': one load and one store), threads per block
    and blocks per SM as ints, ``bandwidth_gbs`` (bytes read and written) as a float, the card measured and the
    source), of ``device`` if given: figures the latency pipe is checked against, apart from the targets."""
    with (DATA_DIR / "gpu_stream_published.csv").open(newline="") as fh:
        rows = [dict(row, threads_per_block=int(row["threads_per_block"]), blocks_per_sm=int(row["blocks_per_sm"]),
                     bandwidth_gbs=float(row["bandwidth_gbs"])) for row in csv.DictReader(fh)]
    return [r for r in rows if device is None or r["device"] == device]


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
    ``seconds`` is the kernel's own time, the slowest pipe of ``pipes``; ``bound`` names that pipe, or
    is "latency" or "shared memory" when the memory latency, or the shared-memory passes, added to that pipe
    are the largest part of its time. ``latency_s`` (waves x (``memory_latency_s`` + ``block_shared_s``,
    the passes of a wave's resident blocks at one per clock)) is part of the pipe named ``latency_pipe`` ("DRAM", or
    "L2" when the working set stays in L2); ``transfers`` holds the DRAM and L2 pipes without it and
    ``latencies`` the latency either level would add. ``loads_per_warp`` and ``bytes_in_flight_per_sm``
    are what Little's law is given; ``waves`` = blocks / (SMs used x resident blocks per SM).
    ``launch_s`` is the cost of launching the kernel, reported apart (``with_launch_s`` adds them)."""

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
    transfers: dict
    latency_s: float
    latency_pipe: str
    memory_latency_s: float
    block_shared_s: float
    waves: float
    loads_per_warp: float
    bytes_in_flight_per_sm: float
    latencies: dict

    @property
    def with_launch_s(self) -> float:
        """The kernel's time plus the cost of launching it (seconds)."""
        return self.seconds + self.launch_s

    def _seconds(self, moved: int) -> float:
        """The kernel's time had DRAM moved ``moved`` bytes (the loads wait on DRAM's latency when it
        moves any, else on L2's)."""
        level = "DRAM" if moved else "L2"
        pipes = dict(self.pipes, DRAM=moved / (self.bandwidth * self.sm_fraction), L2=self.transfers["L2"])
        pipes[level] += self.latencies[level]
        return max(pipes.values())

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
                "fp32 FLOPs": self.flops32, "fp64 FLOPs": self.flops64,
                f"latency, in {self.latency_pipe} (s)": self.latency_s, "memory latency (s)": self.memory_latency_s,
                "a wave's shared-memory passes (s)": self.block_shared_s, "waves of resident blocks": self.waves,
                "global loads per warp": self.loads_per_warp, "bytes in flight per SM": self.bytes_in_flight_per_sm}

    def sentence(self) -> str:
        if self.repeated and self.moved_bytes == 0:
            which = "the working set stays in L2 across repeated launches: no DRAM traffic"
        elif self.moved_bytes == self.cached_bytes and self.cached_bytes <= self.l2_bytes:
            which = "the working set fits in L2: each sector once"
        else:
            which = "the working set exceeds L2: every sector of every warp"
        pipes = "; ".join(f"{name} {_fmt(s)}" for name, s in self.pipes.items())
        latency = (f"latency {_fmt(self.latency_s)} of the {self.latency_pipe} pipe: {self.waves:.3g} waves of "
                   f"resident blocks x ({_fmt(self.memory_latency_s)} {self.latency_pipe} latency + "
                   f"{_fmt(self.block_shared_s)} of its resident blocks' shared-memory passes), "
                   f"{self.bytes_in_flight_per_sm:,.0f} bytes in flight per SM, {self.loads_per_warp:.3g} loads "
                   "per warp" if self.latency_s else "no global loads: no latency")
        return (f"on an {self.gpu} this kernel would take about {_fmt(self.seconds)}, bound by {self.bound} "
                f"(pipes: {pipes}; DRAM {self.moved_bytes:,} bytes at {self.bandwidth / 1e9:.0f} GB/s, "
                f"{self.bandwidth_source}, {which}; {latency}; L2 {self.l2_traffic_bytes:,} bytes in sectors, "
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
    moves nothing through DRAM, and the loads wait on L2's latency). ``registers_per_thread``, when
    known, limits the resident blocks (occupancy) and so the loads in flight. A launch whose blocks
    cannot run on the GPU (too many threads or too much shared memory per block) raises ValueError."""
    traffic = result.traffic
    if traffic is None:
        raise ValueError("predict needs the traffic model: run the kernel with traffic=True")
    if scale < 1:
        raise ValueError("scale must be at least 1 (a launch larger than the one simulated)")
    spec, limits, rates = gpu_spec(gpu), limits_for(gpu), pipe_rates(gpu)
    occ = occupancy(gpu, result.threads_per_block, result.shared_bytes, registers_per_thread)
    if occ.blocks_per_sm == 0:
        raise ValueError(f"this launch cannot run: {occ.sentence()}")
    fraction = min(1.0, result.blocks * scale / limits["sms"])
    uncached = round(traffic.sectors * SECTOR * scale)
    cached = round(traffic.distinct_sectors * SECTOR * scale)
    l2 = round(limits["l2_mb"] * 2**20)
    fits = cached <= l2
    moved = 0 if repeated and fits else cached if fits else uncached
    sites = traffic.global_sites()
    lines = round(sum(s.lines * (2 if s.how == ATOMIC else 1) for s in sites) * scale)
    block_passes = sum(s.wavefronts for s in traffic.shared_sites()) / result.blocks
    passes = round(block_passes * result.blocks * scale)
    f32, f64 = round(traffic.flops.get(4, 0) * scale), round(traffic.flops.get(8, 0) * scale)
    transfers = {"DRAM": moved / (rates["dram"] * fraction), "L2": uncached / (rates["l2"] * fraction)}
    # latency (Little's law): the loads a warp issues are taken as in flight together
    loads = [s for s in sites if s.how == READ]
    warps = result.blocks * -(-result.threads_per_block // 32)
    loads_per_warp = sum(s.warp_accesses for s in loads) / warps
    bytes_per_warp = sum(s.sectors for s in loads) * SECTOR / warps
    sms_used = fraction * limits["sms"]
    resident_blocks = min(occ.blocks_per_sm, result.blocks * scale / sms_used)
    in_flight = resident_blocks * -(-result.threads_per_block // 32) * bytes_per_warp
    waves = result.blocks * scale / (sms_used * resident_blocks)
    wait = memory_latency(gpu)
    block_shared = resident_blocks * block_passes / rates["clock_hz"]
    latencies = {level: waves * (wait[f"{level.lower()}_s"] + block_shared) if bytes_per_warp else 0.0
                 for level in ("DRAM", "L2")}
    level = "DRAM" if moved else "L2"
    pipes = {"DRAM": transfers["DRAM"] + (latencies["DRAM"] if level == "DRAM" else 0.0),
             "L2": transfers["L2"] + (latencies["L2"] if level == "L2" else 0.0),
             "L1": lines * LINE / (rates["l1"] * fraction),
             "shared memory": passes * BANKS * BANK_WORD / (rates["shared"] * fraction),
             "compute": (f32 / (spec["fp32_tflops"] * 1e12) + f64 / (spec["fp64_tflops"] * 1e12)) / fraction}
    slowest = max(pipes, key=pipes.get)
    bound = slowest
    if slowest == level and latencies[level]:     # the latency-carrying pipe: its largest part names the bound
        parts = {level: transfers[level], "latency": waves * wait[f"{level.lower()}_s"],
                 "shared memory": waves * block_shared}
        bound = max(parts, key=parts.get)
    useful = round(sum(s.ideal_sectors for s in sites) * SECTOR * scale)
    return Prediction(spec["device"], pipes[slowest], bound, pipes, launch_overhead(), pipes["DRAM"],
                      pipes["compute"], moved, cached, uncached, l2, useful, uncached, lines, passes, f32, f64,
                      rates["dram"], rates["dram_source"], fraction, repeated, occ, transfers, latencies[level], level,
                      wait[f"{level.lower()}_s"], block_shared, waves, loads_per_warp, in_flight, latencies)
