import json
import math
import subprocess
import sys

import pytest

from course_lib import cuda_simulator, hardware


def test_cpu_info_describes_this_cpu():
    cpu = hardware.cpu_info()
    assert cpu.model and cpu.arch
    assert 1 <= cpu.physical_cores <= cpu.logical_cores
    assert cpu.widest_simd_bits in (64, 128, 256, 512)
    assert all(size > 0 for size in cpu.caches.values())


def test_widest_simd_follows_flags():
    cpu = hardware.CpuInfo("x", "x86_64", 1, 1, 1e9, simd=["sse4_2", "avx2", "fma"])
    assert cpu.widest_simd_bits == 256
    cpu.simd.append("avx512f")
    assert cpu.widest_simd_bits == 512
    assert hardware.CpuInfo("x", "arm", 1, 1, 0, simd=["neon"]).widest_simd_bits == 128


def test_ram_is_plausible():
    assert 2**28 < hardware.ram_bytes() < 2**50


def test_describe_is_json_and_lists_fallbacks(has_gpu):
    info = json.loads(json.dumps(hardware.describe()))
    for key in ("cpu", "ram_bytes", "cuda_gpus", "cupy_usable", "array_module", "numba_cuda",
                "distributed_backends", "fallbacks"):
        assert key in info
    assert "gloo" in info["distributed_backends"]
    if not has_gpu:
        assert info["cuda_gpus"] == []
        assert any("CPU" in f for f in info["fallbacks"])


def test_describe_device_names_only_the_device_asked_about(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index=None: f"Fake GPU {index}")
    cpu = hardware.describe_device("cpu", threads=1)
    assert hardware.cpu_info().model in cpu and "1 thread " in cpu and "GPU" not in cpu
    assert hardware.describe_device(None) == hardware.describe_device("cpu")
    assert "Fake GPU 0" in hardware.describe_device("cuda") and "cuda:0" in hardware.describe_device("cuda")
    assert "Fake GPU 1" in hardware.describe_device(torch.device("cuda", 1))
    assert not hasattr(hardware, "device_label")  # it named the GPU for CPU work


def test_latency_table_is_sorted_cited_and_spans_orders_of_magnitude():
    rows = hardware.latency_numbers()
    assert len(rows) >= 15
    assert all(r["source"] for r in rows)
    seconds = [r["seconds"] for r in rows]
    assert seconds == sorted(seconds)
    assert max(seconds) / min(seconds) > 1e7
    l1 = next(r for r in rows if r["action"].startswith("L1"))
    assert l1["seconds"] == pytest.approx(1.5e-9)


def test_device_specs_are_cited_numbers():
    rows = hardware.device_specs()
    assert all(r["source"] for r in rows)
    v100 = next(r for r in rows if "V100" in r["device"])
    assert v100["fp64_tflops"] == pytest.approx(7.8)
    phi = next(r for r in rows if "Xeon Phi" in r["device"])
    assert math.isnan(phi["fp32_tflops"]) and phi["fp64_tflops"] == pytest.approx(3.456)


SIM_PROBE = """
import os, sys
import course_lib
from course_lib import cuda_simulator, hardware
print(os.environ["NUMBA_ENABLE_CUDASIM"])
cuda = hardware.numba_cuda()
cuda = hardware.numba_cuda()  # the notice is printed once
import numba
print("ENABLE_CUDASIM", numba.config.ENABLE_CUDASIM)
print(hardware.numba_cuda_mode())
"""


