"""A mixture-of-experts layer on one process: the top-k router, capacity and dropped tokens, the
load-balancing loss, and what a step costs (lesson 17).

A mixture-of-experts (MoE) layer replaces one feed-forward block by ``E`` experts and a router.
For each token ``t`` the router computes ``probs[t] = softmax(x_t W_r)`` over the experts and
sends the token to its ``k`` most probable ones (top-k, Shazeer et al. 2017); the layer's output
is the sum of those experts' outputs weighted by their probabilities (the *gates*). Each expert
processes at most ``capacity = ceil(capacity_factor * k * T / E)`` of the ``T`` tokens of a batch
(GShard, Lepikhin et al. 2021; Switch Transformer, Fedus et al. 2021): a token routed to a full
expert is *dropped* there (it contributes nothing from that expert; the residual connection around
the layer carries it on). Slots are filled first choices first, in token order
(:func:`top_k_route`).

Imbalance costs twice: dropped tokens lose their update, and with the experts on different
devices the busiest expert sets the step's time. Switch Transformer's auxiliary loss
(:func:`switch_balancing_loss`) pushes the router toward uniform use:
``alpha * E * sum_i f_i P_i`` with ``f_i`` the fraction of tokens whose first choice is expert
``i`` and ``P_i`` the mean router probability of expert ``i``; it equals ``alpha`` when both are
uniform.

Units: token counts, FLOPs (a multiply and an add are 2), bytes, seconds.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F


@dataclass
class Routing:
    """Where the router sends each of ``T`` tokens: ``experts`` (T, k) expert indices, best
    first; ``gates`` (T, k) their softmax probabilities; ``kept`` (T, k) bool, False where the
    expert was full (dropped); ``slot`` (T, k) the position in the expert's buffer, -1 where
    dropped; ``capacity`` tokens per expert."""

    experts: torch.Tensor
    gates: torch.Tensor
    kept: torch.Tensor
    slot: torch.Tensor
    capacity: int

    def load(self, n_experts: int) -> torch.Tensor:
        """Tokens each expert processes (kept assignments), a (E,) integer tensor."""
        return torch.bincount(self.experts[self.kept], minlength=n_experts)

    def dropped_fraction(self) -> float:
        """Share of the T * k assignments that were dropped (0 ... 1)."""
        return 1.0 - float(self.kept.float().mean())


def capacity(n_tokens: int, n_experts: int, k: int, capacity_factor: float) -> int:
    """Tokens one expert may process: ``ceil(capacity_factor * k * n_tokens / n_experts)``
    (capacity factor 1.0 = exactly the average load)."""
    return math.ceil(capacity_factor * k * n_tokens / n_experts)


def top_k_route(logits: torch.Tensor, k: int, capacity_factor: float) -> Routing:
    """Route ``T`` tokens (``logits`` (T, E), the router's scores) to their top ``k`` experts
    with a capacity (:func:`capacity`). Slots are filled choice by choice (every token's first
    choice before any second choice, as GShard and Switch do), and within a choice in token
    order; an assignment past its expert's capacity is dropped."""
    n_tokens, n_experts = logits.shape
    probs = torch.softmax(logits, dim=-1)
    gates, experts = probs.topk(k, dim=-1)
    cap = capacity(n_tokens, n_experts, k, capacity_factor)
    filled = torch.zeros(n_experts, dtype=torch.long)
    kept = torch.zeros(n_tokens, k, dtype=torch.bool)
    slot = torch.full((n_tokens, k), -1, dtype=torch.long)
    for choice in range(k):
        onehot = F.one_hot(experts[:, choice], n_experts)
        position = (filled + onehot.cumsum(0) - 1).gather(1, experts[:, choice:choice + 1]).squeeze(1)
        kept[:, choice] = position < cap
        slot[:, choice] = torch.where(kept[:, choice], position, -1)
        filled = torch.clamp(filled + onehot.sum(0), max=cap)
    return Routing(experts, gates, kept, slot, cap)


def switch_balancing_loss(logits: torch.Tensor, alpha: float = 0.01) -> torch.Tensor:
    """Switch Transformer's auxiliary load-balancing loss (Fedus et al. 2021, eq. 4) for top-1
    routing: ``alpha * E * sum_i f_i * P_i``, ``f_i`` the fraction of the T tokens whose top
    choice is expert i (not differentiable), ``P_i`` the mean softmax probability of expert i
    (differentiable). A scalar; ``alpha`` when routing is uniform, up to ``alpha * E``."""
    probs = logits.softmax(-1)
    n_experts = probs.shape[-1]
    top1_share = F.one_hot(probs.argmax(-1), n_experts).to(probs.dtype).mean(0)
    return alpha * n_experts * torch.dot(top1_share, probs.mean(0))


def expert(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """One expert of the course's toy layer: ``tanh(x @ weight)``, ``x`` (n, d), ``weight`` (d, d)."""
    return torch.tanh(x @ weight)


def moe_forward(x: torch.Tensor, routing: Routing, weights: torch.Tensor) -> torch.Tensor:
    """The layer on one process: ``y_t = sum over kept choices c of gates[t, c] *
    expert(x_t, weights[experts[t, c]])``; ``x`` (T, d), ``weights`` (E, d, d). Dropped
    assignments add nothing."""
    y = torch.zeros_like(x)
    for e in range(weights.shape[0]):
        token, choice = ((routing.experts == e) & routing.kept).nonzero(as_tuple=True)
        if token.numel():
            y.index_add_(0, token, routing.gates[token, choice, None] * expert(x[token], weights[e]))
    return y


def dropped_vs_capacity(n_tokens: int, n_experts: int, k: int, factors, skew: float = 0.0,
                        trials: int = 4, seed: int = 0) -> list[dict]:
    """Measured by routing random tokens: for each capacity factor, the share of assignments
    dropped and the busiest expert's load over the mean. Router logits are standard normal plus
    ``skew * i / E`` for expert i (``skew`` 0: a balanced router; larger: a router that prefers
    the last experts). Returns ``[{"factor", "dropped", "max_over_mean"}]``, averaged over trials."""
    gen = torch.Generator().manual_seed(seed)
    bias = skew * torch.arange(n_experts, dtype=torch.float32) / n_experts
    logits = [torch.randn(n_tokens, n_experts, generator=gen) + bias for _ in range(trials)]
    rows = []
    for factor in factors:
        routes = [top_k_route(lg, k, factor) for lg in logits]
        routed = [torch.bincount(r.experts.flatten(), minlength=n_experts).float() for r in routes]
        rows.append({"factor": float(factor),
                     "dropped": sum(r.dropped_fraction() for r in routes) / trials,
                     "max_over_mean": sum(float(c.max() / c.mean()) for c in routed) / trials})
    return rows


def step_costs(tokens: int, d_model: int, d_ff: int, k: int, world: int, link_bytes_per_s: float,
               flops_per_s: float, element_bytes: int = 2, max_over_mean: float = 1.0) -> dict:
    """A roofline of one expert-parallel MoE layer's forward on one of ``world`` devices, each
    holding ``tokens`` tokens and ``E / world`` experts (two-matrix FFN, d_model -> d_ff ->
    d_model): ``compute_s`` = 4 * d_model * d_ff FLOPs per assignment, ``tokens * k *
    max_over_mean`` assignments on the busiest device, over ``flops_per_s``; ``all_to_all_s`` =
    the bytes this device sends in dispatch and combine (the share ``(world - 1) / world`` of its
    ``tokens * k`` assignments that go to other devices, ``d_model * element_bytes`` each, twice)
    over ``link_bytes_per_s`` (one direction). Returns both, and the bytes, in seconds and bytes."""
    assignments = tokens * k
    flops = 4.0 * d_model * d_ff * assignments * max_over_mean
    sent = 2.0 * assignments * (world - 1) / world * d_model * element_bytes
    return {"compute_s": flops / flops_per_s, "all_to_all_s": sent / link_bytes_per_s,
            "flops": flops, "bytes": sent}
