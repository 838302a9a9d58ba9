"""A training loop for any device, evaluation, and a training-time estimate (lessons 08, 09).

:func:`train` shows a progress bar; :func:`evaluate` is the accuracy on a loader (lesson 09's
replicas too); :func:`estimate_training_for` says how long a long run would take, in seconds,
from a short timed one. The loop keeps the device busy: it never calls ``.item()`` on every
step (each call waits for the device, lesson 06); the progress bar reads the loss every
``log_every`` steps only.
"""
from __future__ import annotations

import copy
import sys
import time
from dataclasses import dataclass, field
from typing import Callable

import torch
from torch import nn
from tqdm import tqdm

from .devices import default_device
from .timing import format_seconds, synchronize


@dataclass
class EpochRecord:
    """One epoch: mean training loss, wall-clock seconds, samples, and the seconds the loop
    spent waiting for the data loader to hand over the next batch (``data_seconds``)."""

    epoch: int
    loss: float
    seconds: float
    samples: int
    data_seconds: float = 0.0

    @property
    def data_fraction(self) -> float:
        """Share of the epoch spent waiting for data (0 to 1): near 1 means a starved device."""
        return self.data_seconds / self.seconds if self.seconds > 0 else 0.0

    @property
    def samples_per_second(self) -> float:
        return self.samples / self.seconds if self.seconds > 0 else float("inf")


@dataclass
class History:
    """What :func:`train` returns: per-epoch records and the loss of every step."""

    device: str
    epochs: list[EpochRecord] = field(default_factory=list)
    step_losses: list[float] = field(default_factory=list)

    @property
    def seconds(self) -> float:
        """Total training seconds over all epochs."""
        return sum(e.seconds for e in self.epochs)

    @property
    def final_loss(self) -> float:
        return self.epochs[-1].loss if self.epochs else float("nan")


def _batches(loader, max_batches: int | None, waits: list[float] | None = None):
    """Yield batches of ``loader`` (at most ``max_batches``), appending to ``waits`` the
    seconds each ``next()`` on the loader took."""
    iterator = iter(loader)
    index = 0
    while max_batches is None or index < max_batches:
        start = time.perf_counter()
        try:
            batch = next(iterator)
        except StopIteration:
            return
        if waits is not None:
            waits.append(time.perf_counter() - start)
        index += 1
        yield batch


def _steps_in(loader, max_batches: int | None) -> int | None:
    try:
        total = len(loader)
    except TypeError:
        return max_batches
    return total if max_batches is None else min(total, max_batches)


def train(model: nn.Module, loader, epochs: int = 1, *, optimizer: torch.optim.Optimizer | None = None,
          lr: float = 1e-3, loss_fn: Callable | None = None, device=None, progress: bool = True,
          max_batches: int | None = None, log_every: int = 10, file=None) -> History:
    """Train ``model`` on ``loader`` for ``epochs`` epochs and return a :class:`History`.

    ``device`` defaults to the GPU when there is one; the model is moved there and each batch
    is copied there (asynchronously from pinned memory). ``optimizer`` defaults to Adam with
    ``lr``; ``loss_fn`` to cross-entropy. ``max_batches`` cuts every epoch short (for demos).
    ``progress=False`` disables the tqdm bar, which otherwise writes to ``file`` (stderr).
    Time is wall-clock seconds measured after synchronizing the device.
    """
    device = torch.device(device) if device is not None else default_device()
    model.to(device).train()
    optimizer = optimizer or torch.optim.Adam(model.parameters(), lr=lr)
    loss_fn = loss_fn or nn.CrossEntropyLoss()
    history = History(device=str(device))
    for epoch in range(1, epochs + 1):
        waits: list[float] = []
        bar = tqdm(_batches(loader, max_batches, waits), total=_steps_in(loader, max_batches),
                   desc=f"epoch {epoch}/{epochs}", unit="batch", disable=not progress,
                   file=file or sys.stderr, mininterval=0.5, leave=True)
        losses, samples = [], 0
        synchronize(device)
        start = time.perf_counter()
        for step, (inputs, targets) in enumerate(bar, 1):
            inputs = inputs.to(device, non_blocking=True)
            targets = targets.to(device, non_blocking=True)
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(model(inputs), targets)
            loss.backward()
            optimizer.step()
            losses.append(loss.detach())
            samples += len(targets)
            if progress and step % log_every == 0:
                elapsed = time.perf_counter() - start
                bar.set_postfix(loss=f"{losses[-1].item():.3f}",
                                samples_per_s=f"{samples / elapsed:.0f}", refresh=False)
        synchronize(device)
        seconds = time.perf_counter() - start
        step_losses = torch.stack(losses).float().cpu().tolist() if losses else []
        history.step_losses.extend(step_losses)
        mean_loss = sum(step_losses) / len(step_losses) if step_losses else float("nan")
        history.epochs.append(EpochRecord(epoch, mean_loss, seconds, samples, sum(waits)))
        if progress:
            bar.set_postfix(mean_loss=f"{mean_loss:.3f}", samples_per_s=f"{samples / seconds:.0f}",
                            waiting_for_data=f"{sum(waits) / seconds:.0%}")
        bar.close()
    return history


