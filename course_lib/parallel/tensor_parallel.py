"""Tensor parallelism: one layer's matrix split over ranks (lesson 13).

Megatron-LM's MLP split (Shoeybi et al. 2019, "Megatron-LM: Training Multi-Billion
Parameter Language Models Using Model Parallelism", section 3): for ``Y = act(X A)``,
``Z = Y B`` on ``N`` ranks,

- the first layer is **column-parallel**: rank ``r`` holds the block of output features
  ``A_r`` (rows ``r`` of PyTorch's ``weight``, which is stored ``out x in``) and computes
  ``Y_r = act(X A_r)`` without talking to anyone (the activation is element-wise);
- the second layer is **row-parallel**: rank ``r`` holds the matching input features
  ``B_r`` and computes a partial ``Y_r B_r``; one **all-reduce** sums the partials.

One all-reduce in the forward pass (operator ``g``) and one in the backward pass (operator
``f``, on the gradient of ``X``) per MLP. :class:`ColumnParallelLinear`,
:class:`RowParallelLinear` and :func:`megatron_mlp` build this from scratch;
:func:`tp_worker` checks it (outputs and gradients) against the full MLP and against
PyTorch's DTensor version, ``parallelize_module`` with ``ColwiseParallel`` /
``RowwiseParallel`` on a one-dimensional device mesh. :func:`run` starts it on ``k``
processes (gloo on CPUs, NCCL when there is a GPU per process).

A whole transformer block (:class:`course_lib.transformer_block.TransformerBlock`) splits
the same way twice (Megatron-LM, section 3, Figure 3): the query, key and value projections
are column-parallel **by heads** (rank ``r`` computes attention for its own heads, with no
communication) and the output projection is row-parallel; then the MLP as above. Two
all-reduces in the forward pass per block, two in the backward pass; LayerNorms and the
residual stream are replicated. :class:`ParallelBlock` builds it, :func:`block_worker` checks
it against the full block and against ``parallelize_module``, and measures the activation
bytes a rank keeps; :func:`block_run` starts it.
"""
from __future__ import annotations

import copy

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from .launch import init_process_group, launch


class _CopyToParallel(torch.autograd.Function):
    """Megatron's ``f``: identity forward; all-reduce the gradient in the backward pass
    (every rank used the same input, so its gradient is the sum of the ranks' parts)."""

    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, grad):
        grad = grad.clone()
        dist.all_reduce(grad)
        return grad


class _ReduceFromParallel(torch.autograd.Function):
    """Megatron's ``g``: all-reduce (sum) the partial outputs; identity backward."""

    @staticmethod
    def forward(ctx, x):
        x = x.clone()
        dist.all_reduce(x)
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad


def shard_bounds(size: int, rank: int, world: int) -> tuple[int, int]:
    """``[start, stop)`` of rank ``rank``'s block when ``size`` items are cut into ``world``
    nearly equal blocks (``torch.tensor_split``'s rule: the first ``size % world`` get one more)."""
    base, extra = divmod(size, world)
    start = rank * base + min(rank, extra)
    return start, start + base + (rank < extra)


class ColumnParallelLinear(nn.Module):
    """This rank's block of output features of ``full`` (a ``nn.Linear``): weight rows and
    bias entries ``shard_bounds(out_features)``. ``forward(x)`` returns this rank's columns
    of the output; no communication in the forward pass."""

    def __init__(self, full: nn.Linear, rank: int, world: int):
        super().__init__()
        lo, hi = shard_bounds(full.out_features, rank, world)
        self.weight = nn.Parameter(full.weight.detach()[lo:hi].clone())
        self.bias = nn.Parameter(full.bias.detach()[lo:hi].clone()) if full.bias is not None else None

    def forward(self, x):
        return F.linear(_CopyToParallel.apply(x), self.weight, self.bias)


class RowParallelLinear(nn.Module):
    """This rank's block of input features of ``full``: weight columns
    ``shard_bounds(in_features)``. ``forward(x_part)`` multiplies this rank's part of the
    input, all-reduces the partial sums and adds the (unsplit) bias once."""

    def __init__(self, full: nn.Linear, rank: int, world: int):
        super().__init__()
        lo, hi = shard_bounds(full.in_features, rank, world)
        self.weight = nn.Parameter(full.weight.detach()[:, lo:hi].clone())
        self.bias = nn.Parameter(full.bias.detach().clone()) if full.bias is not None else None

    def forward(self, x_part):
        out = _ReduceFromParallel.apply(F.linear(x_part, self.weight))
        return out + self.bias if self.bias is not None else out


def make_mlp(d_model: int = 32, d_hidden: int = 128, seed: int = 0) -> nn.Sequential:
    """The transformer MLP block ``Linear(d, 4d) -> GELU -> Linear(4d, d)`` (same weights for
    the same ``seed`` on every rank)."""
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(d_model, d_hidden), nn.GELU(), nn.Linear(d_hidden, d_model))


