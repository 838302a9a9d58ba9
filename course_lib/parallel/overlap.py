"""Overlapping the gradient all-reduce with backward (lesson 10): what a DDP container sends,
and when.

A DDP container starts each gradient's all-reduce while backward is still computing the
gradients of earlier layers. This module measures that for any container, on gloo processes:

- :class:`AllReduceLog` records every ``dist.all_reduce`` a rank issues (bytes, whether
  asynchronous, whether issued while ``backward`` was running, when), and, through a
  communication hook, every bucket torch's ``DistributedDataParallel`` sends;
- :func:`comm_worker` trains a small model for a few steps wrapped in ``"torch"`` (torch's DDP),
  ``"after_backward"`` (lesson 09's way: every gradient all-reduced once backward has ended, no
  overlap) or a container class shipped from a notebook, and returns that log per step;
  :func:`measure` runs it on ``k`` processes;
- :class:`TiedLM` and :class:`BranchMLP` are the small models the lesson trains: a weight
  reached twice (tied embedding and output layer), a frozen parameter, a buffer, and a branch
  that some steps do not use.

Times are ``time.perf_counter()`` seconds, relative to the start of the step's ``backward``.
"""
from __future__ import annotations

import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from .launch import init_process_group, job_for, launch
from .worker import resolve


