"""Context parallelism: attention over a sequence split across ranks, keys and values passed
around a ring (lesson 17; Ring Attention, Liu et al. 2023; Brandon et al. 2023 for load balance).

The sequence of ``N`` positions is cut into chunks and every rank keeps the queries of its own
chunks for the whole computation. Its keys and values travel: at each of ``W`` steps a rank
computes attention of its queries against the key/value block it holds, sends that block to the
next rank (``isend``) and receives the previous rank's (``irecv``), overlapping the transfer
with the compute. No rank ever holds more than two blocks of keys and values, and no rank
builds the full N x N score matrix.

Each block's contribution is a partial softmax: per query row the maximum score ``m``, the sum
``l`` of ``exp(score - m)`` and the unnormalized output ``O = sum exp(score - m) v``. Two states
merge exactly by rescaling both to the larger maximum (:func:`merge`, lesson 15's online
softmax); the output is ``O / l`` at the end.

With a causal mask, a query chunk sees only key chunks at or before it. With contiguous chunks
(rank r holds chunk r) the last rank has W blocks of work and the first one: :func:`chunk_work`.
**Zig-zag** sharding cuts the sequence into ``2W`` chunks and gives rank r chunks ``r`` and
``2W - 1 - r`` (:func:`zigzag_chunks`, as in Llama 3's context parallelism), so every rank's
work is the same.

Units: FLOPs (a multiply and an add are 2; two matrix products of ``2 n_q n_k d`` per block, as
:func:`course_lib.attention.attention_flops`), positions, bytes.
"""
from __future__ import annotations

import math
import time

import torch
import torch.distributed as dist


def contiguous_chunks(world: int) -> list[list[int]]:
    """Rank r holds chunk r of ``world`` equal chunks."""
    return [[r] for r in range(world)]


def zigzag_chunks(world: int) -> list[list[int]]:
    """Rank r holds chunks r and ``2 world - 1 - r`` of ``2 world`` equal chunks: an early chunk
    with little causal work and a late one with much."""
    return [[r, 2 * world - 1 - r] for r in range(world)]


def block_state(q, k, v, scale: float, mask=None):
    """The partial softmax state of queries ``q`` (..., n_q, d) against one block of keys and
    values (..., n_k, d): ``(m, l, O)``, row maximum (..., n_q), row sum of exponentials and
    unnormalized output (..., n_q, d). ``mask`` (n_q, n_k) bool, True where a key is visible;
    every row must see at least one key."""
    scores = (q @ k.transpose(-2, -1)) * scale
    if mask is not None:
        scores = scores.masked_fill(~mask, -math.inf)
    m = scores.amax(-1)
    p = torch.exp(scores - m[..., None])
    return m, p.sum(-1), p @ v


def merge(a, b):
    """Two partial states ``(m, l, O)`` of the same query rows over disjoint key sets merged into
    the state over both: each rescaled by ``exp(its m - the larger m)``. ``a`` may be None."""
    if a is None:
        return b
    (ma, la, oa), (mb, lb, ob) = a, b
    m = torch.maximum(ma, mb)
    sa, sb = torch.exp(ma - m), torch.exp(mb - m)
    return m, la * sa + lb * sb, oa * sa[..., None] + ob * sb[..., None]


def _blocks(q_chunks, k_chunks, chunk: int, causal: bool):
    """(query slice, key slice, mask or None) for every pair of a query chunk and a key chunk
    that has visible keys; chunk indices are global, slices are into the rank's local tensors."""
    for i, qc in enumerate(q_chunks):
        for j, kc in enumerate(k_chunks):
            if causal and kc > qc:
                continue
            mask = torch.ones(chunk, chunk, dtype=torch.bool).tril() if causal and kc == qc else None
            yield slice(i * chunk, (i + 1) * chunk), slice(j * chunk, (j + 1) * chunk), mask


def ring_attention(q, k, v, layout: list[list[int]], causal: bool = False, group=None) -> dict:
    """This rank's attention output over the whole sequence. ``q``, ``k``, ``v`` (..., n_local, d)
    are this rank's chunks (``layout[rank]``, each ``n_local / len(layout[rank])`` positions, in
    that order). Keys and values go round the ring: at step s this rank holds the block of rank
    ``rank - s``. Returns ``{"out": (..., n_local, d), "flops": FLOPs this rank computed,
    "compute_s": its CPU seconds in the block computations}``."""
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    chunk = q.shape[-2] // len(layout[rank])
    scale = q.shape[-1] ** -0.5
    kv, state, flops, busy = torch.stack([k, v]).contiguous(), [None] * len(layout[rank]), 0.0, 0.0
    for step in range(world):
        source = (rank - step) % world
        if step < world - 1:
            incoming = torch.empty_like(kv)
            ops = [dist.isend(kv, (rank + 1) % world, group=group),
                   dist.irecv(incoming, (rank - 1) % world, group=group)]
        start = time.thread_time()
        for qs, ks, mask in _blocks(layout[rank], layout[source], chunk, causal):
            i = qs.start // chunk
            state[i] = merge(state[i], block_state(q[..., qs, :], kv[0][..., ks, :], kv[1][..., ks, :], scale, mask))
            flops += 4.0 * chunk * chunk * q.shape[-1] * (q[..., 0, 0].numel())
        busy += time.thread_time() - start
        if step < world - 1:
            for op in ops:
                op.wait()
            kv = incoming
    out = torch.cat([o / total[..., None] for _, total, o in state], dim=-2)
    return {"out": out, "flops": flops, "compute_s": busy}


def chunk_work(layout: list[list[int]], causal: bool = True) -> list[int]:
    """Blocks of (query chunk, key chunk) each rank computes under ``layout`` (the diagonal
    block counted whole, as a dense kernel computes it)."""
    every = sorted(c for chunks in layout for c in chunks)
    return [sum(1 for qc in chunks for kc in every if not causal or kc <= qc) for chunks in layout]


def positions(layout: list[list[int]], n: int) -> list[torch.Tensor]:
    """The sequence positions each rank holds when ``n`` positions are cut into the layout's
    equal chunks."""
    n_chunks = sum(len(chunks) for chunks in layout)
    size = n // n_chunks
    return [torch.cat([torch.arange(c * size, (c + 1) * size) for c in chunks]) for chunks in layout]


def causal_pairs(held: torch.Tensor) -> int:
    """(query, key) pairs a rank holding query positions ``held`` computes under a causal mask:
    ``sum(p + 1)``, each query sees itself and every earlier position."""
    return int((held + 1).sum())


def demo_worker(q, k, v, layout: list[list[int]], causal: bool, repeats: int = 1) -> dict:
    """Worker for the lecture: this rank takes its chunks of the full ``q``, ``k``, ``v``
    (..., N, d), runs :func:`ring_attention` ``repeats`` times and returns its output, FLOPs and
    the least CPU seconds of its block computations."""
    from .launch import init_process_group

    rank, world, _ = init_process_group("gloo", timeout=60)
    mine = positions(layout, q.shape[-2])[rank]
    runs = [ring_attention(q[..., mine, :], k[..., mine, :], v[..., mine, :], layout, causal)
            for _ in range(repeats)]
    return {"out": runs[0]["out"], "positions": mine, "flops": runs[0]["flops"],
            "compute_s": min(r["compute_s"] for r in runs)}
