"""Where a network spends its FLOPs, layer by layer (lessons 01 and 08).

* :func:`profile_ops` - multiply-accumulates (MACs) and FLOPs of every layer for one forward
  pass, computed from the layer shapes by the formulas the lesson derives; its total equals
  ``torch.utils.flop_counter.FlopCounterMode`` (:func:`counter_flops`), which counts
  2 FLOPs per MAC in convolutions and matrix products and nothing else (no bias, activation,
  pooling or normalisation).
* :func:`run_hooked` - runs a model once with a forward hook on every leaf layer: the shape
  tracer this module and :mod:`course_lib.training_memory` (bytes per layer) are built on.

By default shapes are traced on PyTorch's ``meta`` device: tensors with a shape and a dtype
but no storage, so even AlexNet at batch 128 is profiled in milliseconds and no memory.
Where the *time* goes, as opposed to the work, is :mod:`course_lib.trace` (torch.profiler).
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

_CONV = (nn.Conv1d, nn.Conv2d, nn.Conv3d)


def leaf_modules(model: nn.Module):
    """(qualified name, module) of every module without children."""
    for name, module in model.named_modules():
        if not list(module.children()):
            yield name or type(model).__name__, module


def on_device(model: nn.Module, device) -> nn.Module:
    """``model`` itself when it already lives on ``device``, else a copy moved there."""
    device = torch.device(device)
    first = next(model.parameters(), None)
    if first is not None and first.device == device:
        return model
    return copy.deepcopy(model).to(device)


def example_input(model: nn.Module, shape, device) -> torch.Tensor:
    """Zeros of ``shape`` on ``device`` in the dtype of the model's first floating parameter."""
    dtype = next((p.dtype for p in model.parameters() if p.is_floating_point()), torch.float32)
    return torch.zeros(shape, device=device, dtype=dtype)


def run_hooked(model: nn.Module, shape, device, hooks) -> None:
    """One forward pass of ``model`` in evaluation mode on zeros of ``shape`` with, on every
    leaf module, the forward hooks ``hook(name)`` for each ``hook`` in ``hooks`` (removed
    afterwards; the training flag is restored)."""
    handles = [module.register_forward_hook(hook(name)) for name, module in leaf_modules(model)
               for hook in hooks]
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            model(example_input(model, shape, device))
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
    """MACs of a linear layer applied to ``rows`` input vectors (one MAC = 2 FLOPs)."""
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
        import matplotlib.pyplot as plt  # lazy: 0.6 s to import; the graded exercises never plot

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
    net = on_device(model, device)
    profile = OpsProfile(tuple(shape))

    def hook(name):
        def record(module, inputs, output):
            profile.layers.append(LayerOps(name, type(module).__name__, tuple(output.shape),
                                           layer_macs(module, inputs, output)))
        return record

    run_hooked(net, shape, device, [hook])
    return profile


def counter_flops(model: nn.Module, shape=(1, 1, 28, 28), device="meta") -> int:
    """Total FLOPs of one forward pass according to PyTorch's ``FlopCounterMode`` (the reference)."""
    net = on_device(model, device)
    net_mode = net.training
    net.eval()
    try:
        with torch.no_grad(), FlopCounterMode(display=False) as counter:
            net(example_input(net, shape, device))
    finally:
        net.train(net_mode)
    return counter.get_total_flops()
