"""The check behind lesson 10's graded DDP step with gradient accumulation: run the
student's ``accumulate_step(ddp_model, micro_batches, optimizer) -> loss`` on 2 gloo processes
and compare the parameters with one process doing plain SGD on the whole batch (written out by
hand, not taken from the library, so the check does not contain the exercise's answer).

The work is split in two, because the worker processes run the student's code:

* :func:`step_worker` (in each worker) trains on the data it is given and sends back raw
  observations only: the parameters after the steps, the losses the function returned, and the
  allreduces DDP launched in each step (counted by a communication hook);
* :func:`check_step` (in the calling process, the grader's checker when grading) chooses the
  model and data, computes every expected value itself (the one-process training, each rank's
  mean loss) and every difference, and reads the workers' results only as plain data
  (:func:`course_lib.parallel.launch.read_result`).

Each worker receives the starting parameters and its own rank's share of the batch, nothing of
the other ranks' (``launch.PerRank``), drawn from a seed chosen afresh by the checker for each
check (never a fixed one the function could replay): a step that trains on the whole batch
without DDP's communication cannot find it.

Accumulating over micro-batches needs exactly one synchronization per optimizer step
(``model.no_sync()`` for all micro-batches but the last), not one per micro-batch. That count
is observed inside a worker, so it is as trustworthy as the worker: code that rewrites the
worker's hook can misreport it. The parameters cannot be misreported that way: they are
compared with the caller's own training.
"""
from __future__ import annotations

import secrets

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

from ..parallel.launch import PerRank, init_process_group, job_for, launch
from ..parallel.worker import resolve
from .unanswered import refuse_unanswered
from .worker_results import MalformedResult, difference, worst

LR, STEPS = 0.1, 2  # SGD learning rate, optimizer steps


def _model() -> nn.Module:
    return nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))


def _step_problem(world: int, micro: int, seed: int):
    """A small model and a batch of ``4 * micro`` examples per rank, drawn from ``seed`` (the
    global random state is left as it was)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = _model()
        n = 4 * micro * world
        return model, torch.randn(n, 6), torch.randint(0, 3, (n,))


def _share(X, y, rank: int, world: int):
    per_rank = len(X) // world
    return X[rank * per_rank:(rank + 1) * per_rank], y[rank * per_rank:(rank + 1) * per_rank]


def step_worker(step_job, initial: list, share: tuple, lr: float = LR, steps: int = STEPS, micro: int = 3) -> dict:
    """Worker: wrap a model holding the ``initial`` parameters in DDP, run the shipped student
    function ``steps`` times on this rank's ``share = (X, y)`` of the batch (the only part of it
    that reaches this process) cut into ``micro`` micro-batches.

    Returns raw data only: ``{"params": the parameters afterwards (tensors), "losses": what the
    function returned in each step (floats), "allreduces": allreduces DDP launched in each
    step (ints)}``."""
    _, world, _ = init_process_group("gloo", timeout=60)
    step = resolve(step_job)
    model = _model()
    with torch.no_grad():
        for p, value in zip(model.parameters(), initial):
            p.copy_(value)
    mine_X, mine_y = share
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
    return {"params": params, "losses": losses, "allreduces": allreduces}


def reference_step_params(world: int, micro: int, lr: float, steps: int, seed: int):
    """What :func:`step_worker` must produce: one process, SGD on the whole batch of the
    problem drawn from ``seed`` (:func:`_step_problem`).

    The update (``p -= lr * p.grad``) is written out rather than taken from ``torch.optim``, as
    the module says: the check holds plain SGD, not the exercise's answer."""
    model, X, y = _step_problem(world, micro, seed)
    for _ in range(steps):
        model.zero_grad()
        F.cross_entropy(model(X), y).backward()
        with torch.no_grad():
            for p in model.parameters():
                p -= lr * p.grad
    return [p.detach().clone() for p in model.parameters()]


def _raw_step(result, rank: int, shapes: list, steps: int) -> dict:
    """A worker's raw data, checked for kind and shape before anything is computed from it."""
    def refuse(what):
        raise MalformedResult(f"rank {rank} sent back malformed data ({what})")

    if type(result) is not dict or set(result) != {"params", "losses", "allreduces"}:
        refuse("not the dict step_worker returns")
    params, losses, allreduces = result["params"], result["losses"], result["allreduces"]
    if type(params) is not list or len(params) != len(shapes) or not all(
            type(p) in (torch.Tensor, nn.Parameter) and p.is_floating_point() and tuple(p.shape) == s
            for p, s in zip(params, shapes)):
        refuse("parameters")
    if type(losses) is not list or len(losses) != steps or not all(type(v) in (int, float) for v in losses):
        refuse("losses")
    if type(allreduces) is not list or len(allreduces) != steps or not all(type(v) is int for v in allreduces):
        refuse("allreduce counts")
    return {"params": [p.detach().to(torch.float64) for p in params], "losses": [float(v) for v in losses],
            "allreduces": list(allreduces)}


def check_step(step, world: int = 2, micro: int = 3, timeout: float = 60.0) -> dict:
    """Run ``step`` (a function defined in a notebook, or the grader's stand-in for one) in
    ``world`` gloo processes, two optimizer steps of ``micro`` micro-batches each, and judge
    what they send back here.

    Returns ``{"max_error": largest difference to the one-process reference,
    "rank_difference": largest difference between ranks, "losses": per rank,
    "loss_error": largest difference between a rank's first returned loss and its mean loss,
    "allreduces": allreduces DDP launched in each step, per rank}``.
    """
    seed = secrets.randbits(63)   # fresh for each check, and known only here
    model, X, y = _step_problem(world, micro, seed)
    initial = [p.detach().clone() for p in model.parameters()]
    shares = PerRank([_share(X, y, rank, world) for rank in range(world)])
    refuse_unanswered(step)   # its workers would end with a traceback of their own
    results = launch(step_worker, world, job_for(step), initial, shares, lr=LR, steps=STEPS, micro=micro,
                     timeout=timeout)
    shapes = [tuple(p.shape) for p in initial]
    raw = [_raw_step(r, rank, shapes, STEPS) for rank, r in enumerate(results)]
    expected = reference_step_params(world, micro, LR, STEPS, seed)
    with torch.no_grad():
        first_loss = [float(F.cross_entropy(model(share_X), share_y))
                      for share_X, share_y in (_share(X, y, rank, world) for rank in range(world))]
    return {"max_error": worst(difference(a, b) for r in raw for a, b in zip(r["params"], expected)),
            "rank_difference": worst(difference(a, b) for r in raw[1:]
                                      for a, b in zip(r["params"], raw[0]["params"])),
            "losses": [r["losses"] for r in raw],
            "loss_error": worst(abs(r["losses"][0] - first_loss[rank]) for rank, r in enumerate(raw)),
            "allreduces": [r["allreduces"] for r in raw]}
