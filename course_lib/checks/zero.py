"""The check behind lesson 13's graded sharded optimizer step: run the student's
``fn(param, grad, momentum_shard, lr, beta)`` on gloo processes, each rank holding only its
shard of the momentum, and compare with one process doing SGD with momentum on the mean
gradient.

The check is split in two, because the worker processes run the student's code:
``sharded_step_worker`` (in each worker) runs the function on the values it is given and
sends back raw data only (the parameters and the rank's momentum shard after every step);
``check_sharded_step`` (in the calling process, the grader's checker when grading) chooses
the values, computes the unsharded step and every difference itself, and reads the
workers' results only as plain data (``launch.read_result``), checked before use.

Each worker receives the starting parameters and its own rank's gradients, nothing of the other
ranks' (``launch.PerRank``), drawn from a seed chosen afresh by the checker for each check (never
a fixed one the function could replay): without communicating, no rank can know the mean.
"""
from __future__ import annotations

import math
import secrets

import torch
import torch.distributed as dist

from ..parallel.launch import PerRank, init_process_group, job_for, launch
from ..parallel.worker import resolve
from .unanswered import refuse_unanswered
from .worker_results import MalformedResult, difference, worst

STEPS, LR, BETA = 3, 0.1, 0.9  # steps per size, learning rate, momentum


def sharded_step_reference(param, grads, momentum, lr: float, beta: float):
    """SGD with momentum (PyTorch's rule, no dampening) on the mean of ``grads``:
    ``m = beta m + g``, ``p = p - lr m``. Returns new ``(param, momentum)``."""
    g = torch.stack(list(grads)).mean(0)
    momentum = beta * momentum + g
    return param - lr * momentum, momentum


def _owned_range(numel: int, rank: int, world: int) -> tuple[int, int]:
    """Elements ``lo ... hi`` of a ``numel``-element vector that rank ``rank`` of ``world``
    owns: shards of ``s = ceil(numel / world)``, the last ones short or empty."""
    s = math.ceil(numel / world)
    return min(rank * s, numel), min((rank + 1) * s, numel)


def sharded_step_problem(numel: int, world: int, steps: int = STEPS, seed: int | None = None):
    """The float64 starting parameters (``numel``) and the gradients ``[step][rank]`` that
    the ranks' functions are given, drawn from ``seed`` (by default a fresh secret one)."""
    gen = torch.Generator().manual_seed(secrets.randbits(63) if seed is None else seed)
    param = torch.randn(numel, generator=gen, dtype=torch.float64)
    grads = [[torch.randn(numel, generator=gen, dtype=torch.float64) for _ in range(world)]
             for _ in range(steps)]
    return param, grads


def _plain(tensor) -> torch.Tensor:
    return tensor.detach().cpu().as_subclass(torch.Tensor).clone()


def sharded_step_worker(job, problems: list, lr: float = LR, beta: float = BETA) -> dict:
    """Worker: for each ``(param, grads)`` of ``problems`` (the starting parameters and this
    rank's gradient for each step; other ranks' never reach this process), run a shipped
    ``fn(param, grad, momentum_shard, lr, beta)`` once per step on this rank's gradient, with a
    zero momentum shard of the rank's size (:func:`_owned_range`).

    Returns raw data only: ``{"params": [[the parameters after each step] per problem],
    "momenta": [[the momentum shard after each step] per problem]}`` (tensors)."""
    rank, world, _ = init_process_group("gloo", timeout=20)
    mine = [(param.clone(), [grad.clone() for grad in grads]) for param, grads in problems]
    fn = resolve(job)
    params, momenta = [], []
    for param, grads in mine:
        lo, hi = _owned_range(param.numel(), rank, world)
        momentum = torch.zeros(hi - lo, dtype=torch.float64)
        params.append([])
        momenta.append([])
        for grad in grads:
            fn(param, grad, momentum, lr, beta)
            params[-1].append(_plain(param))
            momenta[-1].append(_plain(momentum))
    dist.destroy_process_group()
    return {"params": params, "momenta": momenta}


def _raw_steps(result, rank: int, n_problems: int, steps: int) -> dict:
    """A worker's raw data, checked for kind before anything is computed from it (a tensor of
    another shape is the function's doing and is judged, not refused)."""
    def refuse(what):
        raise MalformedResult(f"rank {rank} sent back malformed data ({what})")

    def plain_tensor(t):
        return (type(t) is torch.Tensor and t.layout == torch.strided and t.device.type == "cpu"
                and t.is_floating_point())

    if type(result) is not dict or set(result) != {"params", "momenta"}:
        refuse("not the dict sharded_step_worker returns")
    for key in ("params", "momenta"):
        runs = result[key]
        if type(runs) is not list or len(runs) != n_problems or not all(
                type(run) is list and len(run) == steps and all(plain_tensor(t) for t in run) for run in runs):
            refuse(key)
    return result


def check_sharded_step(fn, world_size: int = 2, numels=(8, 10), timeout: float = 90.0) -> float:
    """Run a notebook's ``fn(param, grad, momentum_shard, lr, beta)`` (shipped as source) on
    ``world_size`` gloo processes, 3 steps for each size in ``numels``, and judge what they
    send back here: the worst absolute difference, over ranks, sizes and steps, of the
    parameters and of the rank's momentum shard from the unsharded SGD-with-momentum step
    (:func:`sharded_step_reference`); inf for a wrong shape, NaN when any value is NaN.
    Raises :class:`MalformedResult` when a worker sends back data of the wrong kind."""
    problems = [sharded_step_problem(numel, world_size) for numel in numels]
    per_rank = PerRank([[(param, [step[rank] for step in grads]) for param, grads in problems]
                        for rank in range(world_size)])
    refuse_unanswered(fn)   # its workers would end with a traceback of their own
    results = launch(sharded_step_worker, world_size, job_for(fn), per_rank, lr=LR, beta=BETA,
                     timeout=timeout)
    raw = [_raw_steps(r, rank, len(problems), STEPS) for rank, r in enumerate(results)]
    differences = []
    for i, (param, grads) in enumerate(problems):
        momentum = torch.zeros_like(param)
        for step, step_grads in enumerate(grads):
            param, momentum = sharded_step_reference(param, step_grads, momentum, LR, BETA)
            for rank, r in enumerate(raw):
                lo, hi = _owned_range(param.numel(), rank, world_size)
                differences.append(difference(r["params"][i][step], param))
                differences.append(difference(r["momenta"][i][step], momentum[lo:hi]))
    return worst(differences)
