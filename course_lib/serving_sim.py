"""Static and continuous batching in a discrete-event simulator driven by the roofline (lesson 16).

A *trace* lists requests: arrival time (seconds), prompt tokens, output tokens. The server runs
*steps*; a step prefills the requests admitted at it (their prompt, or all they held if they were
evicted before) and decodes one token for every other running request. Its duration is the
roofline's (:mod:`course_lib.inference_cost`): ``max(FLOPs / peak, bytes / bandwidth)`` with
the weights read once for the whole batch, on a named GPU. The KV cache holds at most
``budget`` tokens.

A *scheduler* decides, before each step, who runs: ``scheduler(running, waiting, budget) ->
(running, waiting)``, where ``running`` lists ``[id, tokens]`` (KV tokens held, in admission
order) and ``waiting`` lists ``[id, tokens]`` (the tokens it will hold once prefilled: its prompt
plus what it generated before an eviction), in queue order. Every running request then writes one
more token, so a schedule is within the budget when ``sum(tokens + 1) <= budget``.
A request moved from running back to waiting is *evicted* (its cache dropped, recomputed when
it runs again).

- :func:`static_scheduler`: batches of up to ``batch`` requests, each reserving ``max_len``
  tokens, run until the whole batch is done (no one joins a running batch);
- :func:`reserving_scheduler`: continuous batching (Yu et al. 2022, "Orca", OSDI: requests join
  and leave at every step) where each request reserves ``max_len`` tokens on admission;
- :func:`simulate`: runs a trace; returns throughput (tokens/s), time to first token and the
  time between a request's tokens (seconds, p50 and p99), and the budget's worst excess.
"""
from __future__ import annotations

import random

import numpy as np

from .inference_cost import Shape, step_bytes, step_flops


def make_trace(n: int, rate: float, prompt: tuple[int, int], output: tuple[int, int], seed: int = 0) -> list:
    """``n`` requests arriving as a Poisson process of ``rate`` per second, prompt and output
    lengths uniform in the given inclusive ranges: ``[(arrival_s, prompt, output), ...]``."""
    rng, t, trace = random.Random(seed), 0.0, []
    for _ in range(n):
        t += rng.expovariate(rate)
        trace.append((t, rng.randint(*prompt), rng.randint(*output)))
    return trace


def static_scheduler(batch: int, max_len: int):
    """Static batching: when nothing runs, admit up to ``batch`` waiting requests (in order) whose
    ``max_len`` reservations fit; while any runs, admit none."""
    def schedule(running, waiting, budget):
        if running:
            return running, waiting
        room = min(batch, budget // max_len)
        return [list(r) for r in waiting[:room]], [list(r) for r in waiting[room:]]
    return schedule


def reserving_scheduler(max_len: int):
    """Continuous batching that reserves ``max_len`` tokens per request: at every step, admit
    waiting requests in order while their reservations fit beside the running ones'."""
    def schedule(running, waiting, budget):
        room = budget // max_len - len(running)
        room = max(room, 0)
        return [list(r) for r in running] + [list(r) for r in waiting[:room]], [list(r) for r in waiting[room:]]
    return schedule


def step_seconds(shape: Shape, decode_contexts: list, prefill_tokens: list, peak: float, bandwidth: float) -> float:
    """Roofline time of one mixed step: one token for each request of ``decode_contexts`` (the
    tokens it holds) and a prefill of each entry of ``prefill_tokens``; weights read once."""
    flops = sum(step_flops(shape, 1, 1, c) for c in decode_contexts)
    flops += sum(step_flops(shape, 1, p, 0) for p in prefill_tokens)
    weights = shape.params * shape.bytes_per_value
    moved = weights + sum(step_bytes(shape, 1, 1, c) - weights for c in decode_contexts)
    moved += sum(step_bytes(shape, 1, p, 0) - weights for p in prefill_tokens)
    return max(flops / peak, moved / bandwidth)


def _percentile(values, q):
    return float(np.percentile(values, q)) if values else float("nan")


def simulate(trace: list, scheduler, budget: int, shape: Shape, peak: float, bandwidth: float,
             max_steps: int = 100_000) -> dict:
    """Run ``trace`` under ``scheduler`` with a KV budget of ``budget`` tokens (see the module).

    Returns ``throughput`` (output tokens per second of the whole run), ``ttft_mean``,
    ``ttft_p50``/``ttft_p99`` (seconds from arrival to first token), ``tpot_p50``/``tpot_p99``
    (seconds between consecutive tokens of a request), ``seconds`` (the run), ``steps``,
    ``max_batch``, ``evictions`` and ``over_budget`` (the largest ``sum(tokens + 1) - budget`` of
    any schedule, 0 when always within budget); ``finished`` counts completed requests."""
    prompt = {i: p for i, (_, p, _) in enumerate(trace)}
    wanted = {i: o for i, (_, _, o) in enumerate(trace)}
    made, last, first, gaps = dict.fromkeys(prompt, 0), {}, {}, []
    running, waiting, t, arrived = [], [], 0.0, 0
    stats = {"steps": 0, "max_batch": 0, "evictions": 0, "over_budget": 0}
    while len(first) < len(trace) or running or waiting or arrived < len(trace):
        while arrived < len(trace) and trace[arrived][0] <= t:
            waiting.append([arrived, prompt[arrived]])
            arrived += 1
        if not running and not waiting:
            if arrived == len(trace):
                break
            t = trace[arrived][0]
            continue
        before = {r[0] for r in running}
        running, waiting = scheduler([list(r) for r in running], [list(r) for r in waiting], budget)
        running, waiting = [list(r) for r in running], [list(r) for r in waiting]
        now = {r[0] for r in running}
        stats["evictions"] += len(before - now)
        for r in waiting:
            if r[0] in before:
                r[1] = prompt[r[0]] + made[r[0]]
        stats["over_budget"] = max(stats["over_budget"], sum(r[1] + 1 for r in running) - budget)
        stats["max_batch"] = max(stats["max_batch"], len(running))
        stats["steps"] += 1
        if stats["steps"] > max_steps:
            raise RuntimeError(f"no end after {max_steps} steps: does the scheduler ever admit?")
        if not running:   # nothing admitted: wait for the next arrival (or give up)
            if arrived == len(trace):
                raise RuntimeError("requests wait and the scheduler admits none of them")
            t = max(t, trace[arrived][0])
            continue
        prefill = [r[1] for r in running if r[0] not in before]
        decode = [r[1] for r in running if r[0] in before]
        t += step_seconds(shape, decode, prefill, peak, bandwidth)
        still = []
        for r in running:
            i = r[0]
            made[i] += 1
            r[1] = prompt[i] + made[i]
            if i in first:
                gaps.append(t - last[i])
            else:
                first[i] = t - trace[i][0]
            last[i] = t
            if made[i] < wanted[i]:
                still.append(r)
        running = still
    tokens = sum(wanted.values())
    ttft = list(first.values())
    return {"throughput": tokens / t, "seconds": t, "finished": sum(made[i] >= wanted[i] for i in made),
            "ttft_mean": float(np.mean(ttft)), "ttft_p50": _percentile(ttft, 50), "ttft_p99": _percentile(ttft, 99),
            "tpot_p50": _percentile(gaps, 50), "tpot_p99": _percentile(gaps, 99), **stats}
