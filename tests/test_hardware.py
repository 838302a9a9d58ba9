import json
import math
import subprocess
import sys

import pytest

from course_lib import hardware


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


def test_device_label_names_the_device(has_gpu):
    assert ("CUDA GPU" if has_gpu else "CPU") in hardware.device_label()


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
from course_lib import hardware
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
