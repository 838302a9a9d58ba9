"""The check behind lesson 17's graded expert-parallel layer: run the student's
``fn(x, experts, gates, kept, local_weights)`` on gloo processes, each rank holding only its own
tokens, their routing and its own experts, and judge the output and the bytes sent.

Split as lessons 10, 11 and 13's checks are: :func:`dispatch_worker` (in each worker, beside the
student's code) calls the function under a :class:`course_lib.parallel.bytes_sent.BytesSent`
meter and sends back raw data only (the outputs, the bytes each call sent, the ``course_lib``
modules the function imported); :func:`check_expert_dispatch` (in the calling process, the
grader's checker when grading) draws every input from a fresh secret seed, routes the tokens,
computes the one-process layer in float64 and the analytic byte count itself, and reads the
workers' results only as plain data.

Each worker receives its own tokens and routing and its own experts' weights, nothing of the
other ranks' (``launch.PerRank``): a token reaches another rank only through a collective.
This module imports neither :mod:`course_lib.moe` nor :mod:`course_lib.parallel.expert_parallel`
at the top, so a worker sees it when the student's function imports them.
"""
from __future__ import annotations

import secrets
import sys

import torch

from ..parallel.launch import PerRank, init_process_group, job_for, launch
from ..parallel.worker import resolve
from .unanswered import refuse_unanswered
from .worker_results import MalformedResult, difference, worst


def dispatch_worker(job, problems: list) -> dict:
    """Worker: for each ``(x, experts, gates, kept, local_weights)`` of ``problems`` (this rank's
    only), call the shipped function under a byte meter. Returns raw data only:
    ``{"outputs": [tensor or type name], "float_bytes": [int], "other_bytes": [int],
    "library_modules": [str]}``."""
    from ..parallel.bytes_sent import BytesSent

    init_process_group("gloo", timeout=30)
    loaded_before = set(sys.modules)
    fn = resolve(job)
    outputs, float_bytes, other_bytes = [], [], []
    for x, experts, gates, kept, weights in problems:
        with BytesSent() as meter:
            y = fn(x.clone(), experts.clone(), gates.clone(), kept.clone(), weights.clone())
        outputs.append(y.detach().cpu().as_subclass(torch.Tensor).clone() if torch.is_tensor(y)
                       else f"an object of type {type(y).__name__}")
        float_bytes.append(meter.total(floating=True))
        other_bytes.append(meter.total(floating=False))
    library = sorted(m for m in set(sys.modules) - loaded_before if m.split(".")[0] == "course_lib")
    return {"outputs": outputs, "float_bytes": float_bytes, "other_bytes": other_bytes, "library_modules": library}


def _raw(result, rank: int, n: int) -> dict:
    """A worker's raw data, checked for kind before anything is computed from it."""
    if type(result) is not dict or set(result) != {"outputs", "float_bytes", "other_bytes", "library_modules"}:
        raise MalformedResult(f"rank {rank} sent back malformed data (not the dict dispatch_worker returns)")
    for key, kinds in (("outputs", (torch.Tensor, str)), ("float_bytes", (int,)), ("other_bytes", (int,)),
                       ("library_modules", (str,))):
        values = result[key]
        if type(values) is not list or (key != "library_modules" and len(values) != n) or not all(
                type(v) in kinds for v in values):
            raise MalformedResult(f"rank {rank} sent back malformed data ({key})")
    return result


def _problem(gen, world: int, tokens: int, d: int, per_rank: int, k: int, factor: float, skew: float):
    """Every rank's tokens (float32) and router logits, and the experts' weights; ``skew`` adds
    ``skew * i`` to expert i's logit (a router that prefers the last experts)."""
    n_experts = per_rank * world
    xs = [torch.randn(tokens, d, generator=gen) for _ in range(world)]
    bias = skew * torch.arange(n_experts, dtype=torch.float32)
    logits = [torch.randn(tokens, n_experts, generator=gen) + bias for _ in range(world)]
    weights = torch.randn(n_experts, d, d, generator=gen) / d ** 0.5
    return xs, logits, weights


def check_expert_dispatch(fn, world_size: int = 2, cases=((8, 6, 2, 2, 1.0, 0.0),), timeout: float = 60.0) -> dict:
    """Run ``fn`` on ``world_size`` gloo processes for every case ``(tokens per rank, d, experts
    per rank, k, capacity factor, skew)``, inputs drawn from a fresh secret seed and routed by
    :func:`course_lib.moe.top_k_route` on each rank's own tokens. Returns ``error`` (worst
    difference of a rank's output from the one-process layer :func:`course_lib.moe.moe_forward`
    in float64 over every expert; inf for a wrong shape or no tensor), ``bytes_sent`` and
    ``bytes_expected`` (floating-point bytes each rank sent to other ranks, measured, and
    :func:`course_lib.parallel.expert_parallel.all_to_all_bytes`, ``[case][rank]``),
    ``integer_bytes`` (what the integer tensors took, ``[case][rank]``), ``dropped`` (share of
    assignments dropped, per case) and ``library_modules``."""
    from ..moe import moe_forward, top_k_route
    from ..parallel.expert_parallel import all_to_all_bytes

    gen = torch.Generator().manual_seed(secrets.randbits(63))
    problems, inputs = [], [[] for _ in range(world_size)]
    for tokens, d, per_rank, k, factor, skew in cases:
        xs, logits, weights = _problem(gen, world_size, tokens, d, per_rank, k, factor, skew)
        routings = [top_k_route(lg, k, factor) for lg in logits]
        problems.append((xs, routings, weights, per_rank, d))
        for r in range(world_size):
            inputs[r].append((xs[r], routings[r].experts, routings[r].gates, routings[r].kept,
                              weights[r * per_rank:(r + 1) * per_rank]))
    refuse_unanswered(fn)   # its workers would end with a traceback of their own
    results = launch(dispatch_worker, world_size, job_for(fn), PerRank(inputs), timeout=timeout)
    raw = [_raw(r, rank, len(cases)) for rank, r in enumerate(results)]
    errors, expected = [], []
    for i, (xs, routings, weights, per_rank, d) in enumerate(problems):
        for rank in range(world_size):
            reference = moe_forward(xs[rank].double(), routings[rank], weights.double())
            errors.append(difference(raw[rank]["outputs"][i], reference))
        expected.append(all_to_all_bytes(routings, per_rank, d, element_bytes=4))
    return {"error": worst(errors), "bytes_expected": expected,
            "bytes_sent": [[raw[r]["float_bytes"][i] for r in range(world_size)] for i in range(len(cases))],
            "integer_bytes": [[raw[r]["other_bytes"][i] for r in range(world_size)] for i in range(len(cases))],
            "dropped": [sum(r.dropped_fraction() for r in p[1]) / world_size for p in problems],
            "library_modules": sorted({m for r in raw for m in r["library_modules"]})}
