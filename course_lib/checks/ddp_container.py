"""The check behind lesson 10's graded DDP container: run the student's ``DDP(module)`` class
(an ``nn.Module`` whose per-parameter hooks all-reduce each gradient during backward, and whose
``finish_gradient_synchronization()`` waits and averages) on gloo processes, and judge what
they send back here.

:func:`ddp_worker` (in each worker, which runs the student's code) starts from its own rank's
parameters and buffers (ranks differ: only a broadcast at construction makes them equal),
wraps the model, trains a few SGD steps on its share of each batch (one step leaves a layer
unused), and sends back raw data only: the parameters and buffers after construction and at the
end, and every ``dist.all_reduce`` it issued (bytes, asynchronous or not, issued during backward
or after, :class:`course_lib.parallel.overlap.AllReduceLog`). torch's own
``DistributedDataParallel`` is switched off there.

:func:`check_ddp` (in the caller, the grader's checker when grading) draws the model, the
starting states and the data from a fresh secret seed, computes the one-process training on the
whole batch and the all-reduces an exact container issues (one per parameter that received a
gradient in the step, a tied weight once, a frozen one never), and every difference.

The all-reduce log is observed inside the worker, so it is as trustworthy as the worker: code
that rewrites ``dist.all_reduce`` again can misreport it. The parameters and buffers cannot be
misreported that way: they are compared with the caller's own training.
"""
from __future__ import annotations

import secrets

import torch
import torch.nn.functional as F
from torch import nn

from ..parallel import overlap
from ..parallel.launch import PerRank, init_process_group, job_for, launch
from ..parallel.worker import resolve
from .shipped import once_per_submission, shippable, switch_off
from .unanswered import refuse_unanswered
from .worker_results import MalformedResult, difference, worst

LR = 0.2
SCHEDULE = (True, False, True)   # per step: whether the model's extra layer is used
ALL_USED = (True, True, True)    # the bucketed container's steps: every parameter gets a gradient


def _tensors(model: nn.Module) -> list:
    """Parameters (a tied one once) then buffers."""
    return list(model.parameters()) + list(model.buffers())


def ddp_worker(job, model_name: str, state: dict, shares: list, schedule=SCHEDULE, lr: float = LR,
               bucket_size_mb: float | None = None) -> dict:
    """Worker: the model with this rank's starting ``state``, wrapped in the shipped class (given
    ``bucket_size_mb`` when not None), one SGD step per ``(X, y)`` of ``shares`` (this rank's part
    of each batch) and ``schedule`` (whether the extra layer is used). Returns ``{"constructed":
    tensors after construction, "final": tensors at the end, "calls": all-reduces per step}``."""
    init_process_group("gloo", timeout=60)
    switch_off(nn.parallel.DistributedDataParallel)
    container = resolve(job)
    model = overlap.make_model(model_name, 0)
    model.load_state_dict(state)
    log = overlap.AllReduceLog()
    try:
        wrapped = container(model) if bucket_size_mb is None else container(model, bucket_size_mb=bucket_size_mb)
        constructed = [t.detach().clone() for t in _tensors(model)]
        for (X, y), use_extra in zip(shares, schedule):
            log.backward(F.cross_entropy(wrapped(X, use_extra=use_extra), y))
            wrapped.finish_gradient_synchronization()
            overlap.sgd_update(model, lr)
    finally:
        log.remove()
    return {"constructed": constructed, "final": [t.detach().clone() for t in _tensors(model)], "calls": log.steps}


def _starting_states(model_name: str, world: int, seed: int) -> list[dict]:
    """Rank 0's freshly initialised state, and for every other rank the same perturbed (a tied
    weight stays tied)."""
    states = []
    for rank in range(world):
        model = overlap.make_model(model_name, seed)
        gen = torch.Generator().manual_seed(seed + rank)
        with torch.no_grad():
            for t in _tensors(model) if rank else ():
                t += 0.5 * torch.randn(t.shape, generator=gen)
        states.append({k: v.detach().clone() for k, v in model.state_dict().items()})
    return states


def reference_training(model_name: str, state: dict, batches: list, schedule=SCHEDULE, lr: float = LR):
    """One process from ``state``, one SGD step per whole batch. Returns (tensors at the end,
    [(parameters that received a gradient, their bytes) per step])."""
    model = overlap.make_model(model_name, 0)
    model.load_state_dict(state)
    expected = []
    for (X, y), use_extra in zip(batches, schedule):
        F.cross_entropy(model(X, use_extra=use_extra), y).backward()
        grads = [p.grad for p in model.parameters() if p.grad is not None]
        expected.append((len(grads), sum(g.numel() * g.element_size() for g in grads)))
        overlap.sgd_update(model, lr)
    return [t.detach().clone() for t in _tensors(model)], expected


def bucket_bytes(model_name: str, bucket_size_mb: float) -> list[int]:
    """Bytes of each bucket of the bucketed container: the parameters that require a gradient,
    in reverse model order, each added to the current bucket, which closes once it holds at least
    ``bucket_size_mb`` MiB (exercise 4's rule with one cap); the last bucket may hold less."""
    cap, buckets, filled = bucket_size_mb * 2**20, [], 0
    for p in reversed([p for p in overlap.make_model(model_name, 0).parameters() if p.requires_grad]):
        filled += p.numel() * p.element_size()
        if filled >= cap:
            buckets.append(filled)
            filled = 0
    return buckets + ([filled] if filled else [])


