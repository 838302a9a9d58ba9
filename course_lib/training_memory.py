"""The memory of training, layer by layer and step by step (lessons 08, 12 and 13).

* :func:`profile_layer_mem` - the working set of every layer: input, output and weight bytes.
* :func:`profile_mem` - the memory of a training step split into parameters, gradients,
  optimizer state and the activations autograd keeps for the backward pass;
  :func:`check_memory_budget` and :func:`largest_batch_under` put it against a budget.
* :func:`alexnet_on_two_gpus` - what those numbers meant for AlexNet on two 3 GB GPUs.
* :func:`cuda_memory_history` - the CUDA caching allocator's record of every allocation and
  free during a step, and :func:`allocator_timeline` - bytes allocated over time from it.

All sizes are bytes. Shapes are traced on PyTorch's ``meta`` device by default (no storage,
no arithmetic), with the layer hooks of :mod:`course_lib.profile`.
"""
from __future__ import annotations

import os
import pickle
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch
from torch import nn

from .models import AlexNet
from .profile import example_input, on_device, run_hooked


# ---------------------------------------------------------------- working set per layer
@dataclass
class LayerMemory:
    """Working set of one layer, in bytes: what it reads (input, weights) and writes (output).

    ``output_bytes`` is 0 for a layer that works in place (its output overwrites its input)
    or hands its input through unchanged (dropout in evaluation mode).
    """

    name: str
    kind: str
    input_bytes: int
    output_bytes: int
    weight_bytes: int

    @property
    def total_bytes(self) -> int:
        return self.input_bytes + self.output_bytes + self.weight_bytes


def _nbytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors if isinstance(t, torch.Tensor))


@dataclass
class LayerMemoryProfile:
    """Per-layer working sets of one forward pass on an input of ``input_shape``."""

    input_shape: tuple
    layers: list[LayerMemory] = field(default_factory=list)

    @property
    def largest(self) -> LayerMemory:
        """The layer with the largest working set."""
        return max(self.layers, key=lambda layer: layer.total_bytes)

    def table(self) -> str:
        width = max([len(layer.name) for layer in self.layers] + [5])
        lines = [f"{'layer':<{width}}  {'inputs':>12} {'outputs':>12} {'weights':>12} {'total':>12}  (bytes)"]
        for m in self.layers:
            lines.append(f"{m.name:<{width}}  {m.input_bytes:>12,} {m.output_bytes:>12,} "
                         f"{m.weight_bytes:>12,} {m.total_bytes:>12,}")
        return "\n".join(lines)

    def plot(self, ax=None, limit_bytes: float | None = None, limit_label: str = ""):
        """Stacked bars per layer (inputs, outputs, weights), optionally with a horizontal line
        at ``limit_bytes`` (a cache size, a GPU's memory)."""
        import matplotlib.pyplot as plt  # lazy: 0.6 s to import; the graded exercises never plot

        ax = ax or plt.subplots(figsize=(max(6, 0.45 * len(self.layers)), 3.5))[1]
        names = [m.name for m in self.layers]
        scale, unit = _unit(max(m.total_bytes for m in self.layers))
        bottom = [0.0] * len(names)
        for part, label in (("input_bytes", "inputs"), ("output_bytes", "outputs"),
                            ("weight_bytes", "weights")):
            values = [getattr(m, part) / scale for m in self.layers]
            ax.bar(names, values, bottom=bottom, label=label)
            bottom = [b + v for b, v in zip(bottom, values)]
        if limit_bytes:
            ax.axhline(limit_bytes / scale, color="k", linestyle="--", label=limit_label or "limit")
        ax.set_ylabel(f"working set ({unit})")
        ax.set_title(f"working set per layer, input {tuple(self.input_shape)}")
        ax.tick_params(axis="x", rotation=75)
        ax.legend()
        return ax

    def __str__(self) -> str:
        return self.table()


