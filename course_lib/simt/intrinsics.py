"""The ``cuda.*`` and ``math.*`` functions of the course's SIMT engine (lessons 03 and 04): which
intrinsic a call names, ``cuda.grid``/``cuda.gridsize``, shared and local arrays, ``syncwarp`` and
fences, math functions per lane, and the other intrinsics (``fma``, ``selp``, ``cbrt``, ``popc``, ``brev``,
``clz``, ``ffs``).
Atomics are in :mod:`course_lib.simt.atomics`, shuffles and votes in :mod:`course_lib.simt.shuffles`.
"""
from __future__ import annotations

import math

import numpy as np

from . import memory
from .values import WARP, Cast, Local, Unsupported, _numba_dtype, truth, vec

_MATH_UFUNCS = {"sqrt": np.sqrt, "exp": np.exp, "log": np.log, "sin": np.sin, "cos": np.cos, "tan": np.tan,
                "tanh": np.tanh, "fabs": np.fabs, "log2": np.log2, "log10": np.log10, "log1p": np.log1p,
                "expm1": np.expm1, "atan": np.arctan, "asin": np.arcsin, "acos": np.arccos, "sinh": np.sinh,
                "cosh": np.cosh, "atan2": np.arctan2, "hypot": np.hypot, "copysign": np.copysign,
                "fmod": np.fmod, "pow": np.power, "isnan": np.isnan, "isinf": np.isinf, "isfinite": np.isfinite}
_MATH_TO_INT = {"floor": np.floor, "ceil": np.ceil, "trunc": np.trunc}


class Intrinsics:
    """Mixin of :class:`~course_lib.simt.warp.Warp`: ``cuda.<name>(...)`` and ``math.<name>(...)``."""

    def call_path(self, path: str, node, m):
        root, _, name = path.partition(".")
        if root == "math":
            args = [self.eval(a, m) for a in node.args]
            return _math(name, args)
        if root != "cuda":
            raise Unsupported(f"{self.where(node)}: `{path}` is not supported")
        if name.startswith("atomic."):
            return self.atomic(name[len("atomic."):], node, m)
        if name == "shared.array":
            return self.launch.shared_array(self, node, m)
        if name == "local.array":
            shape, dtype = self._shape_dtype(node, m)
            return Local(memory.local_array(shape, dtype))
        if name == "const.array_like":
            return self.eval(node.args[0], m)
        args = [self.eval(a, m) for a in node.args]
        if name in ("grid", "gridsize"):
            return self.grid(name, int(args[0]))
        if name.startswith("syncthreads"):
            raise Unsupported(f"{self.where(node)}: cuda.{name} must be a statement of its own")
        if name == "syncwarp":
            self.epochs[m] += 1
            return None
        if name in ("threadfence", "threadfence_block", "threadfence_system"):
            return None
        if name.startswith("shfl_"):
            return self.shuffle(name, args, node, m)
        if name in ("activemask", "ballot_sync", "all_sync", "any_sync"):
            return self.vote(name, args, m)
        return _intrinsic(name, args, self.where(node))

    def _shape_dtype(self, node, m):
        """(shape, dtype) of ``cuda.shared.array``/``cuda.local.array``, given by position or keyword."""
        args = [self.eval(a, m) for a in node.args]
        kw = {k.arg: self.eval(k.value, m) for k in node.keywords}
        shape = args[0] if args else kw.get("shape")
        dtype = args[1] if len(args) > 1 else kw.get("dtype")
        if isinstance(dtype, Cast):
            dtype = dtype.dtype
        elif _numba_dtype(dtype) is not None:
            dtype = _numba_dtype(dtype)
        if shape is None or dtype is None:
            raise TypeError(f"{self.where(node)}: an array needs a shape and a dtype")
        if vec(shape) or (isinstance(shape, tuple) and any(vec(s) for s in shape)):
            raise Unsupported(f"{self.where(node)}: an array's shape must be the same for every thread")
        shape = tuple(int(s) for s in shape) if isinstance(shape, tuple) else (int(shape),)
        if any(s <= 0 for s in shape):
            raise Unsupported(f"{self.where(node)}: arrays of size 0 (dynamic shared memory) are not supported")
        return shape, np.dtype(dtype)

    def grid(self, name: str, ndim: int):
        launch = self.launch
        if name == "gridsize":
            sizes = tuple(b * g for b, g in zip(launch.block_dim, launch.grid_dim))
            return sizes[0] if ndim == 1 else sizes[:ndim]
        t, b, d = self.thread, self.block.index, launch.block_dim
        coords = (b[0] * d[0] + t.x, b[1] * d[1] + t.y, b[2] * d[2] + t.z)
        if ndim not in (1, 2, 3):
            raise ValueError("cuda.grid takes 1, 2 or 3")
        return coords[0] if ndim == 1 else coords[:ndim]


def _math(name: str, args):
    if name in _MATH_UFUNCS:
        if any(vec(a) for a in args):
            return _MATH_UFUNCS[name](*args)
        return getattr(math, name)(*args)
    if name in _MATH_TO_INT:
        (a,) = args
        return _MATH_TO_INT[name](a).astype(np.int64) if vec(a) else getattr(math, name)(a)
    fn = getattr(math, name)
    if any(vec(a) for a in args):
        return np.array([fn(*[a[k] if vec(a) else a for a in args]) for k in range(WARP)])
    return fn(*args)


def _intrinsic(name: str, args, where: str):
    if name == "fma":
        a, b, c = args
        return a * b + c
    if name == "selp":
        a, b, c = args
        return np.where(truth(a), b, c) if vec(a) else (b if a else c)
    if name == "cbrt":
        return np.cbrt(args[0])
    one = {"popc": lambda v: bin(int(v) & 0xFFFFFFFF).count("1"),
           "brev": lambda v: int(f"{int(v) & 0xFFFFFFFF:032b}"[::-1], 2),
           "clz": lambda v: 32 - (int(v) & 0xFFFFFFFF).bit_length(),
           "ffs": lambda v: ((int(v) & -int(v)).bit_length()) if int(v) else 0}
    if name in one:
        v = args[0]
        return np.array([one[name](x) for x in v]) if vec(v) else one[name](v)
    raise Unsupported(f"{where}: cuda.{name} is not supported")
