"""The values one warp computes with in the course's SIMT engine (lessons 03 and 04): uniform or per
lane, and the names of a kernel's vocabulary.

Every value is either the same for all lanes (a Python or NumPy scalar, a tuple, an array) or a
NumPy vector of 32 per-lane values (:func:`vec`). The kernel's vocabulary becomes small objects:
``threadIdx`` and friends a :class:`Dim3`, ``cuda.local.array`` a :class:`Local`, ``cuda.atomic.add``
or ``math.sqrt`` a :class:`Path`, ``float32``/``np.int32`` a :class:`Cast`; :func:`resolve_global`
turns a name the kernel takes from its module into one of these.
"""
from __future__ import annotations

import sys

import numpy as np

from . import memory

WARP = memory.WARP
LANES = np.arange(WARP)


class Unsupported(NotImplementedError):
    """A construct the SIMT engine does not run (the message names the line); lessons' kernels and the
    whitelisted subset of Python (course_tools/grading/gpu_kernels/kernel_whitelist.py) never need it."""


class Dim3:
    """threadIdx/blockIdx/blockDim/gridDim: x, y, z, each a scalar or a per-lane vector."""

    __slots__ = ("x", "y", "z")

    def __init__(self, x, y, z):
        self.x, self.y, self.z = x, y, z


class Local:
    """A ``cuda.local.array``: one private copy per lane, ``data`` of shape (32, *shape)."""

    __slots__ = ("data", "shape", "size", "ndim", "dtype")

    def __init__(self, data):
        self.data, self.shape, self.size = data, data.shape[1:], data[0].size
        self.ndim, self.dtype = data.ndim - 1, data.dtype


class Path:
    """A name from the kernel's vocabulary: ``cuda.atomic.add``, ``math.sqrt``, ``min``..."""

    __slots__ = ("path",)

    def __init__(self, path: str):
        self.path = path


class Cast:
    """A scalar type used as a function (``float32(x)``, ``np.int32(x)``) or as a dtype."""

    __slots__ = ("dtype",)

    def __init__(self, dtype):
        self.dtype = np.dtype(dtype)


def _numba_dtype(value):
    """The NumPy dtype of a Numba scalar type, or None for anything else."""
    types = sys.modules.get("numba.core.types")
    if types is not None and isinstance(value, types.Type):
        from numba.np import numpy_support  # lazy: numba is loaded already when its types are in use

        return numpy_support.as_dtype(value)
    return None


def vec(v) -> bool:
    """True for a per-lane value."""
    return isinstance(v, np.ndarray)


def truth(v):
    """Per-lane (or uniform) truth value, as Python's ``bool`` would give for each lane."""
    return v.astype(bool) if vec(v) else bool(v)


def _broadcast(v):
    return v if vec(v) else np.full(WARP, v)


class _Missing:
    pass


_MISSING = _Missing()
range_marker = Path("range")


def resolve_global(value):
    """How the engine sees a name the kernel takes from its module: the cuda/math/NumPy modules as
    vocabulary paths, Numba and NumPy scalar types as casts, built-ins as themselves, NumPy arrays
    as global arrays are not allowed (a kernel reads memory only through its arguments)."""
    import types as pytypes

    if isinstance(value, pytypes.ModuleType):
        name = value.__name__
        if name in ("math",):
            return Path("math")
        if name in ("numpy",):
            return Path("np")
        if name.startswith("numba.cuda") or name == "numba.cuda.simulator":
            return Path("cuda")
    if type(value).__name__ == "FakeCUDAModule":
        return Path("cuda")
    if hasattr(value, "jit") and hasattr(value, "shared") and hasattr(value, "syncthreads"):
        return Path("cuda")
    dtype = _numba_dtype(value)
    if dtype is not None:
        return Cast(dtype)
    if isinstance(value, type) and issubclass(value, np.generic):
        return Cast(value)
    if value is range:
        return range_marker
    return value