def _unit(nbytes: float) -> tuple[float, str]:
    for scale, unit in ((2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
        if nbytes >= scale:
            return scale, unit
    return 1, "bytes"


def profile_layer_mem(model: nn.Module, shape=(1, 1, 28, 28), device="meta") -> LayerMemoryProfile:
    """Input, output and weight bytes of every leaf layer for one forward pass on ``shape``
    (tensors' ``numel() x element_size()``; weights include biases and batch-norm buffers)."""
    net = on_device(model, device)
    profile = LayerMemoryProfile(tuple(shape))

    def hook(name):
        def record(module, inputs, output):
            outputs = output if isinstance(output, (tuple, list)) else (output,)
            in_place = any(o is i or (o.data_ptr() == i.data_ptr() and o.data_ptr() != 0)
                           for o in outputs for i in inputs if isinstance(i, torch.Tensor))
            in_place = in_place or getattr(module, "inplace", False)
            weights = list(module.parameters(recurse=False)) + list(module.buffers(recurse=False))
            profile.layers.append(LayerMemory(
                name, type(module).__name__, _nbytes(inputs),
                0 if in_place else _nbytes(outputs),
                _nbytes(w for w in weights if w.is_floating_point())))
        return record

    run_hooked(net, shape, device, [hook])
    return profile


# ---------------------------------------------------------------- memory of a training step
OPTIMIZER_STATE_PER_PARAMETER = {"sgd": 0, "momentum": 1, "adam": 2, "adamw": 2}


@dataclass
class MemorySplit:
    """Bytes held during one training step (see :func:`profile_mem`)."""

    parameters: int
    gradients: int
    optimizer_state: int
    activations: int
    input_shape: tuple = ()
    optimizer: str = "adam"

    @property
    def total(self) -> int:
        return self.parameters + self.gradients + self.optimizer_state + self.activations

    def as_dict(self) -> dict:
        return {"parameters": self.parameters, "gradients": self.gradients,
                "optimizer state": self.optimizer_state, "activations": self.activations}

    def __str__(self) -> str:
        parts = ", ".join(f"{k} {v / 2**20:.2f} MiB" for k, v in self.as_dict().items())
        return f"{parts}; total {self.total / 2**20:.2f} MiB (input {self.input_shape}, {self.optimizer})"

    def plot(self, ax=None):
        """A pie chart of the four parts."""
        import matplotlib.pyplot as plt  # lazy: 0.6 s to import; the graded exercises never plot

        ax = ax or plt.subplots(figsize=(4.5, 4.5))[1]
        items = [(k, v) for k, v in self.as_dict().items() if v > 0]
        ax.pie([v for _, v in items], labels=[f"{k}\n{v / 2**20:.1f} MiB" for k, v in items],
               autopct="%1.0f%%")
        ax.set_title(f"training memory, input {tuple(self.input_shape)}, {self.optimizer}")
        return ax


def activation_bytes(model: nn.Module, shape, device="meta") -> int:
    """Bytes of the tensors autograd saves for the backward pass of one forward pass on
    ``shape`` (each storage counted once; parameters excluded)."""
    net = on_device(model, device)
    param_storages = {p.untyped_storage()._cdata for p in net.parameters()}
    saved: dict[int, int] = {}

    def pack(tensor):
        storage = tensor.untyped_storage()
        if storage._cdata not in param_storages:
            saved[storage._cdata] = max(saved.get(storage._cdata, 0), storage.nbytes())
        return tensor

    was_training = net.training
    net.train()
    try:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
            out = net(example_input(net, shape, device))
        del out
    finally:
        net.train(was_training)
    return sum(saved.values())


def profile_mem(model: nn.Module, shape=(1, 1, 28, 28), optimizer: str = "adam",
                device="meta") -> MemorySplit:
    """Bytes of a training step: parameters, their gradients (same size), the optimizer's state
    (``OPTIMIZER_STATE_PER_PARAMETER`` copies: Adam keeps two, SGD with momentum one) and the
    activations autograd keeps between the forward and the backward pass."""
    if optimizer not in OPTIMIZER_STATE_PER_PARAMETER:
        raise ValueError(f"optimizer must be one of {sorted(OPTIMIZER_STATE_PER_PARAMETER)}")
    params = _nbytes(p for p in model.parameters() if p.requires_grad)
    return MemorySplit(params, params, OPTIMIZER_STATE_PER_PARAMETER[optimizer] * params,
                       activation_bytes(model, shape, device), tuple(shape), optimizer)


class MemoryBudgetExceeded(MemoryError):
    """A training step would need more bytes than the budget allows (the CPU stand-in for
    ``torch.cuda.OutOfMemoryError``)."""


def check_memory_budget(model: nn.Module, shape, budget_bytes: int, optimizer: str = "adam") -> MemorySplit:
    """Return the :class:`MemorySplit` of a training step on ``shape`` or raise
    :class:`MemoryBudgetExceeded` with a message saying what did not fit and why."""
    split = profile_mem(model, shape, optimizer)
    if split.total > budget_bytes:
        raise MemoryBudgetExceeded(
            f"a training step on input {tuple(shape)} needs {split.total / 2**20:.1f} MiB but the "
            f"budget is {budget_bytes / 2**20:.1f} MiB ({split}). Activations grow with the batch "
            "size; parameters, gradients and optimizer state do not: use a smaller batch "
            "(or gradient accumulation, lower precision, activation checkpointing).")
    return split


def largest_batch_under(model: nn.Module, sample_shape, budget_bytes: int,
                        optimizer: str = "adam", limit: int = 1 << 20) -> int:
    """The largest batch size whose training step fits in ``budget_bytes`` (0 if none), found
    by doubling then bisection on :func:`profile_mem` (traced on the meta device)."""
    def fits(batch):
        return profile_mem(model, (batch, *sample_shape), optimizer).total <= budget_bytes

    if not fits(1):
        return 0
    low, high = 1, 2
    while high <= limit and fits(high):
        low, high = high, high * 2
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if fits(middle) else (low, middle)
    return low


# ---------------------------------------------------------------- AlexNet on two GTX 580s
@dataclass
class AlexNetMemory:
    """Training memory of AlexNet at ``batch_size`` (float32, SGD with momentum as in the
    2012 paper), on one GPU and split in two halves."""

    batch_size: int
    layers: LayerMemoryProfile
    split: MemorySplit
    gpu_bytes: int

    @property
    def per_gpu_when_split(self) -> float:
        """Bytes per GPU when every layer's channels (hence weights and activations) are halved."""
        return self.split.total / 2

    def summary(self) -> str:
        gib = 2**30
        return (f"AlexNet (torchvision layout, {self.split.parameters / 4:,.0f} parameters), batch "
                f"{self.batch_size}, float32, SGD with momentum: parameters "
                f"{self.split.parameters / gib:.2f} GiB + gradients {self.split.gradients / gib:.2f} GiB + "
                f"momentum {self.split.optimizer_state / gib:.2f} GiB + activations kept for backward "
                f"{self.split.activations / gib:.2f} GiB = {self.split.total / gib:.2f} GiB on one GPU; "
                f"{self.per_gpu_when_split / gib:.2f} GiB per GPU split in two; each GPU had "
                f"{self.gpu_bytes / gib:.0f} GiB (before workspace for convolutions, the input "
                "batches and the framework itself).")


def alexnet_on_two_gpus(batch_size: int = 128, gpu_bytes: int = 3 * 2**30) -> AlexNetMemory:
    """Per-layer working sets and training memory of AlexNet on 224x224 RGB images."""
    with torch.device("meta"):
        net = AlexNet()
    shape = (batch_size, 3, 224, 224)
    return AlexNetMemory(batch_size, profile_layer_mem(net, shape),
                         profile_mem(net, shape, optimizer="momentum"), gpu_bytes)


# ---------------------------------------------------------------- the CUDA allocator's history
def cuda_memory_history(fn: Callable[[], object], steps: int = 1, *, max_entries: int = 100_000,
                        path: str | os.PathLike | None = None) -> dict | None:
    """Run ``fn()`` ``steps`` times while the CUDA caching allocator records every allocation
    and free (``torch.cuda.memory._record_memory_history``, a private but documented API),
    and return the snapshot dict; None when torch has no usable GPU or lacks the API.
    With ``path`` the snapshot is also pickled there, for https://pytorch.org/memory_viz."""
    memory = getattr(torch.cuda, "memory", None)
    if not torch.cuda.is_available() or not hasattr(memory, "_record_memory_history"):
        return None
    memory._record_memory_history(max_entries=max_entries)
    try:
        for _ in range(steps):
            fn()
        torch.cuda.synchronize()
        snapshot = memory._snapshot()
    finally:
        memory._record_memory_history(enabled=None)
    if path is not None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_bytes(pickle.dumps(snapshot))
    return snapshot


def allocator_timeline(snapshot: dict, device: int = 0) -> tuple[list[float], list[int]]:
    """(x, bytes allocated) after every allocation and completed free in a CUDA memory
    snapshot. x is microseconds since the first entry when the entries carry ``time_us``,
    else the entry's index. The level before the first entry is inferred from the blocks
    still allocated at the snapshot minus what the entries added."""
    entries = [e for e in snapshot.get("device_traces", [[]])[device]
               if e.get("action") in ("alloc", "free_completed")]
    changes = [e["size"] if e["action"] == "alloc" else -e["size"] for e in entries]
    still_allocated = sum(block["size"] for segment in snapshot.get("segments", [])
                          if segment.get("device", device) == device
                          for block in segment.get("blocks", [])
                          if block.get("state") == "active_allocated")
    level = still_allocated - sum(changes)
    timed = bool(entries) and all("time_us" in e for e in entries)
    first = entries[0]["time_us"] if timed else 0
    xs, levels = [], []
    for index, (entry, change) in enumerate(zip(entries, changes)):
        level += change
        xs.append(entry["time_us"] - first if timed else index)
        levels.append(level)
    return xs, levels
