"""The check behind lesson 11's graded allreduce: run the student's ``fn(tensor)`` on several
gloo processes (shipped as source, see :func:`course_lib.parallel.launch.job_for`) and compare
with ``dist.all_reduce``.

The task is an allreduce *in place*: afterwards the tensor the function was given holds the
sum, and the function returns that same tensor. The check therefore measures three things
separately: the value returned, the value left in the input tensor, and whether the returned
object is the input. With ``point_to_point_only`` the function's ``dist`` refuses the built-in
collectives, and the check records every ``course_lib`` module the function imported (the
library's own allreduces are not an answer).
"""
from __future__ import annotations

import sys

import torch
import torch.distributed as dist

from ..parallel.launch import _resolve, init_process_group, job_for, launch


def _shape(size) -> tuple[int, ...]:
    return tuple(size) if isinstance(size, (tuple, list)) else (int(size),)


def student_worker(job, sizes: list, seed: int = 0, point_to_point_only: bool = True) -> dict:
    """Worker: run a shipped allreduce function (see :func:`launch.job_for`) on random float64
    tensors of the given sizes (an int, or a shape tuple) and compare with ``dist.all_reduce``.

    Returns ``{"error": worst difference of the returned value (inf when it has the wrong
    shape; the input tensor when the function returned None), "in_place_error": worst
    difference of the input tensor after the call, "returns_input": every call returned the
    very tensor it was given, "library_modules": course_lib modules it imported}``."""
    rank, _, _ = init_process_group("gloo", timeout=60)
    fn = _resolve(job, point_to_point_only)
    loaded_before = set(sys.modules)
    error = in_place_error = 0.0
    returns_input = True
    for size in sizes:
        shape = _shape(size)
        gen = torch.Generator().manual_seed(seed + 1000 * rank + sum(shape) + len(shape))
        x = torch.randn(shape, generator=gen, dtype=torch.float64)
        expected = x.clone()
        dist.all_reduce(expected)
        got = fn(x)
        returns_input = returns_input and got is x
        got = x if got is None else got
        if not torch.is_tensor(got) or got.shape != expected.shape:
            error = float("inf")
        elif x.numel():
            error = max(error, float((got - expected).abs().max()))
        if x.numel():
            in_place_error = max(in_place_error, float((x - expected).abs().max()))
    library = sorted(m for m in set(sys.modules) - loaded_before if m.split(".")[0] == "course_lib")
    dist.destroy_process_group()
    return {"error": error, "in_place_error": in_place_error, "returns_input": returns_input,
            "library_modules": library}


def check_allreduce(fn, world_size: int = 3, sizes=(1, 5, 12, 100), timeout: float = 60.0,
                    point_to_point_only: bool = True) -> dict:
    """Run ``fn(tensor)`` (a function from a notebook, shipped as source) on ``world_size``
    gloo processes, on every size in ``sizes`` (ints or shape tuples).

    Returns, over all ranks and sizes: ``error`` (worst difference of the returned value from
    ``dist.all_reduce``), ``in_place_error`` (the same for the tensor passed in, after the
    call), ``returns_input`` (always returned the tensor it was given) and
    ``library_modules`` (``course_lib`` modules the function imported). With
    ``point_to_point_only`` the function may use only send/recv."""
    results = launch(student_worker, world_size, job_for(fn), [_shape(s) for s in sizes],
                     point_to_point_only=point_to_point_only, timeout=timeout)
    return {"error": max(r["error"] for r in results),
            "in_place_error": max(r["in_place_error"] for r in results),
            "returns_input": all(r["returns_input"] for r in results),
            "library_modules": sorted({m for r in results for m in r["library_modules"]})}