def megatron_mlp(full: nn.Sequential, rank: int, world: int) -> nn.Sequential:
    """Rank ``rank``'s part of ``full`` (Linear, activation, Linear): column-parallel first
    layer, the activation unchanged, row-parallel second layer."""
    return nn.Sequential(ColumnParallelLinear(full[0], rank, world), full[1],
                         RowParallelLinear(full[2], rank, world))


class ParallelBlock(nn.Module):
    """Rank ``rank``'s part of a :class:`~course_lib.transformer_block.TransformerBlock`:
    ``n_heads / world`` heads (query, key and value rows of those heads), the matching columns
    of the output projection, a ``1/world`` block of the MLP. LayerNorms are replicated."""

    def __init__(self, full, rank: int, world: int):
        super().__init__()
        n_heads = full.q.out_features // full.head_dim
        if n_heads % world:
            raise ValueError(f"{n_heads} heads do not split evenly over {world} ranks")
        self.block = copy.deepcopy(full)
        lo, hi = shard_bounds(full.q.out_features, rank, world)   # whole heads: n_heads % world == 0
        for name in ("q", "k", "v"):
            setattr(self.block, name, _local_linear(getattr(full, name), lo, hi))
        self.block.proj = RowParallelLinear(full.proj, rank, world)
        f_lo, f_hi = shard_bounds(full.fc1.out_features, rank, world)
        self.block.fc1 = _local_linear(full.fc1, f_lo, f_hi)
        self.block.fc2 = RowParallelLinear(full.fc2, rank, world)

    def forward(self, x):
        b = self.block
        x = x + b.proj(b.attention(_CopyToParallel.apply(b.ln1(x))))       # f ... g
        return x + b.fc2(F.gelu(b.fc1(_CopyToParallel.apply(b.ln2(x)))))   # f ... g


def _local_linear(full: nn.Linear, lo: int, hi: int) -> nn.Linear:
    """An ``nn.Linear`` holding output features ``[lo, hi)`` of ``full`` (no communication:
    the caller applies Megatron's ``f`` once to the shared input)."""
    part = nn.Linear(full.in_features, hi - lo, bias=full.bias is not None)
    with torch.no_grad():
        part.weight.copy_(full.weight[lo:hi])
        if full.bias is not None:
            part.bias.copy_(full.bias[lo:hi])
    return part.to(full.weight.device)


BLOCK_PLAN = {"q": "colwise", "k": "colwise", "v": "colwise", "proj": "rowwise",
              "fc1": "colwise", "fc2": "rowwise"}
"""The DTensor plan for a TransformerBlock: which submodule gets ``ColwiseParallel`` and which
``RowwiseParallel``."""


def _grads(module):
    return [p.grad.full_tensor() if hasattr(p.grad, "full_tensor") else p.grad
            for p in module.parameters()]


def _local_nbytes(module) -> int:
    total = 0
    for p in module.parameters():
        t = p.to_local() if hasattr(p, "to_local") else p
        total += t.numel() * t.element_size()
    return total


