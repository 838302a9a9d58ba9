"""The check behind lesson 11's graded allreduce: run the student's ``fn(tensor)`` on several
gloo processes (shipped as source, see :func:`course_lib.parallel.launch.job_for`) and compare
with ``dist.all_reduce``. With ``point_to_point_only`` the function's ``dist`` refuses the
built-in collectives.
"""
from __future__ import annotations

import torch
import torch.distributed as dist

from ..parallel.launch import _resolve, init_process_group, job_for, launch


def student_worker(job, sizes: list[int], seed: int = 0, point_to_point_only: bool = True) -> float:
    """Worker: run a shipped allreduce function (see :func:`launch.job_for`) on tensors of
    the given sizes and return its worst difference from ``dist.all_reduce``. With
    ``point_to_point_only`` the function's ``dist`` refuses the built-in collectives."""
    rank, _, _ = init_process_group("gloo", timeout=20)
    fn = _resolve(job, point_to_point_only)
    worst = 0.0
    for size in sizes:
        gen = torch.Generator().manual_seed(seed + 1000 * rank + size)
        x = torch.randn(size, generator=gen, dtype=torch.float64)
        expected = x.clone()
        dist.all_reduce(expected)
        got = fn(x)
        got = x if got is None else got
        if got.shape != expected.shape:
            worst = float("inf")
        elif size:
            worst = max(worst, float((got - expected).abs().max()))
    dist.destroy_process_group()
    return worst


def check_allreduce(fn, world_size: int = 3, sizes=(1, 5, 12, 100), timeout: float = 60.0,
                    point_to_point_only: bool = True) -> float:
    """Run ``fn(tensor)`` (a function from a notebook, shipped as source) on ``world_size``
    gloo processes; return the worst difference from ``dist.all_reduce`` over all ranks and
    sizes. With ``point_to_point_only`` the function may use only send/recv."""
    return max(launch(student_worker, world_size, job_for(fn), list(sizes),
                      point_to_point_only=point_to_point_only, timeout=timeout))