@torch.no_grad()
def evaluate(model: nn.Module, loader, device=None, max_batches: int | None = None) -> float:
    """Fraction of samples in ``loader`` whose highest-scoring class is the label (0 to 1)."""
    device = torch.device(device) if device is not None else default_device()
    model.to(device).eval()
    correct = torch.zeros((), dtype=torch.int64, device=device)
    total = 0
    for inputs, targets in _batches(loader, max_batches):
        inputs, targets = inputs.to(device), targets.to(device)
        correct += (model(inputs).argmax(dim=1) == targets).sum()
        total += len(targets)
    model.train()
    return correct.item() / total if total else float("nan")


@dataclass
class TrainingEstimate:
    """Extrapolated training time. Seconds are wall-clock on the device that was measured."""

    seconds_per_batch: float
    measured_batches: int
    warmup_batches: int
    batch_size: int
    batches_per_epoch: int
    epochs: int
    device: str

    @property
    def seconds_per_epoch(self) -> float:
        return self.seconds_per_batch * self.batches_per_epoch

    @property
    def total_seconds(self) -> float:
        return self.seconds_per_epoch * self.epochs

    def explain(self) -> str:
        """How the figure was obtained, and what it leaves out."""
        return (f"Timed {self.measured_batches} training steps of {self.batch_size} samples on "
                f"{self.device} after {self.warmup_batches} untimed warm-up steps: "
                f"{format_seconds(self.seconds_per_batch)} per step. "
                f"{self.batches_per_epoch} steps per epoch x {self.epochs} epochs = "
                f"{self.batches_per_epoch * self.epochs:,} steps -> about "
                f"{format_seconds(self.total_seconds)} ({self.total_seconds / 3600:.2f} h). "
                "Assumes every step costs what the timed ones did; evaluation, checkpoints and "
                "slower data loading would add to it.")

    def __str__(self) -> str:
        return self.explain()


def estimate_training_for(model: nn.Module | Callable[[], nn.Module], loader, epochs: int, *,
                          measure_batches: int = 10, warmup_batches: int = 2, device=None,
                          lr: float = 1e-3) -> TrainingEstimate:
    """Time a few training steps of ``model`` on ``loader`` and extrapolate to ``epochs`` epochs.

    ``model`` is a module (a copy is trained, the original is left untouched) or a callable
    returning one (such as the class ``LeNet``). Steps run exactly as in :func:`train`: Adam,
    cross-entropy, data loading included. The clock starts after ``warmup_batches`` steps and
    a synchronize, and stops after a synchronize.
    """
    device = torch.device(device) if device is not None else default_device()
    net = copy.deepcopy(model) if isinstance(model, nn.Module) else model()
    net.to(device).train()
    optimizer = torch.optim.Adam(net.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    needed = warmup_batches + measure_batches
    batches_per_epoch = len(loader)
    if batches_per_epoch < needed:
        raise ValueError(f"the loader has {batches_per_epoch} batches; {needed} are needed "
                         f"({warmup_batches} warm-up + {measure_batches} timed)")
    batch_size = 0
    start = None
    for step, (inputs, targets) in enumerate(_batches(loader, needed)):
        if step == warmup_batches:
            synchronize(device)
            start = time.perf_counter()
        inputs = inputs.to(device, non_blocking=True)
        targets = targets.to(device, non_blocking=True)
        optimizer.zero_grad(set_to_none=True)
        loss_fn(net(inputs), targets).backward()
        optimizer.step()
        batch_size = max(batch_size, len(targets))
    synchronize(device)
    elapsed = time.perf_counter() - start
    return TrainingEstimate(elapsed / measure_batches, measure_batches, warmup_batches,
                            batch_size, batches_per_epoch, epochs, str(device))
