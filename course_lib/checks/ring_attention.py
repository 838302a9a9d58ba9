"""The check behind lesson 17's graded ring attention: run the student's ``fn(q, k, v, causal)``
on gloo processes, rank r holding chunk r of the sequence's queries, keys and values, with the
collectives switched off (send, recv, isend and irecv only), and compare the outputs put back in
order with ``torch.nn.functional.scaled_dot_product_attention`` on the whole sequence.

Split as lessons 10, 11 and 13's checks are: :func:`ring_worker` (in each worker, beside the
student's code) calls the function and sends back raw data only; :func:`check_ring_attention`
(in the calling process, the grader's checker when grading) draws the inputs from a fresh secret
seed, computes the reference in float64 and every difference itself. Each worker receives only
its own chunk (``launch.PerRank``). This module does not import
:mod:`course_lib.parallel.ring_attention`, so a worker sees it when the student's function does.
"""
from __future__ import annotations

import secrets
import sys

import torch
import torch.nn.functional as F

from ..parallel.launch import PerRank, init_process_group, job_for, launch
from ..parallel.worker import resolve
from .unanswered import refuse_unanswered
from .worker_results import MalformedResult, difference, worst


def ring_worker(job, problems: list) -> dict:
    """Worker: for each ``(q, k, v, causal)`` of ``problems`` (this rank's chunk only), call the
    shipped function with only point-to-point communication allowed. Returns raw data only:
    ``{"outputs": [tensor or type name], "library_modules": [str]}``."""
    init_process_group("gloo", timeout=30)
    loaded_before = set(sys.modules)
    fn = resolve(job, point_to_point_only=True)
    outputs = []
    for q, k, v, causal in problems:
        y = fn(q.clone(), k.clone(), v.clone(), causal)
        outputs.append(y.detach().cpu().as_subclass(torch.Tensor).clone() if torch.is_tensor(y)
                       else f"an object of type {type(y).__name__}")
    library = sorted(m for m in set(sys.modules) - loaded_before if m.split(".")[0] == "course_lib")
    return {"outputs": outputs, "library_modules": library}


def _raw(result, rank: int, n: int) -> dict:
    """A worker's raw data, checked for kind before anything is computed from it."""
    if (type(result) is not dict or set(result) != {"outputs", "library_modules"}
            or type(result["outputs"]) is not list or len(result["outputs"]) != n
            or not all(type(y) in (torch.Tensor, str) for y in result["outputs"])
            or type(result["library_modules"]) is not list
            or not all(type(m) is str for m in result["library_modules"])):
        raise MalformedResult(f"rank {rank} sent back malformed data (not the dict ring_worker returns)")
    return result


def check_ring_attention(fn, world_size: int = 2, sizes=((3, 2, 4),), timeout: float = 60.0) -> dict:
    """Run ``fn(q, k, v, causal)`` on ``world_size`` gloo processes (one launch), for every size
    ``(chunk, heads, d)`` of ``sizes``: each rank is given its contiguous chunk of ``chunk``
    positions of float64 ``q``, ``k``, ``v`` (heads, world_size * chunk, d), without and with a
    causal mask. Returns ``error`` and ``causal_error`` (worst difference over the sizes of the
    outputs, chunk r from rank r, from SDPA on the whole sequence; inf for a wrong shape or no
    tensor) and ``library_modules``."""
    gen = torch.Generator().manual_seed(secrets.randbits(63))
    problems, inputs = [], [[] for _ in range(world_size)]
    for chunk, heads, d in sizes:
        n = world_size * chunk
        q, k, v = (torch.randn(heads, n, d, generator=gen, dtype=torch.float64) for _ in range(3))
        # larger scores in some rows: a merge that forgets to rescale is far off, not nearly right
        q = q * torch.linspace(0.5, 4.0, n, dtype=torch.float64)[None, :, None]
        parts = [slice(r * chunk, (r + 1) * chunk) for r in range(world_size)]
        problems.append((q, k, v, parts))
        for r, part in enumerate(parts):
            inputs[r] += [(q[:, part], k[:, part], v[:, part], causal) for causal in (False, True)]
    refuse_unanswered(fn)   # its workers would end with a traceback of their own
    results = launch(ring_worker, world_size, job_for(fn), PerRank(inputs), timeout=timeout)
    raw = [_raw(r, rank, 2 * len(sizes)) for rank, r in enumerate(results)]
    errors = {False: [], True: []}
    for i, (q, k, v, parts) in enumerate(problems):
        for j, causal in enumerate((False, True)):
            reference = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            errors[causal] += [difference(raw[r]["outputs"][2 * i + j], reference[:, parts[r]])
                               for r in range(world_size)]
    return {"error": worst(errors[False]), "causal_error": worst(errors[True]),
            "library_modules": sorted({m for r in raw for m in r["library_modules"]})}
