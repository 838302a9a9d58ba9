"""Counting the bytes one rank sends to the others through ``torch.distributed`` (lesson 17).

:class:`BytesSent` is a context manager that wraps the communication functions of
``torch.distributed`` in this process and adds up, per call, the bytes that leave this rank
(what stays on it, such as an all-to-all's chunk for itself, is not counted). The model of each
operation is the simplest one that is exact for the data that must move:

- ``send``/``isend`` of a tensor: its bytes;
- ``all_to_all_single``: the input rows for the other ranks (``input_split_sizes``, or equal
  chunks); ``all_to_all``: the input tensors for the other ranks;
- ``all_gather``/``all_gather_into_tensor``: the input once to each other rank, ``(W - 1)`` times;
- ``broadcast`` and ``scatter`` from this rank: ``(W - 1)`` copies, or the others' pieces;
  ``gather`` to another rank: the input;
- ``all_reduce`` (ring): ``2 (W - 1) / W`` of the tensor; ``reduce_scatter_tensor``:
  ``(W - 1) / W`` of the input.

Floating-point payloads (activations) and integer ones (counts, indices) are kept apart
(:meth:`BytesSent.total`). The count is kept inside the process whose code it watches, so code
that digs out the original functions can avoid it: it measures, it does not police.
"""
from __future__ import annotations

import torch
import torch.distributed as dist

WATCHED = ("send", "isend", "all_to_all_single", "all_to_all", "all_gather", "all_gather_into_tensor",
           "broadcast", "scatter", "gather", "all_reduce", "reduce_scatter_tensor")


def _bytes(t) -> int:
    return t.numel() * t.element_size()


def _group_size_rank(kwargs) -> tuple[int, int]:
    group = kwargs.get("group")
    return dist.get_world_size(group), dist.get_rank(group)


def _sent(name: str, args: tuple, kwargs: dict) -> tuple[int, torch.dtype | None]:
    """Bytes a call of ``dist.<name>(*args, **kwargs)`` sends from this rank, and its dtype."""
    world, rank = _group_size_rank(kwargs)
    get = lambda i, key, default=None: args[i] if len(args) > i else kwargs.get(key, default)  # noqa: E731
    if name in ("send", "isend"):
        t = get(0, "tensor")
        return _bytes(t), t.dtype
    if name == "all_to_all_single":
        t, splits = get(1, "input"), get(3, "input_split_sizes")
        rows = list(splits) if splits else [t.shape[0] // world] * world
        row_bytes = _bytes(t) // max(t.shape[0], 1) if t.dim() else _bytes(t)
        return sum(int(n) for r, n in enumerate(rows) if r != rank) * row_bytes, t.dtype
    if name == "all_to_all":
        inputs = get(1, "input_tensor_list")
        return sum(_bytes(t) for r, t in enumerate(inputs) if r != rank), inputs[0].dtype
    if name in ("all_gather", "all_gather_into_tensor"):
        t = get(1, "tensor" if name == "all_gather" else "input_tensor")
        return (world - 1) * _bytes(t), t.dtype
    if name == "broadcast":
        t = get(0, "tensor")
        return ((world - 1) * _bytes(t) if rank == get(1, "src", 0) else 0), t.dtype
    if name == "scatter":
        pieces = get(1, "scatter_list") or []
        return sum(_bytes(t) for r, t in enumerate(pieces) if r != rank), get(0, "tensor").dtype
    if name == "gather":
        t = get(0, "tensor")
        return (0 if rank == get(2, "dst", 0) else _bytes(t)), t.dtype
    if name == "all_reduce":
        t = get(0, "tensor")
        return 2 * (world - 1) * _bytes(t) // world, t.dtype
    t = get(1, "input")   # reduce_scatter_tensor
    return (world - 1) * _bytes(t) // world, t.dtype


class BytesSent:
    """``with BytesSent() as meter: ...`` counts what this rank sends in the block;
    ``meter.calls`` lists ``(operation, bytes, dtype)`` per call."""

    def __init__(self):
        self.calls: list[tuple[str, int, torch.dtype | None]] = []
        self._originals: dict[str, object] = {}

    def _wrap(self, name: str, original):
        def counted(*args, **kwargs):
            try:
                sent, dtype = _sent(name, args, kwargs)
            except Exception:  # noqa: BLE001 - a malformed call: torch's own error comes next
                sent, dtype = 0, None
            self.calls.append((name, int(sent), dtype))
            return original(*args, **kwargs)
        counted.__name__ = name
        counted.__wrapped__ = original
        return counted

    def __enter__(self) -> BytesSent:
        for name in WATCHED:
            original = getattr(dist, name)
            self._originals[name] = original
            setattr(dist, name, self._wrap(name, original))
        return self

    def __exit__(self, *exc) -> None:
        for name, original in self._originals.items():
            setattr(dist, name, original)
        self._originals.clear()

    def total(self, floating: bool | None = True) -> int:
        """Bytes sent: of floating-point tensors (``floating=True``), of the others (False), or all (None)."""
        return sum(n for _, n, dtype in self.calls
                   if floating is None or (dtype is not None and dtype.is_floating_point) == floating)
