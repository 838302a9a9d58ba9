"""What training or serving a whole transformer costs on a given GPU (lesson 08).

:mod:`course_lib.transformer_block` counts one block (parameters, FLOPs per token,
activations). This module scales those counts to a model and a machine:

- :func:`training_flops`: about ``6 N D`` FLOPs to train ``N`` parameters on ``D`` tokens,
  2 per parameter and token in the forward pass and 4 in the backward pass (J. Kaplan et
  al., "Scaling Laws for Neural Language Models", 2020, https://arxiv.org/abs/2001.08361 ,
  section 2.1);
- :func:`peak_flops`: the datasheet peak of a GPU (``data/device_specs.csv``) in FLOP/s at
  one precision: ``"fp32"`` on the CUDA cores, ``"bf16"`` or ``"fp8"`` on the tensor cores
  (dense rates, no 2:4 sparsity);
- :func:`training_seconds`: FLOPs divided by what ``gpus`` GPUs deliver at a given
  utilisation (the fraction of the peak a real run sustains, its "MFU");
- :func:`kv_cache_bytes`: the keys and values a model keeps while generating, for a context
  length and a batch, with grouped-query attention (fewer key/value heads than query heads).
"""
from __future__ import annotations

import math

from .hardware import device_specs

PRECISION_COLUMNS = {"fp32": "fp32_tflops", "bf16": "bf16_tensor_tflops", "fp8": "fp8_tensor_tflops"}
"""Which column of ``data/device_specs.csv`` holds each precision's peak (TFLOP/s)."""

SECONDS_PER_DAY = 86_400


def training_flops(parameters: float, tokens: float) -> float:
    """FLOPs to train a model of ``parameters`` (non-embedding) parameters on ``tokens``
    tokens: ``6 * parameters * tokens`` (Kaplan et al. 2020). The attention's own products
    (``4 s d`` per token and layer for context ``s``) are left out, as in that rule."""
    return 6.0 * parameters * tokens


def gpu_spec(name: str) -> dict:
    """The row of ``data/device_specs.csv`` whose device name contains ``name`` ("H100")."""
    rows = [r for r in device_specs() if r["kind"] == "GPU" and name.lower() in r["device"].lower()]
    if not rows:
        known = ", ".join(r["device"] for r in device_specs() if r["kind"] == "GPU")
        raise KeyError(f"no GPU matching {name!r} in data/device_specs.csv; known: {known}")
    return rows[0]


def peak_flops(spec: dict, precision: str) -> float:
    """Datasheet peak of ``spec`` (a row of :func:`gpu_spec`) in FLOP/s at ``precision``
    ("fp32", "bf16" or "fp8"). ``ValueError`` when the table has no figure for it (a GPU
    without tensor cores of that precision, or a row the table leaves blank)."""
    if precision not in PRECISION_COLUMNS:
        raise ValueError(f"precision {precision!r}: choose one of {sorted(PRECISION_COLUMNS)}")
    tflops = spec.get(PRECISION_COLUMNS[precision], float("nan"))
    tflops = float(tflops) if tflops not in ("", None) else float("nan")
    if math.isnan(tflops):
        raise ValueError(f"{spec['device']}: no {precision} peak in data/device_specs.csv")
    return tflops * 1e12


def training_seconds(flops: float, peak_flops_per_gpu: float, gpus: int = 1,
                     utilisation: float = 1.0) -> float:
    """Seconds to do ``flops`` on ``gpus`` GPUs of ``peak_flops_per_gpu`` FLOP/s each, of which
    a fraction ``utilisation`` (0 < u <= 1) is sustained."""
    if not 0 < utilisation <= 1:
        raise ValueError(f"utilisation {utilisation} must be in (0, 1]")
    return flops / (peak_flops_per_gpu * gpus * utilisation)


def kv_cache_bytes(layers: int, batch: int, context: int, kv_heads: int, head_dim: int,
                   bytes_per_value: int = 2) -> int:
    """Bytes of the key/value cache of a whole model while generating: for each of ``layers``
    layers, a key and a value vector of ``kv_heads * head_dim`` numbers for each of
    ``context`` tokens of each of ``batch`` sequences: ``2 L b s h_kv d_h v``. Plain
    multi-head attention has ``kv_heads`` = the number of query heads; grouped-query
    attention shares each key/value head between several query heads."""
    return 2 * layers * batch * context * kv_heads * head_dim * bytes_per_value
