"""Activation checkpointing: keep a block's input, recompute the rest in backward (lesson 08).

Training keeps, between the forward and the backward pass, what every operator saved for its
gradient: for a transformer block the bytes of
:func:`course_lib.transformer_block.activation_bytes_per_layer`. A **checkpointed** block
(``torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False)``) runs its forward without
saving anything but its input ``x`` (``b s d`` values), and runs it again in the backward pass to
get the saved tensors back. Memory falls from the formula's total to ``b s d v`` bytes for that
block; compute grows by the recomputed forward. PyTorch's non-reentrant checkpoint stops the
recomputation once every tensor the backward needs is back, so the block's last product
(``fc2``, whose output nobody saved) is not redone: ``2 b s f d`` FLOPs fewer than a forward.

This module has

- :class:`BlockStack`: transformer blocks of one width ``d`` with their own heads and MLP
  widths, any of them checkpointed per call;
- :func:`kept_bytes`: the bytes autograd keeps after a forward (measured on the tensors it
  saves, each storage once, parameters left out), :func:`step_flops`: the FLOPs of a
  forward and backward (``torch.utils.flop_counter.FlopCounterMode``), :func:`step_seconds`: its
  time (median, :func:`course_lib.timing.benchmark`);
- :func:`measured_costs`: per block, those measured in float32: kept without and with
  checkpointing, and the FLOPs checkpointing adds;
- :func:`checkpoint_from_first`: the simplest plan, checkpointing blocks from the first until
  what is kept fits a budget.

All sizes are bytes, compute in FLOPs, times in seconds.
"""
from __future__ import annotations

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint
from torch.utils.flop_counter import FlopCounterMode

from .timing import benchmark
from .transformer_block import TransformerBlock


class BlockStack(nn.Module):
    """Transformer blocks of width ``d_model``, block ``i`` with ``specs[i] = (n_heads, d_ff)``;
    ``forward(x, checkpointed)`` checkpoints block ``i`` when ``checkpointed[i]`` is true."""

    def __init__(self, d_model: int, specs, seed: int = 0):
        super().__init__()
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.blocks = nn.ModuleList(TransformerBlock(d_model, h, f) for h, f in specs)

    @classmethod
    def of(cls, blocks) -> BlockStack:
        """A stack of existing ``blocks`` (shared, not copied)."""
        stack = cls(0, [])
        stack.blocks = nn.ModuleList(blocks)
        return stack

    def forward(self, x: torch.Tensor, checkpointed=None) -> torch.Tensor:
        checkpointed = list(checkpointed or [False] * len(self.blocks))
        if len(checkpointed) != len(self.blocks):
            raise ValueError(f"{len(checkpointed)} choices for {len(self.blocks)} blocks")
        for block, keep_input_only in zip(self.blocks, checkpointed):
            x = checkpoint(block, x, use_reentrant=False) if keep_input_only else block(x)
        return x


def kept_bytes(model: nn.Module, x: torch.Tensor, checkpointed=None) -> int:
    """Bytes of the tensors autograd saves during ``model(x, checkpointed)`` (each storage
    once, the parameters left out): what training keeps until the backward pass."""
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    saved: dict[int, int] = {}

    def pack(t):
        storage = t.untyped_storage()
        if storage.data_ptr() not in params:
            saved[storage.data_ptr()] = max(saved.get(storage.data_ptr(), 0), storage.nbytes())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = model(x, checkpointed)
    del out
    return sum(saved.values())


def _step(model: nn.Module, x: torch.Tensor, checkpointed) -> None:
    model.zero_grad(set_to_none=True)
    model(x, checkpointed).sum().backward()


def step_flops(model: nn.Module, x: torch.Tensor, checkpointed=None) -> int:
    """FLOPs of one forward and backward pass (``FlopCounterMode``: matrix products)."""
    with FlopCounterMode(display=False) as counter:
        _step(model, x, checkpointed)
    return counter.get_total_flops()


def step_seconds(model: nn.Module, x: torch.Tensor, checkpointed=None, repeat: int = 5) -> float:
    """Median seconds of one forward and backward pass on ``x``'s device."""
    return benchmark(lambda: _step(model, x, checkpointed), device=x.device, warmup=1, repeat=repeat).median


def measured_costs(model: BlockStack, x: torch.Tensor) -> list[dict[str, int]]:
    """Per block of ``model`` on ``x`` (float32): ``{"activations": bytes kept without
    checkpointing, "checkpointed": bytes kept when checkpointed, "recompute_flops": FLOPs a
    training step gains when it is checkpointed}``, each measured on that block alone."""
    costs, h = [], x
    for block in model.blocks:
        alone = BlockStack.of([block])
        inp = h.detach()
        costs.append({"activations": kept_bytes(alone, inp, [False]), "checkpointed": kept_bytes(alone, inp, [True]),
                      "recompute_flops": step_flops(alone, inp, [True]) - step_flops(alone, inp, [False])})
        with torch.no_grad():
            h = block(h)
    return costs


def checkpoint_from_first(costs, budget: float) -> list[bool] | None:
    """Checkpoint blocks in order from the first until the bytes kept (``"activations"`` of a
    block left alone, ``"checkpointed"`` of a checkpointed one) fit ``budget``; None when even
    checkpointing every block does not. Simple, and not the cheapest in recomputation."""
    plan = [False] * len(costs)
    for i in range(len(costs) + 1):
        if sum(c["checkpointed"] if p else c["activations"] for c, p in zip(costs, plan)) <= budget:
            return plan
        if i < len(costs):
            plan[i] = True
    return None
