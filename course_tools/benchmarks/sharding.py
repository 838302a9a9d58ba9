"""Lesson 13: bytes each rank holds under ZeRO stages 0-3 and FSDP2, measured on the tensors of
real gloo (or NCCL) processes, against the memory formula
(:func:`course_lib.parallel.zero.memory_per_rank`); and the sharded runs' losses against one
process. Ratios measured/formula are 1 up to padding (our flat buffer is padded to N equal
shards; FSDP2 cuts every parameter along dim 0, so the largest rank can hold a few more
rows); ZeRO-3's bytes per rank should halve from 2 to 4 ranks (target ratio 2)."""
from __future__ import annotations

from course_lib.hardware import describe_device
from course_lib.parallel import zero

SIZES = (256, 1024, 1024, 10)
STEPS = 3


def _figures(world: int) -> dict:
    results = zero.compare(world, steps=STEPS, sizes=SIZES, batch=8, timeout=300)
    reference = zero.reference_losses(world, STEPS, SIZES, batch=8)
    n = results[0][0]["n_params"]
    out = {}
    worst_ratio_gap, worst_loss_gap = 0.0, 0.0
    for key in (0, 1, 2, 3, "fsdp2"):
        name = f"zero{key}" if key != "fsdp2" else "fsdp2"
        formula = zero.memory_per_rank(n, world, 3 if key == "fsdp2" else key, "fp32")
        measured = [sum(r[key]["bytes"].values()) for r in results]
        out[f"{world}proc_{name}_bytes_per_rank_measured_max"] = max(measured)
        out[f"{world}proc_{name}_bytes_per_rank_formula"] = formula["total"]
        ratio = max(measured) / formula["total"]
        out[f"{world}proc_{name}_measured_over_formula"] = ratio
        worst_ratio_gap = max(worst_ratio_gap, abs(ratio - 1.0))
        mean = [sum(r[key]["losses"][i] for r in results) / world for i in range(STEPS)]
        worst_loss_gap = max(worst_loss_gap, max(abs(a - b) for a, b in zip(mean, reference)))
    out[f"{world}proc_worst_abs_measured_over_formula_minus_1"] = worst_ratio_gap
    out[f"{world}proc_worst_loss_gap_vs_one_process"] = worst_loss_gap
    out[f"{world}proc_device"] = describe_device(results[0]["device"], threads=1)
    return out, n


def run() -> dict:
    two, n = _figures(2)
    four, _ = _figures(4)
    figures = {"n_params": n, "precision": "fp32 Adam: 4 + 4 + 8 bytes per parameter", **two, **four}
    figures["zero3_bytes_2proc_over_4proc"] = (two["2proc_zero3_bytes_per_rank_measured_max"]
                                              / four["4proc_zero3_bytes_per_rank_measured_max"])
    figures["zero3_bytes_2proc_over_4proc_target"] = 2.0
    return figures
