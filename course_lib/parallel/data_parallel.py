"""Data parallelism from scratch (lesson 09): one model replica per device, one slice of
the batch per replica, gradients summed across replicas, the same update everywhere.

One training step on ``k`` devices (seed 003, section 12.5.2):

1. :func:`get_params` once: copy the model to every device (the replicas).
2. :func:`split_batch`: cut the minibatch into ``k`` slices with ``tensor.chunk`` and move
   slice ``i`` to device ``i`` (``nn.parallel.scatter`` would refuse CPU devices).
3. every replica computes its loss and local gradients on its slice;
4. :func:`allreduce`: sum each gradient over the replicas and copy the sum back to all;
5. every replica applies the same SGD update, so the replicas stay identical.

With ``k`` CUDA GPUs the devices are ``cuda:0 ... cuda:k-1``; with fewer, ``k`` replicas
live on the CPU (:func:`replica_devices`). The arithmetic is the same either way.
"""
from __future__ import annotations

import copy
import time

import torch
import torch.nn.functional as F
from torch import nn


def replica_devices(k: int) -> list[torch.device]:
    """``k`` devices for ``k`` replicas: distinct CUDA GPUs when there are ``k`` of them,
    otherwise ``k`` times the CPU."""
    if torch.cuda.is_available() and torch.cuda.device_count() >= k:
        return [torch.device("cuda", i) for i in range(k)]
    return [torch.device("cpu")] * k


def get_params(model: nn.Module, devices: list[torch.device]) -> list[nn.Module]:
    """One independent copy of ``model`` (parameters and buffers) per device."""
    return [copy.deepcopy(model).to(device) for device in devices]


def split_batch(X: torch.Tensor, y: torch.Tensor, devices: list[torch.device]):
    """Split ``X`` and ``y`` along dimension 0 into ``len(devices)`` slices with
    ``tensor.chunk`` and move slice ``i`` to ``devices[i]``. Returns ``(Xs, ys)``.

    ``chunk`` makes slices of ``ceil(batch / k)`` rows, the last one smaller; a batch
    smaller than ``k`` gives fewer slices, which is an error here.
    """
    if X.shape[0] != y.shape[0]:
        raise ValueError(f"X has {X.shape[0]} rows but y has {y.shape[0]}")
    k = len(devices)
    if X.shape[0] < k:
        raise ValueError(f"a batch of {X.shape[0]} cannot be split over {k} devices")
    Xs = [x.to(d) for x, d in zip(X.chunk(k), devices)]
    ys = [t.to(d) for t, d in zip(y.chunk(k), devices)]
    return Xs, ys


def allreduce(tensors: list[torch.Tensor]) -> None:
    """Sum ``tensors`` (one per device, same shape) and write the sum into every one of them.

    The sum is collected on the first tensor's device, then copied back: the "aggregate on
    one GPU" strategy of seed 003 (lesson 11 shows faster ones).
    """
    total = tensors[0].clone()
    for t in tensors[1:]:
        total += t.to(total.device)
    for t in tensors:
        t.copy_(total.to(t.device))


def train_batch(replicas: list[nn.Module], X: torch.Tensor, y: torch.Tensor,
                devices: list[torch.device], lr: float, loss_fn=F.cross_entropy) -> float:
    """One data-parallel SGD step on the batch ``(X, y)``; returns the batch's mean loss.

    Each replica sums its slice's losses; dividing by the *full* batch size makes the
    summed gradient equal to the gradient of the mean loss over the whole batch, exactly
    what one device would compute.
    """
    Xs, ys = split_batch(X, y, devices)
    total_loss = 0.0
    for replica, xs, ts in zip(replicas, Xs, ys):
        replica.zero_grad(set_to_none=False)
        loss = loss_fn(replica(xs), ts, reduction="sum") / X.shape[0]
        loss.backward()
        total_loss += float(loss.detach())
    for params in zip(*(r.parameters() for r in replicas)):
        allreduce([p.grad for p in params])
    with torch.no_grad():
        for replica in replicas:
            for p in replica.parameters():
                p -= lr * p.grad
    return total_loss


def max_replica_difference(replicas: list[nn.Module]) -> float:
    """Largest absolute difference between any parameter of any replica and replica 0."""
    worst = 0.0
    first = [p.detach().cpu() for p in replicas[0].parameters()]
    for replica in replicas[1:]:
        for a, b in zip(first, replica.parameters()):
            worst = max(worst, float((a - b.detach().cpu()).abs().max()))
    return worst


def accuracy(model: nn.Module, batches, device=None) -> float:
    """Fraction of correctly classified examples over an iterable of ``(X, y)`` batches."""
    device = device or next(model.parameters()).device
    correct = total = 0
    was_training = model.training
    model.eval()
    with torch.no_grad():
        for X, y in batches:
            pred = model(X.to(device)).argmax(dim=1).cpu()
            correct += int((pred == y).sum())
            total += y.numel()
    model.train(was_training)
    return correct / max(total, 1)


def train(model: nn.Module, train_batches, k: int, lr: float, epochs: int = 1,
          test_batches=None, max_steps: int | None = None) -> dict:
    """Train a copy of ``model`` data-parallel on ``k`` replicas (see :func:`replica_devices`).

    ``train_batches`` is a re-iterable of ``(X, y)`` (a DataLoader). Returns a dict with
    ``losses`` (per step), ``seconds`` (wall time of the training loop, seconds),
    ``test_accuracy`` (per epoch, replica 0, when ``test_batches`` is given),
    ``replica_difference`` (after training) and ``devices`` (their names).
    """
    devices = replica_devices(k)
    replicas = get_params(model, devices)
    losses, accuracies, steps = [], [], 0
    start = time.perf_counter()
    for _ in range(epochs):
        for X, y in train_batches:
            losses.append(train_batch(replicas, X, y, devices, lr))
            steps += 1
            if max_steps is not None and steps >= max_steps:
                break
        if test_batches is not None:
            accuracies.append(accuracy(replicas[0], test_batches, devices[0]))
    for device in set(devices):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    return {"losses": losses, "seconds": time.perf_counter() - start,
            "test_accuracy": accuracies, "replica_difference": max_replica_difference(replicas),
            "devices": [str(d) for d in devices], "replicas": replicas}
