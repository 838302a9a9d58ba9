"""Function calls in a kernel of the course's SIMT engine (lessons 03 and 04): built-ins, casts and
device functions (``@cuda.jit(device=True)``), whose body runs in the calling warp for its active lanes.
``cuda.*`` and ``math.*`` calls go on to :mod:`course_lib.simt.intrinsics`.
"""
from __future__ import annotations

import builtins
import operator

import numpy as np

from .kernel_source import is_device_function, kernel_source, python_function
from .statements import Frame
from .values import Cast, Path, Unsupported, range_marker, truth, vec

_BUILTINS = {getattr(builtins, n): n for n in ("range", "min", "max", "abs", "int", "float", "len", "bool",
                                                 "round", "print")}


class Calls:
    """Mixin of :class:`~course_lib.simt.warp.Warp`: a call expression, evaluated for the lanes of ``m``."""

    def call(self, node, m):
        func = self.eval(node.func, m)
        if node.keywords and not (isinstance(func, Path) and func.path in ("cuda.shared.array", "cuda.local.array")):
            raise Unsupported(f"{self.where(node)}: keyword arguments are not supported here")
        if isinstance(func, Path):
            return self.call_path(func.path, node, m)
        if func is range_marker:
            raise Unsupported(f"{self.where(node)}: range(...) only as the iterable of a for loop")
        if isinstance(func, Cast):
            v = self.eval(node.args[0], m)
            return v.astype(func.dtype) if vec(v) else func.dtype.type(v)
        if callable(func) and func in _BUILTINS:
            return self.builtin(_BUILTINS[func], [self.eval(a, m) for a in node.args], node, m)
        if is_device_function(func):
            return self.device_call(func, [self.eval(a, m) for a in node.args], node, m)
        if hasattr(func, "py_func"):
            raise TypeError(f"{self.where(node)}: `{self.source.text(node.func)}` is a kernel; a kernel can call "
                            "only device functions (@cuda.jit(device=True))")
        raise Unsupported(f"{self.where(node)}: cannot call `{self.source.text(node.func)}` in a kernel")

    def builtin(self, name, args, node, m):
        if name in ("min", "max"):
            if len(args) < 2:
                raise Unsupported(f"{self.where(node)}: {name}() of one iterable is not supported")
            pick = operator.lt if name == "min" else operator.gt
            value = args[0]
            for other in args[1:]:
                if not vec(value) and not vec(other):
                    value = other if pick(other, value) else value
                else:
                    value = np.where(pick(other, value), other, value)
            return value
        (arg, *rest) = args if args else (None,)
        if name == "abs":
            return np.abs(arg) if vec(arg) else abs(arg)
        if name == "int":
            return np.trunc(arg).astype(np.int64) if vec(arg) else int(arg)
        if name == "float":
            return arg.astype(np.float64) if vec(arg) else float(arg)
        if name == "bool":
            return truth(arg)
        if name == "round":
            if rest:
                return np.round(arg, rest[0]) if vec(arg) else round(arg, rest[0])
            return np.round(arg).astype(np.int64) if vec(arg) else round(arg)
        if name == "len":
            return len(arg)
        if name == "print":
            for lane in np.flatnonzero(m):
                print(*[a[lane] if vec(a) else a for a in args])
            return None
        raise Unsupported(f"{self.where(node)}: `{name}` is not supported")

    def device_call(self, func, args, node, m):
        """A ``@cuda.jit(device=True)`` function: its body runs here, for the active lanes."""
        if self.depth > 32:
            raise RecursionError(f"{self.where(node)}: device functions nested more than 32 deep")
        source = kernel_source(python_function(func))
        if len(args) != len(source.params):
            raise TypeError(f"{self.where(node)}: {source.name} takes {len(source.params)} arguments")
        saved = self.frame, self.source
        self.frame, self.source = Frame(m.copy()), source
        self.frame.env.update(zip(source.params, args))
        self.depth += 1
        try:
            for _ in self.block_(source.tree.body, m):
                raise Unsupported(f"{source.name}: cuda.syncthreads() inside a device function is not supported")
            return self.frame.result
        finally:
            self.frame, self.source = saved
            self.depth -= 1
