"""Where a network spends its FLOPs and its bytes, layer by layer.

* :func:`profile_ops` - multiply-accumulates (MACs) and FLOPs of every layer for one forward
  pass, computed from the layer shapes by the formulas the lesson derives; its total equals
  ``torch.utils.flop_counter.FlopCounterMode`` (:func:`counter_flops`), which counts
  2 FLOPs per MAC in convolutions and matrix products and nothing else (no bias, activation,
  pooling or normalisation).
* :func:`profile_layer_mem` - the working set of every layer: input, output and weight bytes.
* :func:`profile_mem` - the memory of a training step split into parameters, gradients,
  optimizer state and the activations autograd keeps for the backward pass.
* :func:`alexnet_on_two_gpus` - what those numbers meant for AlexNet on two 3 GB GPUs.

By default shapes are traced on PyTorch's ``meta`` device: tensors with a shape and a dtype
but no storage, so even AlexNet at batch 128 is profiled in milliseconds and no memory.
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

_CONV = (nn.Conv1d, nn.Conv2d, nn.Conv3d)


def _leaves(model: nn.Module):
    """(qualified name, module) of every module without children."""
    for name, module in model.named_modules():
        if not list(module.children()):
            yield name or type(model).__name__, module


def _on_device(model: nn.Module, device) -> nn.Module:
    """``model`` itself when it already lives on ``device``, else a copy moved there."""
    device = torch.device(device)
    first = next(model.parameters(), None)
    if first is not None and first.device == device:
        return model
    return copy.deepcopy(model).to(device)


def _example_input(model: nn.Module, shape, device) -> torch.Tensor:
    """Zeros of ``shape`` on ``device`` in the dtype of the model's first floating parameter."""
    dtype = next((p.dtype for p in model.parameters() if p.is_floating_point()), torch.float32)
    return torch.zeros(shape, device=device, dtype=dtype)


def _run(model: nn.Module, shape, device, hooks) -> None:
    handles = [module.register_forward_hook(hook(name)) for name, module in _leaves(model)
               for hook in hooks]
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            model(_example_input(model, shape, device))
    finally:
        model.train(was_training)
        for handle in handles:
            handle.remove()


# ---------------------------------------------------------------- FLOPs
def conv_macs(weight_shape, output_shape) -> int:
    """MACs of a convolution: every output value (N x C_out x spatial) needs
    C_in/groups x kernel-size products. ``weight_shape`` is (C_out, C_in/groups, k...)."""
    return math.prod(output_shape) * math.prod(weight_shape[1:])


def linear_macs(in_features: int, out_features: int, rows: int) -> int:
    """MACs of a linear layer applied to ``rows`` input vectors."""
    return rows * in_features * out_features


def layer_macs(module: nn.Module, inputs: tuple, output) -> int:
    """Multiply-accumulates of one call of ``module`` (convolution and linear layers; 0 for the
    rest, whose element-wise work is not counted, as in FlopCounterMode)."""
    if isinstance(module, _CONV):
        return conv_macs(module.weight.shape, output.shape)
    if isinstance(module, nn.Linear):
        rows = inputs[0].numel() // module.in_features
        return linear_macs(module.in_features, module.out_features, rows)
    return 0


@dataclass
class LayerOps:
    """One layer of :func:`profile_ops`: name, type, output shape, MACs, FLOPs (= 2 x MACs)."""

    name: str
    kind: str
    output_shape: tuple
    macs: int

    @property
    def flops(self) -> int:
        return 2 * self.macs


@dataclass
class OpsProfile:
    """Per-layer operation counts of one forward pass on an input of ``input_shape``."""

    input_shape: tuple
    layers: list[LayerOps] = field(default_factory=list)

    @property
    def total_macs(self) -> int:
        return sum(layer.macs for layer in self.layers)

    @property
    def total_flops(self) -> int:
        return sum(layer.flops for layer in self.layers)

    def table(self) -> str:
        """A text table: one row per layer, then the totals."""
        width = max([len(layer.name) for layer in self.layers] + [5])
        lines = [f"{'layer':<{width}}  {'type':<17} {'output shape':<20} {'MACs':>15} {'FLOPs':>15}"]
        for layer in self.layers:
            lines.append(f"{layer.name:<{width}}  {layer.kind:<17} {str(tuple(layer.output_shape)):<20} "
                         f"{layer.macs:>15,} {layer.flops:>15,}")
        lines.append(f"{'total':<{width}}  {'':<17} {'':<20} {self.total_macs:>15,} {self.total_flops:>15,}")
        lines.append(f"input {tuple(self.input_shape)}: {self.total_flops / 1e9:.4f} GFLOPs per forward pass")
        return "\n".join(lines)

    def plot(self, ax=None):
        """Horizontal bars of FLOPs per layer (only layers that count FLOPs)."""
        import matplotlib.pyplot as plt

        ax = ax or plt.subplots(figsize=(7, 0.3 * len(self.layers) + 1))[1]
        counted = [layer for layer in self.layers if layer.flops]
        ax.barh([layer.name for layer in counted], [layer.flops for layer in counted])
        ax.invert_yaxis()
        ax.set_xlabel("FLOPs per forward pass")
        ax.set_title(f"FLOPs per layer, input {tuple(self.input_shape)}")
        return ax

    def __str__(self) -> str:
        return self.table()


def profile_ops(model: nn.Module, shape=(1, 1, 28, 28), device="meta") -> OpsProfile:
    """MACs and FLOPs of every leaf layer of ``model`` for one forward pass on ``shape``.

    Runs the model once on ``device`` (default ``meta``: shapes only, no arithmetic) with a
    forward hook on every leaf module; the model itself is not modified.
    """
    net = _on_device(model, device)
    profile = OpsProfile(tuple(shape))

    def hook(name):
        def record(module, inputs, output):
            profile.layers.append(LayerOps(name, type(module).__name__, tuple(output.shape),
                                           layer_macs(module, inputs, output)))
        return record

    _run(net, shape, device, [hook])
    return profile


def counter_flops(model: nn.Module, shape=(1, 1, 28, 28), device="meta") -> int:
    """Total FLOPs of one forward pass according to PyTorch's ``FlopCounterMode`` (the reference)."""
    net = _on_device(model, device)
    net_mode = net.training
    net.eval()
    try:
        with torch.no_grad(), FlopCounterMode(display=False) as counter:
            net(_example_input(net, shape, device))
    finally:
        net.train(net_mode)
    return counter.get_total_flops()


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
        import matplotlib.pyplot as plt

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
    net = _on_device(model, device)
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

    _run(net, shape, device, [hook])
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
        import matplotlib.pyplot as plt

        ax = ax or plt.subplots(figsize=(4.5, 4.5))[1]
        items = [(k, v) for k, v in self.as_dict().items() if v > 0]
        ax.pie([v for _, v in items], labels=[f"{k}\n{v / 2**20:.1f} MiB" for k, v in items],
               autopct="%1.0f%%")
        ax.set_title(f"training memory, input {tuple(self.input_shape)}, {self.optimizer}")
        return ax


def activation_bytes(model: nn.Module, shape, device="meta") -> int:
    """Bytes of the tensors autograd saves for the backward pass of one forward pass on
    ``shape`` (each storage counted once; parameters excluded)."""
    net = _on_device(model, device)
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
            out = net(_example_input(net, shape, device))
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
    from .models import AlexNet

    with torch.device("meta"):
        net = AlexNet()
    shape = (batch_size, 3, 224, 224)
    return AlexNetMemory(batch_size, profile_layer_mem(net, shape),
                         profile_mem(net, shape, optimizer="momentum"), gpu_bytes)
