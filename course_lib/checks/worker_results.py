"""Judging what worker processes send back (lessons 10, 11 and 13's multi-process checks): the
error a worker's tampered data raises, and the one rule for how far a result is from the
expected one. Differences are absolute, in the tensors' own units, computed in float64.
"""
from __future__ import annotations

import math

import torch


class MalformedResult(ValueError):
    """A worker sent back data of the wrong kind (its code was tampered with)."""


def difference(got, expected) -> float:
    """Largest absolute difference between ``got`` and ``expected`` (a tensor): inf when ``got``
    is not a real-number tensor of the same shape, NaN when a compared value is NaN, 0.0 for
    empty tensors."""
    if (not torch.is_tensor(got) or tuple(got.shape) != tuple(expected.shape) or got.is_complex()
            or got.dtype == torch.bool):
        return math.inf
    if not got.numel():
        return 0.0
    return float((got.to(torch.float64) - expected.to(torch.float64)).abs().max())


def worst(values) -> float:
    """The largest of ``values`` (floats), NaN when any is NaN (``max`` would skip it); 0.0 for none."""
    values = list(values)
    return math.nan if any(math.isnan(v) for v in values) else max(values, default=0.0)
