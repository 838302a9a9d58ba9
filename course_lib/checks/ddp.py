"""The check behind lesson 10's graded DDP step: run the student's
``step(ddp_model, X, y, optimizer) -> loss`` on 2 gloo processes and compare the parameters
with one process doing plain SGD on the whole batch (written out by hand, not taken from the
library, so the check does not contain the exercise's answer).
"""
from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

from ..parallel.launch import _resolve, init_process_group, job_for, launch



def _step_problem(world: int, seed: int = 1):
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
    X = torch.randn(8 * world, 6)
    y = torch.randint(0, 3, (8 * world,))
    return model, X, y


def step_worker(step_job, lr: float = 0.1, steps: int = 2, seed: int = 1) -> dict:
    """Run the shipped student function ``step(ddp_model, X, y, optimizer) -> loss`` on this
    rank's half of a fixed batch; return the parameters after ``steps`` steps and the losses."""
    rank, world, _ = init_process_group("gloo", timeout=20)
    step = _resolve(step_job)
    model, X, y = _step_problem(world, seed)
    ddp_model = DDP(model)
    optimizer = torch.optim.SGD(ddp_model.parameters(), lr=lr)
    mine = slice(rank * len(X) // world, (rank + 1) * len(X) // world)
    losses = [float(step(ddp_model, X[mine], y[mine], optimizer)) for _ in range(steps)]
    params = [p.detach().clone() for p in model.parameters()]
    dist.destroy_process_group()
    return {"params": params, "losses": losses}


def reference_step_params(world: int = 2, lr: float = 0.1, steps: int = 2, seed: int = 1):
    """What :func:`step_worker` must produce: one process, SGD on the whole batch.

    The update is written out rather than taken from ``torch.optim``: a first
    ``optimizer.step()`` imports ``torch._dynamo``, which rebinds ``torch.manual_seed``, and
    the sandboxed grader would take that for tampering."""
    model, X, y = _step_problem(world, seed)
    for _ in range(steps):
        model.zero_grad()
        F.cross_entropy(model(X), y).backward()
        with torch.no_grad():
            for p in model.parameters():
                p -= lr * p.grad
    return [p.detach().clone() for p in model.parameters()]


def check_step(step, world: int = 2, timeout: float = 60.0) -> dict:
    """Run ``step`` (a function, possibly defined in a notebook) in ``world`` gloo processes.

    Returns ``{"max_error": largest difference to the one-process reference,
    "rank_difference": largest difference between ranks, "losses": per rank}``.
    """
    results = launch(step_worker, world, job_for(step), timeout=timeout)
    expected = reference_step_params(world)
    error = max(float((a - b).abs().max()) for r in results for a, b in zip(r["params"], expected))
    spread = max(float((a - b).abs().max()) for r in results[1:]
                 for a, b in zip(r["params"], results[0]["params"]))
    return {"max_error": error, "rank_difference": spread, "losses": [r["losses"] for r in results]}
