"""Prefill and decode on the roofline: what one inference step of a transformer costs (lesson 16).

A step runs ``tokens`` new tokens of each of ``batch`` requests through a model of ``params``
parameters (``bytes_per_param`` bytes each), whose requests already hold ``context`` tokens of
KV cache (``kv_bytes_per_token`` bytes each, :func:`course_lib.kv_cache.kv_bytes_per_token`).
Counting matrix products only (2 FLOPs per multiply-add) and DRAM traffic only:

- FLOPs: ``2 * params`` per token (each weight multiplies each token once; Kaplan et al. 2020,
  arXiv:2001.08361, section 2.1) plus the attention's ``4 * layers * heads * head_dim`` per
  token and position it reads (scores and the weighted sum of values);
- bytes: every weight read once per step (shared by the whole batch), every request's cache
  read once, the new tokens' keys and values written.

*Prefill* (the prompt, many tokens per request) reuses each weight for many tokens and lands
right of the ridge: compute-bound. *Decode* (one token per request) reads every weight for
``batch`` tokens: its intensity is about ``batch`` FLOPs per byte in 16 bits (weights), far left
of an H100's ridge (about 295 FLOP/byte in bf16), so the step time is the bytes over the
bandwidth until the batch is large; the cache reads grow with the batch too, so a long context
keeps decode memory-bound at any batch (:func:`critical_batch`).
:func:`step_seconds` is the roofline's time: ``max(FLOPs / peak, bytes / bandwidth)``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from .kv_cache import MODEL_SHAPES, kv_bytes_per_token
from .transformer_cost import gpu_spec, peak_flops


@dataclass(frozen=True)
class Shape:
    """What the cost needs of a model: parameters, layers, query heads, key/value heads, features
    per head, and bytes per parameter and per cached value."""
    params: float
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    bytes_per_value: float = 2

    @property
    def kv_bytes_per_token(self) -> float:
        """Bytes of KV cache per token (``2 * layers * kv_heads * head_dim * bytes``)."""
        return kv_bytes_per_token(self.layers, self.kv_heads, self.head_dim, self.bytes_per_value)


def published(name: str, bytes_per_value: float = 2) -> Shape:
    """The :class:`Shape` of a model of :data:`course_lib.kv_cache.MODEL_SHAPES` ("Llama 3 8B (GQA)")."""
    s = MODEL_SHAPES[name]
    return Shape(s["params"], s["layers"], s["heads"], s["kv_heads"], s["head_dim"], bytes_per_value)


def step_flops(shape: Shape, batch: int, tokens: int, context: int) -> float:
    """FLOPs of a step that runs ``tokens`` new tokens of each of ``batch`` requests holding
    ``context`` earlier tokens (causal: new token ``i`` reads ``context + i + 1`` positions)."""
    positions = tokens * context + tokens * (tokens + 1) / 2
    attention = 4 * shape.layers * shape.heads * shape.head_dim * positions
    return batch * (2 * shape.params * tokens + attention)


def step_bytes(shape: Shape, batch: int, tokens: int, context: int) -> float:
    """Bytes a step moves: the weights once, each request's cache of ``context`` tokens read,
    the ``tokens`` new tokens' keys and values written."""
    kv = shape.kv_bytes_per_token
    return shape.params * shape.bytes_per_value + batch * (context + tokens) * kv


def intensity(shape: Shape, batch: int, tokens: int, context: int) -> float:
    """Arithmetic intensity of the step, FLOPs per byte."""
    return step_flops(shape, batch, tokens, context) / step_bytes(shape, batch, tokens, context)


def gpu_roof(name: str, precision: str = "bf16") -> tuple[float, float]:
    """(peak FLOP/s at ``precision``, bandwidth in bytes/s) of a GPU of ``data/device_specs.csv``."""
    spec = gpu_spec(name)
    return peak_flops(spec, precision), float(spec["bandwidth_gbs"]) * 1e9


def step_seconds(shape: Shape, batch: int, tokens: int, context: int, peak: float, bandwidth: float) -> float:
    """The roofline's time of a step, seconds: ``max(FLOPs / peak, bytes / bandwidth)``."""
    return max(step_flops(shape, batch, tokens, context) / peak,
               step_bytes(shape, batch, tokens, context) / bandwidth)


def critical_batch(shape: Shape, context: int, peak: float, bandwidth: float) -> float:
    """The decode batch (one token per request, ``context`` tokens cached each) at which the
    step's FLOPs time reaches its bytes time: ``inf`` when the cache reads alone (which grow
    with the batch) keep it memory-bound at every batch."""
    flops_per_request = step_flops(shape, 1, 1, context) / peak
    bytes_per_request = (context + 1) * shape.kv_bytes_per_token / bandwidth
    weights = shape.params * shape.bytes_per_value / bandwidth
    if flops_per_request <= bytes_per_request:
        return math.inf
    return weights / (flops_per_request - bytes_per_request)
