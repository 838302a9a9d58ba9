"""Lesson 12's figures: matmul speed per number format, int8 error, systolic simulator speed."""
from __future__ import annotations

import time


def run() -> dict:
    import numpy as np
    import torch

    from course_lib.hardware import device_label
    from course_lib.precision import matmul_error, time_matmul_by_format
    from course_lib.systolic import simulate

    rows = {r["format"]: r for r in time_matmul_by_format(512)}
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(256, 256, generator=gen, dtype=torch.float64)
    b = torch.randn(256, 256, generator=gen, dtype=torch.float64)
    figures = {"device": device_label()}
    for name, row in rows.items():
        figures[f"matmul_512_{name}_flops_per_s"] = row["flops_per_second"]
    for name in ("bfloat16", "float16"):
        # above 1: the format is faster than float32 on this device (tensor cores, AMX)
        figures[f"speedup_{name}_over_float32"] = rows["float32"]["seconds"] / rows[name]["seconds"]
    for name in ("bfloat16", "float16", "int8"):
        figures[f"relative_error_256_{name}"] = matmul_error(a, b, name)["relative_error"]
    x = np.random.default_rng(0).standard_normal((16, 16))
    start = time.perf_counter()
    run_ = simulate(x, x, "output", rows=16, record=False)
    elapsed = time.perf_counter() - start
    figures["systolic_sim_16x16_cycles"] = run_.cycles
    figures["systolic_sim_cycles_per_s"] = run_.cycles / elapsed
    return figures