def _raw(result, rank: int, shapes: list, steps: int) -> dict:
    """A worker's raw data, checked for kind before anything is computed from it."""
    def refuse(what):
        raise MalformedResult(f"rank {rank} sent back malformed data ({what})")

    if type(result) is not dict or set(result) != {"constructed", "final", "calls"}:
        refuse("not the dict ddp_worker returns")
    for key in ("constructed", "final"):
        got = result[key]
        if type(got) is not list or len(got) != len(shapes) or not all(
                type(t) in (torch.Tensor, nn.Parameter) and t.is_floating_point() and tuple(t.shape) == s
                for t, s in zip(got, shapes)):
            refuse(key)
    calls = result["calls"]
    if type(calls) is not list or len(calls) != steps or not all(
            type(step) is list and all(type(c) is list and len(c) == 4 and type(c[0]) is int and type(c[1]) is bool
                                       and type(c[2]) is bool and type(c[3]) is float for c in step)
            for step in calls):
        refuse("all-reduce log")
    return result


def check_ddp(ddp_class, world: int = 2, model: str = "tied", batch: int = 6, timeout: float = 60.0,
              bucket_size_mb: float | None = None) -> dict:
    """Run a notebook's ``DDP`` class on ``world`` gloo processes (3 SGD steps of ``batch`` examples
    per rank on model ``model`` of :mod:`course_lib.parallel.overlap`; the second step leaves a
    layer unused, except for a bucketed class: ``bucket_size_mb`` given) and judge what comes
    back. Returns ``{"broadcast_error": largest difference of any rank's parameters and buffers
    after construction from rank 0's, "max_error": of the
    final ones from one process training on the whole batches, "rank_difference",
    "allreduces": [[calls per step] per rank], "expected_allreduces": [per step], "bytes": [[bytes
    all-reduced per step] per rank], "expected_bytes", "asynchronous": every call had
    async_op=True, "first_in_backward": [[the step's first all-reduce issued before backward
    ended] per rank], "call_bytes": [[the sizes of a step's all-reduces, sorted] per step] per rank,
    "expected_call_bytes": [per step] (one per gradient, or per bucket: :func:`bucket_bytes`),
    "calls": the raw log per rank}``. In the grader's checker, a second call with the same class text
    and arguments returns the first's result (:func:`.shipped.once_per_submission`)."""
    shipped = shippable(ddp_class)
    refuse_unanswered(shipped)   # its workers would end with a traceback of their own
    return once_per_submission(shipped, (world, model, batch, bucket_size_mb),
                               lambda: _run(shipped, world, model, batch, timeout, bucket_size_mb))


def _run(shipped, world: int, model: str, batch: int, timeout: float, bucket_size_mb: float | None) -> dict:
    """:func:`check_ddp`'s run: fresh data, the workers, the reference and the judgement."""
    seed = secrets.randbits(31)
    states = _starting_states(model, world, seed)
    schedule = SCHEDULE if bucket_size_mb is None else ALL_USED
    batches = [overlap.make_batch(model, batch * world, seed + 100 + step) for step in range(len(schedule))]
    shares = PerRank([[(X[r * batch:(r + 1) * batch], y[r * batch:(r + 1) * batch]) for X, y in batches]
                      for r in range(world)])
    results = launch(ddp_worker, world, job_for(shipped), model, PerRank(states), shares, schedule, timeout=timeout,
                     bucket_size_mb=bucket_size_mb)
    expected_final, expected = reference_training(model, states[0], batches, schedule)
    if bucket_size_mb is None:
        expected_sizes = [sorted(sizes) for sizes in _gradient_bytes(model, states[0], batches, schedule)]
    else:
        expected_sizes = [sorted(bucket_bytes(model, bucket_size_mb))] * len(schedule)
        expected = [(len(sizes), sum(sizes)) for sizes in expected_sizes]
    start = [t.detach().clone() for t in _tensors(_loaded(model, states[0]))]
    raw = [_raw(r, rank, [tuple(t.shape) for t in start], len(schedule)) for rank, r in enumerate(results)]
    return {"broadcast_error": worst(difference(a, b) for r in raw for a, b in zip(r["constructed"], start)),
            "max_error": worst(difference(a, b) for r in raw for a, b in zip(r["final"], expected_final)),
            "rank_difference": worst(difference(a, b) for r in raw[1:] for a, b in zip(r["final"], raw[0]["final"])),
            "allreduces": [[len(step) for step in r["calls"]] for r in raw],
            "expected_allreduces": [n for n, _ in expected],
            "bytes": [[sum(c[0] for c in step) for step in r["calls"]] for r in raw],
            "expected_bytes": [b for _, b in expected],
            "asynchronous": all(c[1] for r in raw for step in r["calls"] for c in step),
            "first_in_backward": [[bool(step) and step[0][2] for step in r["calls"]] for r in raw],
            "call_bytes": [[sorted(c[0] for c in step) for step in r["calls"]] for r in raw],
            "expected_call_bytes": expected_sizes,
            "calls": [r["calls"] for r in raw]}


def _gradient_bytes(model_name: str, state: dict, batches: list, schedule) -> list[list[int]]:
    """Bytes of each gradient that one process's backward produces, per step."""
    model = _loaded(model_name, state)
    sizes = []
    for (X, y), use_extra in zip(batches, schedule):
        model.zero_grad(set_to_none=True)
        F.cross_entropy(model(X, use_extra=use_extra), y).backward()
        sizes.append([p.grad.numel() * p.grad.element_size() for p in model.parameters() if p.grad is not None])
    return sizes


def _loaded(model_name: str, state: dict) -> nn.Module:
    model = overlap.make_model(model_name, 0)
    model.load_state_dict(state)
    return model
