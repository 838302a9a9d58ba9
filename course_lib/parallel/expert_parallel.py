"""Expert parallelism: a mixture-of-experts layer whose experts live on different ranks, with
tokens moved by two all-to-alls (lesson 17; GShard, Lepikhin et al. 2021).

Every rank holds ``T`` tokens (its share of the batch) and ``E / W`` of the ``E`` experts:
expert ``e`` lives on rank ``e // (E / W)``. One layer's forward is

1. **route** locally (:func:`course_lib.moe.top_k_route`): each kept assignment (token, choice)
   names its expert, hence the rank that must see the token;
2. **dispatch**: sort the assignments by expert, tell every rank how many rows it will get for
   each of its experts (an all-to-all of counts, integers), then send the tokens' rows with
   ``all_to_all_single`` and *uneven* splits (the counts differ from rank to rank and step to step);
3. apply the local experts to what arrived, grouped by source rank and expert;
4. **combine**: the reverse all-to-all returns each output row to the rank its token came from,
   which adds it in with the gate's weight.

Only rows for other ranks cross a link: :func:`all_to_all_bytes` is that count,
rows out for its own tokens plus rows back for other ranks' tokens, ``d * element_bytes`` each,
and :mod:`.bytes_sent` measures it.
The same code runs with NCCL when the tensors are on GPUs.

Units: rows (tokens), bytes.
"""
from __future__ import annotations

import torch
import torch.distributed as dist

from ..moe import Routing, expert, moe_forward, top_k_route


def owner(expert_index: torch.Tensor, experts_per_rank: int) -> torch.Tensor:
    """The rank that holds each expert in ``expert_index`` (contiguous blocks of experts)."""
    return torch.div(expert_index, experts_per_rank, rounding_mode="floor")


def all_to_all_bytes(routings: list[Routing], experts_per_rank: int, d: int, element_bytes: int = 4) -> list[int]:
    """Bytes of activations each rank sends to other ranks in one dispatch and its combine, given
    every rank's routing (``routings[r]``): rank r sends out one ``d``-vector per kept assignment
    of its tokens to an expert elsewhere (dispatch), and one per kept assignment of another rank's
    token to one of its own experts (combine)."""
    world = len(routings)
    out_rows, back_rows = [0] * world, [0] * world
    for rank, routing in enumerate(routings):
        where = owner(routing.experts[routing.kept], experts_per_rank)
        out_rows[rank] += int((where != rank).sum())
        for other in range(world):
            if other != rank:
                back_rows[other] += int((where == other).sum())
    return [(o + b) * d * element_bytes for o, b in zip(out_rows, back_rows)]


def _exchange(rows: torch.Tensor, send_counts: list[int], recv_counts: list[int], group=None) -> torch.Tensor:
    """One ``all_to_all_single`` with uneven splits: ``rows`` grouped by destination rank,
    ``send_counts[r]`` rows to rank r; returns what arrives, grouped by source rank."""
    out = rows.new_empty((sum(recv_counts), *rows.shape[1:]))
    dist.all_to_all_single(out, rows.contiguous(), recv_counts, send_counts, group=group)
    return out


def expert_parallel_forward(x: torch.Tensor, routing: Routing, local_weights: torch.Tensor,
                            group=None) -> torch.Tensor:
    """The layer's output for this rank's tokens ``x`` (T, d), equal to
    :func:`course_lib.moe.moe_forward` with every rank's experts: ``local_weights``
    (E / W, d, d) are this rank's experts. Dispatch and combine are all-to-alls with uneven
    splits; only kept assignments travel."""
    world = dist.get_world_size(group)
    n_local = local_weights.shape[0]
    pairs = routing.kept.nonzero()                                   # (kept assignments, 2): token, choice
    expert_of, order = torch.sort(routing.experts[pairs[:, 0], pairs[:, 1]], stable=True)
    pairs = pairs[order]                                             # grouped by expert, hence by rank
    counts_out = torch.bincount(expert_of, minlength=n_local * world).to(x.device)
    counts_in = torch.empty_like(counts_out)                         # [source rank * n_local + my expert]
    dist.all_to_all_single(counts_in, counts_out, group=group)
    rows_out = counts_out.view(world, n_local).sum(1).tolist()
    rows_in = counts_in.view(world, n_local).sum(1).tolist()
    arrived = _exchange(x[pairs[:, 0]], rows_out, rows_in, group)
    pieces = arrived.split(counts_in.tolist())                       # blocks by source, then by expert
    done = torch.cat([expert(piece, local_weights[i % n_local]) for i, piece in enumerate(pieces)])
    back = _exchange(done, rows_in, rows_out, group)
    weighted = routing.gates[pairs[:, 0], pairs[:, 1]].unsqueeze(1) * back
    return torch.zeros_like(x).index_add_(0, pairs[:, 0], weighted)


def demo_problem(world: int, tokens: int, d: int, experts_per_rank: int, k: int, capacity_factor: float,
                 seed: int = 0):
    """Inputs for :func:`demo_worker`, drawn from ``seed``: per rank its tokens (T, d) and
    router logits (T, E); and every expert's weights (E, d, d), float32."""
    gen = torch.Generator().manual_seed(seed)
    n_experts = experts_per_rank * world
    xs = [torch.randn(tokens, d, generator=gen) for _ in range(world)]
    logits = [torch.randn(tokens, n_experts, generator=gen) for _ in range(world)]
    weights = torch.randn(n_experts, d, d, generator=gen) / d ** 0.5
    return xs, logits, weights


def demo_worker(xs, logits, weights, k: int, capacity_factor: float) -> dict:
    """Worker for the lecture (launched on W gloo processes): route this rank's tokens, run the
    expert-parallel layer under a :class:`.bytes_sent.BytesSent` meter and compare with one
    process. Returns this rank's ``max_error`` (against :func:`moe_forward` on every expert),
    ``bytes_measured`` (floating-point payload sent to other ranks), ``bytes_analytic``
    (:func:`all_to_all_bytes`), ``count_bytes`` (the integer counts' all-to-all), ``load``
    (rows this rank's experts processed) and ``dropped`` (share of assignments dropped)."""
    from .bytes_sent import BytesSent
    from .launch import init_process_group

    rank, world, _ = init_process_group("gloo", timeout=30)
    x, routing = xs[rank], top_k_route(logits[rank], k, capacity_factor)
    per_rank = weights.shape[0] // world
    with BytesSent() as meter:
        y = expert_parallel_forward(x, routing, weights[rank * per_rank:(rank + 1) * per_rank])
    routings = [top_k_route(lg, k, capacity_factor) for lg in logits]   # every rank's (the demo's inputs are shared)
    load = sum(r.load(weights.shape[0]) for r in routings)
    return {"max_error": float((y - moe_forward(x, routing, weights)).abs().max()),
            "bytes_measured": meter.total(floating=True),
            "bytes_analytic": all_to_all_bytes(routings, per_rank, x.shape[1], x.element_size())[rank],
            "count_bytes": meter.total(floating=False),
            "load": load[rank * per_rank:(rank + 1) * per_rank].sum().item(),
            "dropped": routing.dropped_fraction()}
