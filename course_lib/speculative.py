"""Speculative decoding: a cheap draft proposes, the target verifies (lesson 16).

Leviathan, Kalman and Matias 2023 ("Fast Inference from Transformers via Speculative Decoding",
ICML, arXiv:2211.17192): a draft model proposes ``k`` tokens one by one; the target runs once
on all of them and keeps the longest prefix it agrees with, plus one token of its own. With a
draft token accepted with probability ``a`` (independently), a target step yields

    E[tokens per target step] = (1 - a^(k+1)) / (1 - a)          (their equation 1)

tokens, between 1 (nothing accepted) and ``k + 1``. The sampled rule (accept draft token ``x``
with probability ``min(1, p(x) / q(x))``, on rejection draw from ``max(0, p - q)`` normalised)
leaves the output distributed exactly as the target's ``p`` (their Theorem 1); greedy decoding
accepts exactly the tokens the target's argmax would give, so the output is the target's own.

:func:`speculative_greedy` runs the greedy case on :mod:`course_lib.tiny_lm` models and counts
what it accepted.
"""
from __future__ import annotations

import torch


def expected_tokens_per_step(a: float, k: int) -> float:
    """Tokens per target step for acceptance rate ``a`` (0 <= a <= 1) and ``k`` draft tokens."""
    if a >= 1:
        return k + 1.0
    return (1 - a ** (k + 1)) / (1 - a)


def acceptance_rate(accepted: list, k: int) -> float:
    """The per-token acceptance rate ``a`` estimated from the draft tokens kept in each round
    (``accepted``, each 0..k): kept tokens over tokens *compared*, which are ``n + 1`` in a round
    that kept ``n < k`` (the first rejection ends it) and ``k`` in a round that kept all (the
    maximum-likelihood estimate for independent acceptances; kept / (k * rounds) would count
    tokens never compared and underestimate ``a``)."""
    compared = sum(min(n + 1, k) for n in accepted)
    return sum(accepted) / compared if compared else 0.0


@torch.no_grad()
def speculative_greedy(target, draft, prompt: torch.Tensor, n_new: int, k: int) -> dict:
    """Greedy speculative decoding of ``n_new`` tokens after ``prompt`` ``(1, s)``.

    Each round the draft proposes ``k`` greedy tokens; the target scores prompt + proposals in one
    forward pass; proposals are kept while they equal the target's argmax, and the target's token
    at the first difference (or after all ``k``) is appended. Returns ``tokens`` (``n_new``
    ints), ``accepted`` (draft tokens kept per round), ``rounds`` (target forward passes) and
    ``draft_steps``. Neither model keeps a cache here (the counts, not the time, are the point).
    """
    seq, accepted, draft_steps = prompt, [], 0
    while seq.shape[1] - prompt.shape[1] < n_new:
        proposal = seq
        for _ in range(k):
            nxt = draft(proposal)[:, -1].argmax(-1, keepdim=True)
            proposal = torch.cat([proposal, nxt], dim=1)
            draft_steps += 1
        wanted = target(proposal)[0, seq.shape[1] - 1:].argmax(-1)   # k + 1 target tokens
        guesses = proposal[0, seq.shape[1]:]
        n = 0
        while n < k and guesses[n] == wanted[n]:
            n += 1
        accepted.append(n)
        seq = torch.cat([seq, wanted[None, :n + 1]], dim=1)
    return {"tokens": seq[0, prompt.shape[1]:prompt.shape[1] + n_new].tolist(), "accepted": accepted,
            "rounds": len(accepted), "draft_steps": draft_steps}
