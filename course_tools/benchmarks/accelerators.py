"""Lesson 12's figures: matmul speed per number format, int8 error, systolic simulator speed.

Matmul rates per format on the CPU (512 x 512) and, when there is a CUDA GPU, on the GPU at
4096 x 4096 (``gpu_*`` keys), a size where its tensor cores show: at 256 bfloat16 was 1.17x
float32 on an H100, at 4096 14.9x (shared/reports/gpu-h100-2026-11-23, section 5).
"""
from __future__ import annotations

import time

import numpy as np
import torch

from course_lib.hardware import describe_device
from course_lib.precision import matmul_error, time_matmul_by_format
from course_lib.systolic import simulate

GPU_MATMUL_N = 4096


def format_rates(n: int, device: str, prefix: str = "") -> dict:
    """FLOP/s per float format for an n x n matmul on ``device``, and speed-ups over float32."""
    rows = {r["format"]: r for r in time_matmul_by_format(n, device=device)}
    timing = rows["float32"]["timing"]
    figures = {f"{prefix}device": describe_device(timing.device, threads=timing.threads)}
    for name, row in rows.items():
        figures[f"{prefix}matmul_{n}_{name}_flops_per_s"] = row["flops_per_second"]
    for name in ("bfloat16", "float16"):
        # above 1: the format is faster than float32 on this device (tensor cores, AMX)
        figures[f"{prefix}speedup_{name}_over_float32"] = rows["float32"]["seconds"] / rows[name]["seconds"]
    return figures


def run() -> dict:
    figures = format_rates(512, "cpu")
    if torch.cuda.is_available():
        figures.update(format_rates(GPU_MATMUL_N, "cuda:0", prefix="gpu_"))
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(256, 256, generator=gen, dtype=torch.float64)
    b = torch.randn(256, 256, generator=gen, dtype=torch.float64)
    for name in ("bfloat16", "float16", "int8"):
        figures[f"relative_error_256_{name}"] = matmul_error(a, b, name)["relative_error"]
    x = np.random.default_rng(0).standard_normal((16, 16))
    start = time.perf_counter()
    run_ = simulate(x, x, "output", rows=16, record=False)
    elapsed = time.perf_counter() - start
    figures["systolic_sim_16x16_cycles"] = run_.cycles
    figures["systolic_sim_cycles_per_s"] = run_.cycles / elapsed
    return figures