class TiedLM(nn.Module):
    """A tiny language model: token embedding, a mixing layer, an optional extra layer, and an
    output layer whose weight *is* the embedding's (tied: one parameter reached twice). ``gain``
    is a frozen parameter (``requires_grad=False``), ``shift`` a buffer."""

    def __init__(self, vocab: int = 11, dim: int = 8):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.mix = nn.Linear(dim, dim)
        self.extra = nn.Linear(dim, dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        self.head.weight = self.embed.weight
        self.gain = nn.Parameter(torch.rand(dim) + 0.5, requires_grad=False)
        self.register_buffer("shift", 0.1 * torch.randn(dim))

    def forward(self, tokens, use_extra: bool = True):
        h = torch.tanh(self.mix(self.embed(tokens) * self.gain + self.shift))
        if use_extra:
            h = h + torch.tanh(self.extra(h))
        return self.head(h)


class BranchMLP(nn.Module):
    """A small classifier with a frozen first-layer bias, a buffer scaling the input, and a side
    layer used only when ``use_extra``."""

    def __init__(self, n_in: int = 5, hidden: int = 7, classes: int = 3):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(n_in, hidden), nn.Linear(hidden, hidden)
        self.side, self.out = nn.Linear(hidden, hidden), nn.Linear(hidden, classes)
        self.fc1.bias.requires_grad_(False)
        self.register_buffer("scale", torch.rand(n_in) + 0.5)

    def forward(self, x, use_extra: bool = True):
        h = torch.tanh(self.fc2(torch.tanh(self.fc1(x * self.scale))))
        if use_extra:
            h = h + torch.relu(self.side(h))
        return self.out(h)


MODELS = {"tied": TiedLM, "mlp": BranchMLP}


def make_model(name: str, seed: int) -> nn.Module:
    """A freshly initialised :data:`MODELS` model (the global random state is left as it was)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return MODELS[name]()


def make_batch(name: str, n: int, seed: int):
    """``n`` examples ``(inputs, targets)`` for model ``name``, drawn from ``seed``."""
    gen = torch.Generator().manual_seed(seed)
    if name == "tied":
        return torch.randint(0, 11, (n,), generator=gen), torch.randint(0, 11, (n,), generator=gen)
    return torch.randn(n, 5, generator=gen), torch.randint(0, 3, (n,), generator=gen)


class AllReduceLog:
    """Every all-reduce this rank issues, per step: ``[bytes, async_op, in_backward, seconds]``
    (seconds after the step's backward started). Installed on ``dist.all_reduce`` (what the
    notebook's ``dist`` names) until :meth:`remove`."""

    def __init__(self):
        self.steps, self.backward_seconds = [], []
        self.in_backward, self.start = False, time.perf_counter()
        self.original = dist.all_reduce
        dist.all_reduce = self._all_reduce

    def _all_reduce(self, tensor, *args, **kwargs):
        async_op = kwargs.get("async_op", args[2] if len(args) > 2 else False)
        self.record(tensor.numel() * tensor.element_size(), bool(async_op))
        return self.original(tensor, *args, **kwargs)

    def record(self, nbytes: int, async_op: bool) -> None:
        if self.steps:
            self.steps[-1].append([int(nbytes), async_op, self.in_backward, time.perf_counter() - self.start])

    def backward(self, loss) -> None:
        """``loss.backward()`` as a new step, timed, with the in-backward flag set."""
        self.steps.append([])
        self.start, self.in_backward = time.perf_counter(), True
        try:
            loss.backward()
        finally:
            self.in_backward = False
            self.backward_seconds.append(time.perf_counter() - self.start)

    def torch_hook(self, world: int):
        """A communication hook for torch's DDP that records each bucket it all-reduces."""
        def hook(state, bucket):
            buffer = bucket.buffer()
            self.record(buffer.numel() * buffer.element_size(), True)
            return self.original(buffer, async_op=True).get_future().then(lambda fut: fut.value()[0] / world)
        return hook

    def remove(self) -> None:
        dist.all_reduce = self.original


def sgd_update(model: nn.Module, lr: float) -> None:
    """``p -= lr * p.grad`` for every parameter that has a gradient, then the gradients cleared."""
    with torch.no_grad():
        for p in model.parameters():
            if p.grad is not None:
                p -= lr * p.grad
                p.grad = None


def _after_backward(model: nn.Module, world: int) -> None:
    """Lesson 09's synchronization: each gradient all-reduced (and averaged) after backward."""
    for p in model.parameters():
        if p.grad is not None:
            dist.all_reduce(p.grad)
            p.grad /= world


def comm_worker(wrapper, model_name: str = "tied", steps: int = 2, batch: int = 16, lr: float = 0.1,
                seed: int = 0, bucket_cap_mb: float = 25.0) -> dict:
    """Worker: train ``model_name`` for ``steps`` SGD steps on this rank's batches, wrapped in
    ``wrapper`` (``"torch"``, ``"after_backward"`` or a shipped container class with
    ``finish_gradient_synchronization()``). Returns ``{"calls": [[bytes, async, in_backward,
    seconds] per all-reduce] per step, "backward_seconds": per step, "params": afterwards}``."""
    rank, world, _ = init_process_group("gloo", timeout=60)
    model = make_model(model_name, seed)
    log = AllReduceLog()
    if wrapper == "torch":
        wrapped = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=bucket_cap_mb)
        wrapped.register_comm_hook(None, log.torch_hook(world))
    elif wrapper == "after_backward":
        wrapped = model
    else:
        wrapped = resolve(wrapper)(model)
    for step in range(steps):
        X, y = make_batch(model_name, batch, seed + 1 + step * world + rank)
        log.backward(F.cross_entropy(wrapped(X), y))
        if wrapper == "after_backward":
            _after_backward(model, world)
        elif wrapper != "torch":
            wrapped.finish_gradient_synchronization()
        sgd_update(model, lr)
    log.remove()
    params = [p.detach().clone() for p in model.parameters()]
    dist.barrier()
    return {"calls": log.steps, "backward_seconds": log.backward_seconds, "params": params}


def measure(wrapper, k: int = 2, timeout: float = 60.0, **options) -> list[dict]:
    """:func:`comm_worker` on ``k`` gloo processes; its results by rank. ``wrapper``: ``"torch"``,
    ``"after_backward"``, or a container class (defined in a notebook: shipped as its source)."""
    shipped = wrapper if wrapper in ("torch", "after_backward") else job_for(wrapper)
    return launch(comm_worker, k, shipped, timeout=timeout, **options)


def summary(results: list[dict], step: int = -1) -> dict:
    """Rank 0's all-reduces in one step: calls, bytes, calls issued during backward, seconds of
    the first call and of the end of backward."""
    calls, end = results[0]["calls"][step], results[0]["backward_seconds"][step]
    return {"calls": len(calls), "bytes": sum(c[0] for c in calls), "in_backward": sum(bool(c[2]) for c in calls),
            "first_call_s": calls[0][3] if calls else None, "backward_end_s": end}


__all__ = ["AllReduceLog", "BranchMLP", "TiedLM", "comm_worker", "make_batch", "make_model", "measure",
           "sgd_update", "summary"]