def test_simulator_is_switched_on_before_numba_cuda_import(has_gpu):
    if has_gpu:
        pytest.skip("a GPU is usable: the simulator is not used")
    env = {k: v for k, v in __import__("os").environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    out = subprocess.run([sys.executable, "-c", SIM_PROBE], capture_output=True, text=True,
                         env=env, timeout=120, check=True).stdout.splitlines()
    assert out[0] == "1"
    assert sum("CUDA simulator" in line for line in out) == 1
    assert out[-2] == "ENABLE_CUDASIM 1"
    assert out[-1] == "simulator"


def test_user_choice_of_simulator_is_respected():
    env = dict(__import__("os").environ, NUMBA_ENABLE_CUDASIM="1")
    out = subprocess.run([sys.executable, "-c", "from course_lib import hardware; "
                          "print(hardware.numba_cuda_mode())"], capture_output=True, text=True,
                         env=env, timeout=60, check=True).stdout.strip()
    assert out == "simulator"


def test_simulator_also_when_numba_was_imported_first(has_gpu):
    if has_gpu:
        pytest.skip("a GPU is usable: the simulator is not used")
    env = {k: v for k, v in __import__("os").environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    probe = ("import numba\nfrom course_lib import hardware\ncuda = hardware.numba_cuda()\n"
             "import numpy as np\n@cuda.jit\ndef k(x):\n    x[cuda.grid(1)] += 1\n"
             "x = np.zeros(4)\nk[1, 4](x)\nprint(x.sum(), numba.config.ENABLE_CUDASIM)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env,
                         timeout=120, check=True).stdout.splitlines()
    assert out[-1] == "4.0 1"


def test_decision_falls_back_to_the_simulator_when_the_probe_kernel_fails(monkeypatch):
    monkeypatch.delenv("NUMBA_ENABLE_CUDASIM", raising=False)
    monkeypatch.delenv("COURSE_NUMBA_CUDA", raising=False)
    monkeypatch.setattr(cuda_simulator, "_driver_sees_gpu", lambda: True)  # a GPU the driver sees
    error = "AttributeError: module 'numpy' has no attribute 'row_stack'"
    monkeypatch.setattr(cuda_simulator, "probe_numba_cuda_kernel", lambda: error)
    simulated, reason = cuda_simulator._decide_numba_cuda()
    assert simulated and error in reason and "probe kernel" in reason and "NumPy" in reason
    monkeypatch.setattr(cuda_simulator, "probe_numba_cuda_kernel", lambda: "")  # the probe ran
    assert cuda_simulator._decide_numba_cuda() == (False, "")
    monkeypatch.setattr(cuda_simulator, "_driver_sees_gpu", lambda: False)
    simulated, reason = cuda_simulator._decide_numba_cuda()
    assert simulated and "no CUDA GPU" in reason


def test_decision_is_inherited_by_child_processes(monkeypatch):
    monkeypatch.setattr(cuda_simulator, "probe_numba_cuda_kernel", lambda: pytest.fail("probed again"))
    monkeypatch.setattr(cuda_simulator, "_driver_sees_gpu", lambda: True)
    monkeypatch.setenv("NUMBA_ENABLE_CUDASIM", "1")
    monkeypatch.setenv("COURSE_NUMBA_CUDA", "simulator: the parent's reason.")
    assert cuda_simulator._decide_numba_cuda() == (True, "the parent's reason.")
    monkeypatch.setenv("NUMBA_ENABLE_CUDASIM", "0")
    monkeypatch.setenv("COURSE_NUMBA_CUDA", "real")
    assert cuda_simulator._decide_numba_cuda() == (False, "")


def test_probe_reports_the_error_of_a_probe_that_raises(monkeypatch):
    monkeypatch.setattr(cuda_simulator, "_PROBE_KERNEL",
                        "raise AttributeError(\"module 'numpy' has no attribute 'row_stack'\")")
    assert hardware.probe_numba_cuda_kernel() == ("AttributeError: module 'numpy' has no "
                                                  "attribute 'row_stack'")
    monkeypatch.setattr(cuda_simulator, "_PROBE_KERNEL", "print('probe kernel ok')")
    assert hardware.probe_numba_cuda_kernel() == ""


def test_real_probe_kernel_fails_without_a_gpu(has_gpu):
    if has_gpu:
        pytest.skip("a GPU is usable: tests/lib/test_gpu.py checks that the probe kernel runs")
    error = hardware.probe_numba_cuda_kernel()
    assert error  # real Numba CUDA, no GPU: the one-thread kernel cannot run


FAKE_DRIVER_PROBE = """
import ctypes
real_cdll = ctypes.CDLL

class FakeDriver:  # a CUDA driver that reports one GPU, so course_lib runs its probe kernel
    def cuInit(self, flags):
        return 0
    def cuDeviceGetCount(self, count):
        count._obj.value = 1
        return 0

ctypes.CDLL = lambda name, *a, **k: FakeDriver() if "cuda" in str(name) else real_cdll(name, *a, **k)
import argparse
import numpy as np
import course_lib
from course_lib import cuda_simulator, hardware
print("MODE", hardware.numba_cuda_mode())
print("REASON", hardware.numba_cuda_reason())
from course_lib import kernels
print("SUM", kernels.vector_add(np.arange(4.0), np.ones(4)).sum())
from course_tools.cli import cmd_doctor
cmd_doctor(argparse.Namespace(json=False))
"""


def test_gpu_whose_probe_kernel_fails_falls_back_to_the_simulator():
    """A driver that sees a GPU, but real Numba CUDA cannot run a kernel (here: there is no
    GPU behind the fake driver): the simulator is switched on, kernels still run, doctor says why."""
    env = {k: v for k, v in __import__("os").environ.items()
           if k not in ("NUMBA_ENABLE_CUDASIM", "COURSE_NUMBA_CUDA")}
    done = subprocess.run([sys.executable, "-c", FAKE_DRIVER_PROBE], capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "MODE simulator" in out
    reason = next(line for line in out.splitlines() if line.startswith("REASON "))
    assert "probe kernel failed" in reason and "numba-cuda" in reason
    assert "SUM 10.0" in out
    assert "kernels Numba CUDA: simulator, because a one-thread probe kernel failed" in out
    assert reason[len("REASON "):] in out.split("SUM")[1]


def test_spec_for_finds_the_cited_row_of_a_gpu_by_its_torch_name():
    assert hardware.spec_for("NVIDIA H100 80GB HBM3")["fp32_tflops"] == pytest.approx(67)
    assert hardware.spec_for("Tesla V100-SXM2-16GB")["device"] == "NVIDIA Tesla V100 SXM2"
    assert hardware.spec_for("NVIDIA A100-SXM4-80GB")["bandwidth_gbs"] == pytest.approx(2039)
    assert hardware.spec_for("NVIDIA GeForce RTX 4090")["device"] == "NVIDIA GeForce RTX 4090"
    assert hardware.spec_for("NVIDIA GeForce RTX 3060") is None  # not in the table: no made-up peak
    assert hardware.spec_for("Intel(R) Xeon(R) Processor") is None  # CPUs are never GPU rows


def test_cache_line_bytes_reads_sysfs_and_says_none_when_unknown(tmp_path):
    here = hardware.cache_line_bytes()
    assert here is None or (16 <= here <= 1024 and here & (here - 1) == 0)  # bytes, a power of 2
    line_file = tmp_path / "coherency_line_size"
    line_file.write_text("128\n")
    assert hardware.cache_line_bytes(line_file) == 128
    line_file.write_text("unknown\n")
    assert hardware.cache_line_bytes(line_file) is None
    line_file.write_text("0\n")
    assert hardware.cache_line_bytes(line_file) is None
    assert hardware.cache_line_bytes(tmp_path / "absent") is None


def test_spec_peak_share_is_never_clamped_and_says_why_it_exceeds_the_ceiling():
    # a VM reporting its base clock: 108 % of the ceiling means the cores ran faster (turbo)
    share, text = hardware.spec_peak_share(180e9, 166.4e9, clock_is_maximum=False)
    assert share == pytest.approx(180 / 166.4)
    assert "base clock" in text and "1.08x" in text
    # the same figure against a clock known to be the maximum: an assumption is wrong
    share, text = hardware.spec_peak_share(180e9, 166.4e9, clock_is_maximum=True)
    assert share > 1 and "assumption" in text
    share, text = hardware.spec_peak_share(50e9, 100e9, clock_is_maximum=False)
    assert share == pytest.approx(0.5) and "below" in text


def test_cpu_clock_says_where_it_came_from():
    cpu = hardware.cpu_info()
    assert cpu.clock_source in ("cpufreq maximum", "advertised", "unknown")
    assert cpu.clock_is_maximum == (cpu.clock_source == "cpufreq maximum")
    assert (cpu.max_clock_hz > 0) == (cpu.clock_source != "unknown")


def test_current_gpus_and_links_are_cited():
    rows = {r["device"]: r for r in hardware.device_specs()}
    b200 = hardware.spec_for("NVIDIA B200")
    assert b200["fp4_tensor_tflops"] == pytest.approx(9000) and b200["nvlink_gbs"] == pytest.approx(1800)
    assert b200["fp8_tensor_tflops"] == pytest.approx(2 * b200["bf16_tensor_tflops"])
    assert hardware.spec_for("NVIDIA GB200")["device"].startswith("NVIDIA GB200")
    h200 = hardware.spec_for("NVIDIA H200")
    assert h200["memory_gb"] == pytest.approx(141) and h200["bandwidth_gbs"] == pytest.approx(4800)
    assert hardware.spec_for("NVIDIA H100 80GB HBM3")["device"] == "NVIDIA H100 SXM5"
    assert all("nvidia.com" in r["source"] for r in rows.values() if r["year"] >= 2022 and "RTX" not in r["device"])
    pcie = {g["generation"]: g["lane_bytes_per_s"] for g in hardware.pcie_generations()}
    assert 16 * pcie["PCIe 6.0"] == pytest.approx(128e9) and 16 * pcie["PCIe 3.0"] == pytest.approx(15.75e9, rel=1e-3)
    links = {r["link"]: r["bytes_per_s"] for r in hardware.interconnects()}
    assert links["InfiniBand NDR"] == pytest.approx(50e9) and links["InfiniBand XDR"] == pytest.approx(100e9)
    assert links["NVLink 5 (B200 / GB200)"] == pytest.approx(900e9)


INTEL_BLOCK = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8480+ CPU @ 2.00GHz
cpu MHz\t\t: 3799.998
flags\t\t: fpu sse4_2 avx avx2 fma avx512f amx_tile

processor\t: 1
model name\t: another block, not read
"""


def test_cpu_facts_come_from_proc_cpuinfo_without_a_subprocess(tmp_path):
    """Linux's /proc/cpuinfo is read directly (py-cpuinfo would start a Python subprocess for it,
    0.3 s of CPU in every process that labels a measurement): the first processor's model, flags
    and the clock in the model string (else its "cpu MHz"); None for a file without a model name."""
    from course_lib.hardware import _proc_cpuinfo

    path = tmp_path / "cpuinfo"
    path.write_text(INTEL_BLOCK)
    info = _proc_cpuinfo(path)
    assert info["brand_raw"] == "Intel(R) Xeon(R) Platinum 8480+ CPU @ 2.00GHz"
    assert info["flags"] == ["fpu", "sse4_2", "avx", "avx2", "fma", "avx512f", "amx_tile"]
    assert info["hz_advertised"][0] == 2.0e9
    path.write_text(INTEL_BLOCK.replace(" @ 2.00GHz", ""))
    assert _proc_cpuinfo(path)["hz_advertised"][0] == 3799.998e6
    path.write_text("processor\t: 0\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd\n")   # an ARM machine
    assert _proc_cpuinfo(path) is None
    assert _proc_cpuinfo(tmp_path / "absent") is None
