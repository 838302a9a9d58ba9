"""The check behind lesson 10's graded DDP step with gradient accumulation: run the
student's ``accumulate_step(ddp_model, micro_batches, optimizer) -> loss`` on 2 gloo processes
and compare the parameters with one process doing plain SGD on the whole batch (written out by
hand, not taken from the library, so the check does not contain the exercise's answer).

A communication hook counts the allreduces DDP launches in every step: accumulating over
micro-batches needs exactly one synchronization per optimizer step (``model.no_sync()`` for
all micro-batches but the last), not one per micro-batch.
"""
from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

from ..parallel.launch import _resolve, init_process_group, job_for, launch


def _step_problem(world: int, micro: int, seed: int = 1):
    """A small model and a batch of ``4 * micro`` examples per rank."""
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
    n = 4 * micro * world
    return model, torch.randn(n, 6), torch.randint(0, 3, (n,))


def step_worker(step_job, lr: float = 0.1, steps: int = 2, micro: int = 3, seed: int = 1) -> dict:
    """Run the shipped student function on this rank's share of a fixed batch, cut into
    ``micro`` micro-batches; return the parameters after ``steps`` steps, the losses it
    returned, the mean loss of the first step computed here, and the allreduces per step."""
    rank, world, _ = init_process_group("gloo", timeout=60)
    step = _resolve(step_job)
    model, X, y = _step_problem(world, micro, seed)
    per_rank = len(X) // world
    mine_X, mine_y = X[rank * per_rank:(rank + 1) * per_rank], y[rank * per_rank:(rank + 1) * per_rank]
    with torch.no_grad():
        first_loss = float(F.cross_entropy(model(mine_X), mine_y))
    ddp_model = DDP(model)
    launched = [0]

    def counting_allreduce(state, bucket):
        launched[0] += 1
        future = dist.all_reduce(bucket.buffer(), async_op=True).get_future()
        return future.then(lambda fut: fut.value()[0] / world)

    ddp_model.register_comm_hook(None, counting_allreduce)
    optimizer = torch.optim.SGD(ddp_model.parameters(), lr=lr)
    batches = list(zip(mine_X.chunk(micro), mine_y.chunk(micro)))
    losses, allreduces = [], []
    for _ in range(steps):
        before = launched[0]
        loss = step(ddp_model, batches, optimizer)
        losses.append(float(loss.detach() if torch.is_tensor(loss) else loss))
        allreduces.append(launched[0] - before)
    params = [p.detach().clone() for p in model.parameters()]
    dist.barrier()
    del ddp_model
    dist.destroy_process_group()
    return {"params": params, "losses": losses, "first_loss": first_loss, "allreduces": allreduces}


def reference_step_params(world: int = 2, micro: int = 3, lr: float = 0.1, steps: int = 2,
                          seed: int = 1):
    """What :func:`step_worker` must produce: one process, SGD on the whole batch.

    The update is written out rather than taken from ``torch.optim``: a first
    ``optimizer.step()`` imports ``torch._dynamo``, which rebinds ``torch.manual_seed``, and
    the sandboxed grader would take that for tampering."""
    model, X, y = _step_problem(world, micro, seed)
    for _ in range(steps):
        model.zero_grad()
        F.cross_entropy(model(X), y).backward()
        with torch.no_grad():
            for p in model.parameters():
                p -= lr * p.grad
    return [p.detach().clone() for p in model.parameters()]


def check_step(step, world: int = 2, micro: int = 3, timeout: float = 60.0) -> dict:
    """Run ``step`` (a function, possibly defined in a notebook) in ``world`` gloo processes,
    two optimizer steps of ``micro`` micro-batches each.

    Returns ``{"max_error": largest difference to the one-process reference,
    "rank_difference": largest difference between ranks, "losses": per rank,
    "loss_error": largest difference between a rank's first returned loss and its mean loss,
    "allreduces": allreduces DDP launched in each step, per rank}``.
    """
    results = launch(step_worker, world, job_for(step), micro=micro, timeout=timeout)
    expected = reference_step_params(world, micro)
    error = max(float((a - b).abs().max()) for r in results for a, b in zip(r["params"], expected))
    spread = max(float((a - b).abs().max()) for r in results[1:]
                 for a, b in zip(r["params"], results[0]["params"]))
    return {"max_error": error, "rank_difference": spread,
            "losses": [r["losses"] for r in results],
            "loss_error": max(abs(r["losses"][0] - r["first_loss"]) for r in results),
            "allreduces": [r["allreduces"] for r in results]}
