"""What a counted Triton launch hands the kernel and what it takes back (lessons 14 and 15; the
counting itself is :mod:`course_lib.triton_traffic`'s).

The kernel never gets the caller's tensors: it gets *copies* with their strides kept (a slice of a
wider buffer stays a slice), with :data:`GUARD_BYTES` of unused memory on either side, so that an
access just past a tensor lands outside every argument rather than in a neighbour. A tensor may go
only to a plain parameter, which the interpreter turns into a pointer: a parameter annotated
``tl.constexpr``, or with any annotation or default, would receive the torch tensor itself
(:class:`TensorParameter`). After the launch every input must equal what the caller passed
(:class:`InputWritten`), and only the outputs are copied back. Units: elements and bytes.
"""
from __future__ import annotations

import inspect

from .checks.core import CheckFailed

GUARD_BYTES = 4096           # unused bytes on either side of each tensor in a counted launch


class InputWritten(CheckFailed, RuntimeError):
    """A store into a tensor the launch names as an input (not one of its ``outputs``), or an
    input that differs after the launch from what the caller passed."""


class TensorParameter(CheckFailed, TypeError):
    """A tensor passed to a kernel parameter with an annotation (``tl.constexpr``) or a default
    value: the interpreter would hand the kernel the torch tensor itself, not a pointer."""


def _span(value) -> int:
    """Elements from a tensor's first element to its last, the gaps its strides skip included."""
    return 1 + sum((n - 1) * s for n, s in zip(value.shape, value.stride())) if value.numel() else 0


def copy_with_strides(value, device):
    """A copy of a tensor on ``device`` with its shape and strides kept, so that the strides a launch
    passes still describe it (``.to()`` and ``.clone()`` make a slice of a wider buffer contiguous);
    other values unchanged."""
    if not (hasattr(value, "data_ptr") and hasattr(value, "element_size")):
        return value
    import torch

    span = _span(value)
    buf = torch.empty(span, dtype=value.dtype, device=device)
    buf.copy_(value.as_strided((span,), (1,)))   # every element the strides reach, gaps included
    return buf.as_strided(value.shape, value.stride())


def guarded(value):
    """A copy of a tensor (its strides kept) with :data:`GUARD_BYTES` of unused memory on either
    side, so that an access just past its end (or before its start) lands outside every
    argument rather than in a neighbouring tensor; other values unchanged."""
    if not (hasattr(value, "data_ptr") and hasattr(value, "element_size")):
        return value
    import torch

    pad = -(-GUARD_BYTES // value.element_size())
    span = _span(value)
    buf = torch.empty(span + 2 * pad, dtype=value.dtype, device=value.device)
    buf[pad:pad + span].copy_(value.as_strided((span,), (1,)))   # every element the strides reach
    return buf.as_strided(value.shape, value.stride(), pad)


def _holds_tensor(value) -> bool:
    return hasattr(value, "data_ptr") or isinstance(value, (tuple, list)) and any(_holds_tensor(v) for v in value)


def _annotation(annotation) -> str:
    if isinstance(annotation, str):
        return annotation[:40]
    name = getattr(annotation, "__name__", None)
    return "tl.constexpr" if name == "constexpr" else (name or repr(annotation))[:40]


def refuse_tensor_constants(kernel, args, meta) -> None:
    """Raise :class:`TensorParameter` when a tensor in ``args`` (positional) or ``meta``
    (keywords) goes to a parameter of ``kernel`` that has an annotation or a default value."""
    fn = getattr(kernel, "fn", kernel)
    params = list(inspect.signature(fn).parameters.values())
    given = [*zip(params, args), *((p, meta[p.name]) for p in params if p.name in meta)]
    for param, value in given:
        if not _holds_tensor(value):
            continue
        if param.annotation is not param.empty:
            what = f"is annotated `{_annotation(param.annotation)}`"
        elif param.default is not param.empty:
            what = "has a default value"
        else:
            continue
        raise TensorParameter(f"{getattr(fn, '__name__', 'the kernel')}'s parameter `{param.name}` receives a tensor "
                              f"but {what}: a tensor parameter is a plain name, which the kernel gets as a pointer "
                              "(only numbers and flags may be tl.constexpr)")


def arg_names(kernel) -> list[str]:
    fn = getattr(kernel, "fn", kernel)
    return list(inspect.signature(fn).parameters)


def writable_names(names: list[str], outputs) -> set[str] | None:
    """The parameter names at positions ``outputs`` (None: every tensor may be stored into)."""
    if outputs is None:
        return None
    return {names[i] for i in outputs if 0 <= i < len(names)}


def _changed(before, after) -> int:
    """Elements of ``after`` that differ from ``before`` (NaN where NaN was counts as unchanged)."""
    return int(((after != before) & ~(after.isnan() & before.isnan())).sum().item())


def hand_back(names: list[str], args, copies, outputs) -> None:
    """After a launch on ``copies`` of ``args``: every input (an argument not in ``outputs``)
    must equal the caller's tensor, else :class:`InputWritten`; then only the outputs are
    copied into the caller's tensors (all of them when ``outputs`` is None)."""
    pairs = [(i, a, c) for i, (a, c) in enumerate(zip(args, copies)) if c is not a and hasattr(a, "copy_")]
    for i, a, c in pairs:
        changed = 0 if outputs is None or i in outputs else _changed(a, c.to(a.device))
        if changed:
            raise InputWritten(f"the kernel changed its input `{names[i] if i < len(names) else i}`: expected it "
                               f"unchanged, got {changed} of {a.numel()} element(s) changed")
    for i, a, c in pairs:
        if outputs is None or i in outputs:
            a.copy_(c)
