"""What this machine has: CPU, caches, RAM, CUDA GPUs, CuPy and Numba CUDA (most lessons).

Lessons 00-04, 07, 08, 10, 12 and 13 import it, to describe the machine and to name the device
a measurement ran on (:func:`describe_device`; :mod:`course_lib.timing` does so for every
measurement).

Also the cited tables in ``data/`` (latency numbers, device specs). Whether Numba CUDA kernels
run on the GPU or in the simulator is decided in :mod:`course_lib.cuda_simulator`; its
functions are re-exported here.

Every function here is cheap to call twice: expensive probes are cached.
"""
from __future__ import annotations

import csv
import functools
import os
import platform
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .cuda_simulator import (  # noqa: F401 - also hardware's names
    numba_cuda,
    numba_cuda_mode,
    numba_cuda_reason,
    prepare_numba_cuda,
    probe_numba_cuda_kernel,
)

DATA_DIR = Path(__file__).resolve().parent.parent / "data"


# --------------------------------------------------------------------------- CPU
@dataclass
class CpuInfo:
    """The host CPU. Cache sizes in bytes, clock in Hz (0 when unknown).

    ``clock_source`` says where ``max_clock_hz`` came from: ``"cpufreq maximum"`` (the
    operating system's frequency driver reports the highest clock, turbo included),
    ``"advertised"`` (the figure in the model string or /proc/cpuinfo; on a virtual machine
    this is often the base clock, below the turbo clock the cores really run at) or
    ``"unknown"``."""

    model: str
    arch: str
    physical_cores: int
    logical_cores: int
    max_clock_hz: float
    simd: list[str] = field(default_factory=list)
    caches: dict[str, int] = field(default_factory=dict)
    clock_source: str = "unknown"

    @property
    def clock_is_maximum(self) -> bool:
        """True only when the operating system reported the highest (turbo) clock."""
        return self.clock_source == "cpufreq maximum"

    @property
    def widest_simd_bits(self) -> int:
        """Width of the widest vector unit in bits (128 for SSE/NEON, 256 AVX2, 512 AVX-512)."""
        if any(f.startswith("avx512") for f in self.simd):
            return 512
        if "avx2" in self.simd or "avx" in self.simd:
            return 256
        return 128 if self.simd else 64


SIMD_FLAGS = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512_bf16", "avx512_vnni",
              "amx_bf16", "amx_tile", "neon", "asimd", "sve")


def _sysfs_caches() -> dict[str, int]:
    """Cache sizes of cpu0 from Linux sysfs, e.g. {'L1d': 49152, 'L2': 2097152}."""
    caches: dict[str, int] = {}
    base = Path("/sys/devices/system/cpu/cpu0/cache")
    for index in sorted(base.glob("index*")):
        try:
            level = (index / "level").read_text().strip()
            kind = (index / "type").read_text().strip()
            size = (index / "size").read_text().strip()
        except OSError:
            continue
        suffix = {"Data": "d", "Instruction": "i"}.get(kind, "")
        mult = {"K": 1024, "M": 1024**2, "G": 1024**3}.get(size[-1], 1)
        caches[f"L{level}{suffix}"] = int(size.rstrip("KMG")) * mult
    return caches


