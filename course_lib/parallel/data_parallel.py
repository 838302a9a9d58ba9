"""Data parallelism from scratch (lesson 09): one model replica per device, one slice of
the batch per replica, gradients summed across replicas, the same update everywhere.

One training step on ``k`` devices (A. Zhang, Z. C. Lipton, M. Li, A. J. Smola, *Dive into Deep
Learning*, 2023, section 12.5.2, https://d2l.ai/chapter_computational-performance/multiple-gpus.html):

1. :func:`get_params` once: copy the model to every device (the replicas).
2. split the minibatch into ``k`` slices, slice ``i`` on device ``i``;
3. every replica computes its loss and local gradients on its slice;
4. allreduce: sum each gradient over the replicas and give the sum back to all;
5. every replica applies the same SGD update, so the replicas stay identical.

Steps 2-5 are what lesson 09 writes itself (the lecture in its notebook, the exercises in
theirs), so this module does not contain them: :func:`train` runs a training loop around a
``step`` function that the caller passes in. What it keeps is the scaffolding around the
step: choosing devices, copying the model, comparing replicas (accuracy is
:func:`course_lib.train.evaluate`).

With ``k`` CUDA GPUs the devices are ``cuda:0 ... cuda:k-1``; with fewer, ``k`` replicas
live on the CPU (:func:`replica_devices`). The arithmetic is the same either way.
"""
from __future__ import annotations

import copy
import time
from typing import Callable, Sequence

import torch
from torch import nn

from ..train import evaluate

Step = Callable[[list, torch.Tensor, torch.Tensor, list, float], float]


def replica_devices(k: int, gpus_needed: int | None = None) -> list[torch.device]:
    """``k`` devices for ``k`` replicas: distinct CUDA GPUs ``cuda:0 ... cuda:k-1`` when the
    machine has at least ``gpus_needed`` of them (default ``k``), otherwise ``k`` times the CPU.

    Pass the largest ``k`` of a comparison as ``gpus_needed`` so that every ``k`` of it runs
    on the same kind of device (a 1-GPU machine then runs k = 1, 2, 4 all on the CPU rather
    than k = 1 on the GPU and k = 2, 4 on the CPU).
    """
    needed = max(k, gpus_needed or k)
    if torch.cuda.is_available() and torch.cuda.device_count() >= needed:
        return [torch.device("cuda", i) for i in range(k)]
    return [torch.device("cpu")] * k


def get_params(model: nn.Module, devices: list[torch.device]) -> list[nn.Module]:
    """One independent copy of ``model`` (parameters and buffers) per device."""
    return [copy.deepcopy(model).to(device) for device in devices]


def max_replica_difference(replicas: list[nn.Module]) -> float:
    """Largest absolute difference between any parameter of any replica and replica 0."""
    worst = 0.0
    first = [p.detach().cpu() for p in replicas[0].parameters()]
    for replica in replicas[1:]:
        for a, b in zip(first, replica.parameters()):
            worst = max(worst, float((a - b.detach().cpu()).abs().max()))
    return worst


def _learning_rate(lr, step: int) -> float:
    """``lr`` is a number, a sequence indexed by the step (its last value afterwards) or a
    function of the step."""
    if callable(lr):
        return float(lr(step))
    if isinstance(lr, Sequence):
        return float(lr[min(step, len(lr) - 1)])
    return float(lr)


def train(model: nn.Module, train_batches, k: int, step: Step, lr, epochs: int = 1,
          test_batches=None, max_steps: int | None = None,
          gpus_needed: int | None = None) -> dict:
    """Train a copy of ``model`` data-parallel on ``k`` replicas (:func:`replica_devices`).

    ``step(replicas, X, y, devices, lr) -> loss`` does one data-parallel SGD step (split,
    local gradients, allreduce, update); ``lr`` is a number, a per-step sequence or a
    function of the step number (a warm-up schedule). ``train_batches`` is a re-iterable of
    ``(X, y)`` (a DataLoader). Returns a dict with ``losses`` (per step), ``lrs`` (per step),
    ``seconds`` (wall time of the training loop, seconds), ``test_accuracy`` (per epoch,
    replica 0, when ``test_batches`` is given), ``replica_difference`` (after training),
    ``devices`` (their names) and ``replicas``.
    """
    devices = replica_devices(k, gpus_needed)
    replicas = get_params(model, devices)
    losses, lrs, accuracies, steps = [], [], [], 0
    start = time.perf_counter()
    for _ in range(epochs):
        for X, y in train_batches:
            lrs.append(_learning_rate(lr, steps))
            losses.append(float(step(replicas, X, y, devices, lrs[-1])))
            steps += 1
            if max_steps is not None and steps >= max_steps:
                break
        if test_batches is not None:
            accuracies.append(evaluate(replicas[0], test_batches, devices[0]))
    for device in set(devices):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    return {"losses": losses, "lrs": lrs, "seconds": time.perf_counter() - start,
            "test_accuracy": accuracies, "replica_difference": max_replica_difference(replicas),
            "devices": [str(d) for d in devices], "replicas": replicas}
