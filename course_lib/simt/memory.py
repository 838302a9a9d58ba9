"""The memory spaces a warp touches in the course's SIMT engine (lessons 03 and 04): global arrays
(the kernel's NumPy arguments), shared arrays (fresh per block, poisoned so that reading a slot
nobody wrote shows) and local arrays (one private copy per lane).

Every access is made by a whole warp at once: a vector of 32 per-lane indices and an active mask.
This module turns such an access into the element offsets it touches (bounds-checked: a negative
index is out of bounds on a GPU, where NumPy would wrap it) and into byte addresses, which the
traffic model (:mod:`course_lib.simt.traffic`) maps to 32-byte sectors and to shared-memory banks.
Units: offsets in elements, addresses in bytes.
"""
from __future__ import annotations

import numpy as np

WARP = 32
"""Threads per warp (CUDA C++ Programming Guide, "SIMT Architecture")."""

SHARED_ALIGN = 16
"""Bytes to which each shared array of a block is aligned in the block's shared memory."""


def poison_value(dtype: np.dtype):
    """What a fresh shared (or local) slot holds: NaN for floats, the most negative value for
    signed integers, the largest for unsigned ones, True for booleans: a value a correct kernel
    never reads before writing, and one that shows in its output when it does."""
    dtype = np.dtype(dtype)
    if dtype.kind in "fc":
        return np.nan
    if dtype.kind == "i":
        return np.iinfo(dtype).min
    if dtype.kind == "u":
        return np.iinfo(dtype).max
    return True


class Array:
    """One array as the engine sees it: the NumPy data, its memory ``space`` ('global', 'shared'
    or 'local'), a ``name`` for reports, and ``base``, the byte address of element 0 (shared
    arrays: the offset in the block's shared memory; global arrays: 0, as cudaMalloc aligns
    allocations to at least 256 bytes)."""

    __slots__ = ("data", "space", "name", "base", "shape", "size", "ndim", "dtype", "itemsize",
                 "strides", "ident", "written", "flat")

    def __init__(self, data: np.ndarray, space: str, name: str, base: int = 0, ident: int = 0):
        self.data, self.space, self.name, self.base, self.ident = data, space, name, base, ident
        self.shape, self.size, self.ndim, self.dtype = data.shape, data.size, data.ndim, data.dtype
        self.itemsize = data.itemsize
        self.strides = tuple(s // data.itemsize for s in data.strides) if data.size else (0,) * data.ndim
        self.written = None   # shared arrays: which slots were written (uninitialised reads show)
        self.flat = _flat_view(data)   # a 1-D view over the same memory, indexed by element offset

    def __len__(self) -> int:
        """``len(a)`` in a kernel: the length of the first dimension, as NumPy's."""
        return self.shape[0] if self.ndim else 0


def _flat_view(data: np.ndarray) -> np.ndarray:
    """A writable 1-D view of ``data``'s memory in element units (``data`` itself, strided arrays too)."""
    if data.flags.c_contiguous:
        return data.reshape(-1)
    if any(s < 0 or s % data.itemsize for s in data.strides):
        raise ValueError("the SIMT engine takes arrays with positive strides that are whole elements")
    span = 1 + sum((n - 1) * s // data.itemsize for n, s in zip(data.shape, data.strides)) if data.size else 0
    return np.lib.stride_tricks.as_strided(data, shape=(span,), strides=(data.itemsize,))


def shared_array(shape, dtype, name: str, base: int, ident: int) -> Array:
    """A block's fresh shared array, every slot poisoned (:func:`poison_value`)."""
    data = np.full(shape, poison_value(dtype), dtype=dtype)
    arr = Array(data, "shared", name, base, ident)
    arr.written = np.zeros(data.size, dtype=bool)
    return arr


def local_array(shape, dtype) -> np.ndarray:
    """A local array: one private copy per lane, shape (32, *shape), poisoned."""
    shape = tuple(shape) if isinstance(shape, tuple) else (int(shape),)
    return np.full((WARP,) + shape, poison_value(dtype), dtype=dtype)


def next_shared_base(used_bytes: int) -> int:
    """The byte offset where the next shared array of a block starts (aligned)."""
    return -(-used_bytes // SHARED_ALIGN) * SHARED_ALIGN


def element_offsets(arr, index: tuple, lanes: np.ndarray, what: str) -> np.ndarray:
    """Element offsets (int64, one per lane in ``lanes``) that ``arr[index]`` touches.

    ``index`` holds one entry per dimension, each a Python/NumPy integer (the same for all lanes)
    or a vector of 32 per-lane integers. Raises IndexError, naming the first offending lane,
    for an index outside the array (negative ones included)."""
    shape = arr.shape
    if len(index) != len(shape):
        raise IndexError(f"{what}: {len(index)} indices for an array of {len(shape)} dimensions "
                         "(index one element at a time)")
    flat = np.zeros(lanes.size, dtype=np.int64)
    for dim, (part, size, stride) in enumerate(zip(index, shape, arr.strides)):
        vals = part[lanes] if isinstance(part, np.ndarray) else part
        vals = np.asarray(vals)
        if vals.dtype.kind not in "iub":
            if vals.dtype.kind == "f" and np.all(vals == np.floor(vals)):
                vals = vals.astype(np.int64)
            else:
                raise IndexError(f"{what}: index {vals.ravel()[:1]} is not an integer")
        bad = (vals < 0) | (vals >= size)
        if np.any(bad):
            lane = int(lanes[np.flatnonzero(np.broadcast_to(bad, lanes.shape))[0]])
            value = int(np.broadcast_to(vals, lanes.shape)[lane == lanes][0])
            raise IndexError(f"{what}: index {value} in dimension {dim} is out of bounds for an array of "
                             f"shape {shape} (lane {lane}; a GPU reads or writes outside the array here)")
        flat += vals.astype(np.int64) * stride
    return flat