def tp_worker(d_model: int = 32, d_hidden: int = 128, batch: int = 8, seed: int = 0,
              backend: str | None = None) -> dict:
    """Worker: the full MLP, our Megatron split and PyTorch's DTensor split on the same input.

    Returns the largest differences from the full MLP (outputs; gradients of the input and
    of every weight, each rank's block compared with the matching block of the full
    gradient), the local weight shapes of both splits, and the parameter bytes per rank.
    """
    rank, world, device = init_process_group(backend)
    full = make_mlp(d_model, d_hidden, seed).to(device)
    gen = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(batch, d_model, generator=gen).to(device)

    x_full = x.clone().requires_grad_()
    y_full = full(x_full)
    y_full.square().sum().backward()

    ours = megatron_mlp(full, rank, world)
    x_ours = x.clone().requires_grad_()
    y_ours = ours(x_ours)
    y_ours.square().sum().backward()
    lo, hi = shard_bounds(d_hidden, rank, world)
    expected = [full[0].weight.grad[lo:hi], full[0].bias.grad[lo:hi],
                full[2].weight.grad[:, lo:hi], full[2].bias.grad]
    ours_grad = max(float((g - e).abs().max()) for g, e in zip(_grads(ours), expected))

    dtensor = copy.deepcopy(full)
    dtensor.zero_grad(set_to_none=True)
    from torch.distributed.device_mesh import init_device_mesh  # lazy: DTensor costs the notebook 0.5 s
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    mesh = init_device_mesh(device.type, (world,))
    parallelize_module(dtensor, mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
    x_dt = x.clone().requires_grad_()
    y_dt = dtensor(x_dt)
    y_dt.square().sum().backward()
    dt_grad = max(float((g - f.grad).abs().max()) for g, f in zip(_grads(dtensor), full.parameters()))

    result = {
        "rank": rank, "world_size": world, "device": str(device),
        "ours_output_error": float((y_ours - y_full).abs().max()),
        "ours_input_grad_error": float((x_ours.grad - x_full.grad).abs().max()),
        "ours_weight_grad_error": ours_grad,
        "dtensor_output_error": float((y_dt - y_full).abs().max()),
        "dtensor_input_grad_error": float((x_dt.grad - x_full.grad).abs().max()),
        "dtensor_weight_grad_error": dt_grad,
        "ours_shapes": [tuple(p.shape) for p in ours.parameters()],
        "dtensor_shapes": [tuple(p.to_local().shape) for p in dtensor.parameters()],
        "full_param_bytes": _local_nbytes(full),
        "ours_param_bytes": _local_nbytes(ours),
        "dtensor_param_bytes": _local_nbytes(dtensor),
    }
    dist.destroy_process_group()
    return result


def run(k: int = 2, timeout: float = 120.0, **options) -> list[dict]:
    """Run :func:`tp_worker` on ``k`` processes from a notebook; results by rank."""
    return launch(tp_worker, k, timeout=timeout, **options)


def block_worker(d_model: int = 32, n_heads: int = 4, d_ff: int | None = None, batch: int = 2,
                 seq_len: int = 8, seed: int = 0, backend: str | None = None) -> dict:
    """Worker: a full transformer block, our :class:`ParallelBlock` and PyTorch's
    ``parallelize_module`` (plan :data:`BLOCK_PLAN`) on the same input.

    Returns the largest differences from the full block (output, input gradient, the
    gradients of this rank's weight blocks), the local shapes of the query and ``fc1``
    weights, the parameter bytes per rank, and the activation bytes this rank keeps for the
    backward pass (autograd's saved tensors, ``training_memory.activation_bytes``) with the
    full block's for comparison.
    """
    from ..training_memory import activation_bytes
    from ..transformer_block import make_block

    rank, world, device = init_process_group(backend)
    full = make_block(d_model, n_heads, d_ff, seed).to(device)
    gen = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(batch, seq_len, d_model, generator=gen).to(device)

    x_full = x.clone().requires_grad_()
    y_full = full(x_full)
    y_full.square().sum().backward()

    ours = ParallelBlock(full, rank, world)
    ours.zero_grad(set_to_none=True)
    x_ours = x.clone().requires_grad_()
    y_ours = ours(x_ours)
    y_ours.square().sum().backward()
    lo, hi = shard_bounds(d_model, rank, world)
    f_lo, f_hi = shard_bounds(full.fc1.out_features, rank, world)
    pairs = [(ours.block.q.weight, full.q.weight.grad[lo:hi]), (ours.block.v.bias, full.v.bias.grad[lo:hi]),
             (ours.block.proj.weight, full.proj.weight.grad[:, lo:hi]),
             (ours.block.fc1.weight, full.fc1.weight.grad[f_lo:f_hi]),
             (ours.block.fc2.weight, full.fc2.weight.grad[:, f_lo:f_hi]), (ours.block.ln1.weight, full.ln1.weight.grad)]
    weight_error = max(float((mine.grad - expected).abs().max()) for mine, expected in pairs)

    from torch.distributed.device_mesh import init_device_mesh  # lazy: DTensor costs the notebook 0.5 s
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    styles = {"colwise": ColwiseParallel, "rowwise": RowwiseParallel}
    dtensor = copy.deepcopy(full)
    dtensor.zero_grad(set_to_none=True)
    mesh = init_device_mesh(device.type, (world,))
    parallelize_module(dtensor, mesh, {name: styles[style]() for name, style in BLOCK_PLAN.items()})
    x_dt = x.clone().requires_grad_()
    y_dt = dtensor(x_dt)
    y_dt.square().sum().backward()

    shape = (batch, seq_len, d_model)
    result = {
        "rank": rank, "world_size": world, "device": str(device),
        "ours_output_error": float((y_ours - y_full).abs().max()),
        "ours_input_grad_error": float((x_ours.grad - x_full.grad).abs().max()),
        "ours_weight_grad_error": weight_error,
        "dtensor_output_error": float((y_dt - y_full).abs().max()),
        "dtensor_input_grad_error": float((x_dt.grad - x_full.grad).abs().max()),
        "ours_shapes": {"q.weight": tuple(ours.block.q.weight.shape), "fc1.weight": tuple(ours.block.fc1.weight.shape)},
        "dtensor_shapes": {"q.weight": tuple(dtensor.q.weight.to_local().shape),
                           "fc1.weight": tuple(dtensor.fc1.weight.to_local().shape)},
        "full_param_bytes": _local_nbytes(full),
        "ours_param_bytes": _local_nbytes(ours),
        "full_activation_bytes": activation_bytes(full, shape, device),
        "ours_activation_bytes": activation_bytes(ours, shape, device),
    }
    dist.destroy_process_group()
    return result


def block_run(k: int = 2, timeout: float = 120.0, **options) -> list[dict]:
    """Run :func:`block_worker` on ``k`` processes from a notebook; results by rank."""
    return launch(block_worker, k, timeout=timeout, **options)