def _proc_cpuinfo(path: Path = Path("/proc/cpuinfo")) -> dict | None:
    """What py-cpuinfo reports from Linux's /proc/cpuinfo (``brand_raw``, ``flags``,
    ``hz_advertised`` in Hz: from the model string's "@ 2.10GHz", else the "cpu MHz" line), read
    here directly: py-cpuinfo starts a Python subprocess for it (0.3 s of CPU per process that
    labels a measurement). None where the file has no x86-style "model name" (ARM, macOS, Windows)."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return None
    fields: dict[str, str] = {}
    for line in text.split("\n\n", 1)[0].splitlines():   # the first processor's block
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip(), value.strip())
    brand = fields.get("model name")
    if not brand:
        return None
    hz = 0.0
    quoted = re.search(r"@\s*([\d.]+)\s*GHz", brand)
    if quoted:
        hz = float(quoted.group(1)) * 1e9
    else:
        try:
            hz = float(fields.get("cpu MHz", "0")) * 1e6
        except ValueError:
            hz = 0.0
    return {"brand_raw": brand, "flags": fields.get("flags", "").split(), "hz_advertised": [hz, 0]}


@functools.lru_cache(maxsize=1)
def cpu_info() -> CpuInfo:
    """Describe the host CPU (model, cores, clock, SIMD extensions, cache sizes)."""
    import psutil  # lazy: `import course_lib` stays light

    info = _proc_cpuinfo()
    if info is None:
        import cpuinfo  # lazy, and only where /proc/cpuinfo does not say (it starts a subprocess)

        info = cpuinfo.get_cpu_info()
    flags = set(info.get("flags", []))
    clock, clock_source = 0.0, "unknown"
    freq = psutil.cpu_freq()
    if freq and freq.max:
        clock, clock_source = freq.max * 1e6, "cpufreq maximum"
    elif info.get("hz_advertised") and info["hz_advertised"][0]:
        clock, clock_source = float(info["hz_advertised"][0]), "advertised"
    caches = _sysfs_caches()
    if not caches:  # macOS, Windows: py-cpuinfo's figures
        for key, name in (("l1_data_cache_size", "L1d"), ("l2_cache_size", "L2"),
                          ("l3_cache_size", "L3")):
            if isinstance(info.get(key), int):
                caches[name] = info[key]
    return CpuInfo(
        model=info.get("brand_raw") or platform.processor() or "unknown CPU",
        arch=platform.machine(),
        physical_cores=psutil.cpu_count(logical=False) or os.cpu_count() or 1,
        logical_cores=psutil.cpu_count(logical=True) or os.cpu_count() or 1,
        max_clock_hz=clock,
        simd=[f for f in SIMD_FLAGS if f in flags],
        caches=caches,
        clock_source=clock_source,
    )


def spec_peak_share(measured_flops: float, spec_flops: float, clock_is_maximum: bool) -> tuple[float, str]:
    """A measured rate (FLOP/s) as a fraction of a spec-sheet ceiling (FLOP/s) computed from a
    clock, and a sentence saying what that fraction means. Nothing is clamped: a fraction above 1
    says the ceiling was wrong, and the sentence says which way.

    When the clock behind the ceiling is not known to be the maximum (``clock_is_maximum``
    False: an advertised or base clock, as virtual machines report), a fraction ``f > 1`` means
    the cores ran faster than that clock, on average at least ``f`` times it (turbo). When the
    clock is the maximum, a fraction above 1 means the formula's other assumptions (SIMD width,
    FMA units per core) or the measurement itself are wrong."""
    share = measured_flops / spec_flops
    if share <= 1:
        return share, (f"{share:.0%} of the ceiling: below it, as a measurement should be "
                       "(clock drops under vector load, imperfect kernels, neighbours)")
    if not clock_is_maximum:
        return share, (f"{share:.0%} of the ceiling from the reported clock, which may be the base "
                       f"clock: the cores ran on average at least {share:.2f}x that clock (turbo), "
                       "so the true ceiling is higher")
    return share, (f"{share:.0%} of the ceiling although its clock is the reported maximum: an "
                   "assumption of the formula (SIMD width, FMA units) or the measurement is wrong")


def ram_bytes() -> int:
    """Total physical memory in bytes."""
    import psutil  # lazy: `import course_lib` stays light

    return int(psutil.virtual_memory().total)


CACHE_LINE_FILE = Path("/sys/devices/system/cpu/cpu0/cache/index0/coherency_line_size")


def cache_line_bytes(path: Path | str = CACHE_LINE_FILE) -> int | None:
    """Cache line size of cpu0 in bytes, read from Linux sysfs (``path``); None where the
    operating system does not report it (macOS, Windows, some containers) or reports nonsense."""
    try:
        line = int(Path(path).read_text().strip())
    except (OSError, ValueError):
        return None
    return line if line > 0 else None


# --------------------------------------------------------------------------- GPUs
@dataclass
class GpuInfo:
    """One CUDA device as torch sees it. Memory in bytes."""

    index: int
    name: str
    memory_bytes: int
    compute_capability: str
    multiprocessors: int


def cuda_gpus() -> list[GpuInfo]:
    """CUDA devices usable by torch (an empty list on a machine without one)."""
    import torch  # lazy: `import course_lib` stays light (no torch)

    if not torch.cuda.is_available():
        return []
    gpus = []
    for i in range(torch.cuda.device_count()):
        p = torch.cuda.get_device_properties(i)
        gpus.append(GpuInfo(i, p.name, int(p.total_memory), f"{p.major}.{p.minor}",
                            int(p.multi_processor_count)))
    return gpus


def cupy_usable() -> bool:
    """True when CuPy imports *and* can allocate on a GPU.

    ``import cupy`` succeeds on machines without a GPU; only the first allocation fails,
    so the decision is keyed on ``cupy.cuda.is_available()``.
    """
    try:
        import cupy  # lazy: optional, installed only on machines with a GPU
    except Exception:
        return False
    try:
        return bool(cupy.cuda.is_available())
    except Exception:
        return False


# ------------------------------------------------------------------ the whole box
def distributed_backends() -> list[str]:
    """torch.distributed backends built into this torch ('gloo', 'nccl', 'mpi')."""
    import torch.distributed as dist  # lazy: `import course_lib` stays light (no torch)

    if not dist.is_available():
        return []
    checks = {"gloo": dist.is_gloo_available, "nccl": dist.is_nccl_available,
              "mpi": dist.is_mpi_available}
    return [name for name, check in checks.items() if check()]


def describe() -> dict:
    """Everything above as one JSON-ready dict, plus the fallbacks that apply here."""
    import numpy  # lazy: `import course_lib` stays light
    import torch  # lazy: `import course_lib` stays light (no torch)

    gpus = cuda_gpus()
    cupy_ok = cupy_usable()
    mode = numba_cuda_mode()
    fallbacks = []
    if not gpus:
        fallbacks.append("torch runs on the CPU (no CUDA GPU)")
    if not cupy_ok:
        fallbacks.append("arrays use NumPy (CuPy has no usable GPU)")
    if mode != "real":  # why: numba_cuda_reason(), printed by doctor and lesson 00
        fallbacks.append("Numba CUDA kernels run in the CUDA simulator" if mode == "simulator"
                         else "Numba CUDA kernels fail: numba.cuda was imported before course_lib")
    if len(gpus) < 2:
        fallbacks.append("multi-GPU lessons use several CPU processes with the gloo backend")
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "torch": torch.__version__,
        "numpy": numpy.__version__,
        "cpu": asdict(cpu_info()),
        "ram_bytes": ram_bytes(),
        "cuda_gpus": [asdict(g) for g in gpus],
        "cupy_usable": cupy_ok,
        "array_module": "cupy" if cupy_ok else "numpy",
        "numba_cuda": mode,
        "numba_cuda_reason": numba_cuda_reason(),
        "distributed_backends": distributed_backends(),
        "fallbacks": fallbacks,
    }


def describe_device(device="cpu", threads: int | None = None) -> str:
    """Name the torch device ``device`` ('cpu', 'cuda:0', a ``torch.device``, 'cupy') in words:
    a CPU by its model and ``threads`` (default: torch's thread count now), a GPU by its name and
    index. Only the device asked about is named, never another one the machine also has."""
    import torch  # lazy: `import course_lib` stays light (no torch)

    name = str(device if device is not None else "cpu")
    if name == "cupy":  # CuPy's current device
        import cupy  # lazy: optional, installed only on machines with a GPU

        name = f"cuda:{cupy.cuda.Device().id}"
    dev = torch.device(name)
    if dev.type == "cpu":
        cpu = cpu_info()
        n = torch.get_num_threads() if threads is None else int(threads)
        return (f"{cpu.model} (CPU, {n} thread{'s' if n != 1 else ''} of "
                f"{cpu.logical_cores} logical cores)")
    if dev.type == "cuda":
        index = dev.index if dev.index is not None else torch.cuda.current_device()
        return f"{torch.cuda.get_device_name(index)} (CUDA GPU cuda:{index})"
    if dev.type == "mps":
        return f"Apple GPU (mps, {platform.machine()})"
    return name


# ----------------------------------------------------------------- cited tables
def _read_csv(name: str) -> list[dict]:
    path = DATA_DIR / name
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def latency_numbers() -> list[dict]:
    """The latency table (``data/latency_numbers.csv``): action, seconds (float), notes, source."""
    rows = _read_csv("latency_numbers.csv")
    for row in rows:
        row["seconds"] = float(row["seconds"])
    return rows


def device_specs() -> list[dict]:
    """Cited processor specs (``data/device_specs.csv``); numeric columns as floats (NaN if blank).

    Rates in TFLOP/s (tensor-core columns dense, i.e. without 2:4 sparsity), memory in GB,
    bandwidths in GB/s (``nvlink_gbs``: per GPU, both directions together, as NVIDIA quotes it)."""
    rows = _read_csv("device_specs.csv")
    for row in rows:
        for key in ("year", "cores", "clock_ghz", "fp32_tflops", "fp64_tflops", "memory_gb",
                    "bandwidth_gbs", "bf16_tensor_tflops", "fp8_tensor_tflops", "fp4_tensor_tflops",
                    "nvlink_gbs"):
            row[key] = float(row[key]) if row.get(key) else float("nan")
    return rows


def pcie_generations() -> list[dict]:
    """PCI Express generations (``data/pcie_generations.csv``) with ``lane_bytes_per_s``: the
    bytes per second one lane carries in one direction (transfers/s x payload/line bits / 8)."""
    rows = _read_csv("pcie_generations.csv")
    for row in rows:
        row["lane_bytes_per_s"] = (float(row["gigatransfers_per_s"]) * 1e9 * int(row["payload_bits"])
                                   / int(row["line_bits"]) / 8)
    return rows


def interconnects() -> list[dict]:
    """GPU-to-GPU links and network ports (``data/interconnects.csv``) with
    ``bytes_per_s``: bytes per second in one direction (per GPU for NVLink, per port otherwise)."""
    rows = _read_csv("interconnects.csv")
    for row in rows:
        row["bytes_per_s"] = float(row["gigabytes_per_s_per_direction"]) * 1e9
    return rows


def spec_for(device_name: str) -> dict | None:
    """The row of :func:`device_specs` for the GPU called ``device_name`` (as torch names it,
    e.g. 'NVIDIA H100 80GB HBM3' -> the 'NVIDIA H100 SXM5' row), or None if the table lacks it.
    A row matches when its model number (H100, A100, V100, T4, K80, 1080) is a word of the name."""
    words = set(device_name.replace("-", " ").split())
    for row in device_specs():
        if row["kind"] != "GPU":
            continue
        models = [w for w in row["device"].split() if any(ch.isdigit() for ch in w)
                  and w not in ("80GB", "SXM2", "SXM4", "SXM5", "(per", "board)")]
        if models and models[0] in words:
            return row
    return None
