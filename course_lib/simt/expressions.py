"""Expressions of the course's SIMT engine (lessons 03 and 04): one warp evaluates an expression for
its active lanes.

Expressions are evaluated under the mask, so ``x[i] if i < n else 0.0`` and ``i < n and x[i] > 0``
never touch memory for the lanes that skip it, exactly as one thread would not. Arithmetic follows
NumPy, as in Numba's CUDA simulator: float32 stays float32, a Python float mixes in weakly; every
float ``+ - * / **`` is a FLOP for the traffic model (:mod:`course_lib.simt.traffic`).
"""
from __future__ import annotations

import ast
import math
import operator

import numpy as np

from . import memory
from .values import _MISSING, LANES, WARP, Cast, Dim3, Local, Path, Unsupported, truth, vec

_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
           ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
           ast.LShift: operator.lshift, ast.RShift: operator.rshift, ast.BitOr: operator.or_,
           ast.BitXor: operator.xor, ast.BitAnd: operator.and_}
_FLOPS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow)
_CMPOPS = {ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
           ast.Eq: operator.eq, ast.NotEq: operator.ne}
_CUDA_DIMS = ("threadIdx", "blockIdx", "blockDim", "gridDim")


class Expressions:
    """Mixin of :class:`~course_lib.simt.warp.Warp`: evaluating an expression under the mask ``m``
    (names, constants, operators, comparisons, ``a if c else b``, ``and``/``or``, attributes)."""

    def eval(self, node, m):
        kind = type(node)
        if kind is ast.Name:
            return self.lookup(node.id, node)
        if kind is ast.Constant:
            return node.value
        if kind is ast.BinOp:
            return self.binop(_BINOPS[type(node.op)], self.eval(node.left, m), self.eval(node.right, m), m, node.op)
        if kind is ast.Subscript:
            return self.load(self.eval(node.value, m), self.index(node.slice, m), m, node)
        if kind is ast.Attribute:
            return self.attribute(node, m)
        if kind is ast.Call:
            return self.call(node, m)
        if kind is ast.Compare:
            return self.compare(node, m)
        if kind is ast.IfExp:
            return self.ifexp(node, m)
        if kind is ast.BoolOp:
            return self.boolop(node, m)
        if kind is ast.UnaryOp:
            v = self.eval(node.operand, m)
            if isinstance(node.op, ast.Not):
                t = truth(v)
                return ~t if vec(t) else not t
            if isinstance(node.op, ast.USub):
                return -v
            if isinstance(node.op, ast.UAdd):
                return +v
            return ~v
        if kind is ast.Tuple:
            return tuple(self.eval(e, m) for e in node.elts)
        raise Unsupported(f"{self.where(node)}: the SIMT engine does not evaluate `{type(node).__name__}`")

    def lookup(self, name: str, node):
        env = self.frame.env
        if name in env:
            return env[name]
        found = self.launch.resolved(self.source, name)
        if found is _MISSING:
            raise NameError(f"{self.where(node)}: name `{name}` is not defined")
        return found

    def binop(self, op, a, b, m, node_op):
        value = op(a, b)
        traffic = self.launch.traffic
        if traffic is not None and isinstance(node_op, _FLOPS):
            dtype = getattr(value, "dtype", None)
            if dtype is not None and dtype.kind == "f" or isinstance(value, float):
                traffic.flop(np.count_nonzero(m), 4 if dtype == np.float32 else 8)
        return value

    def compare(self, node, m):
        left = self.eval(node.left, m)
        result = True
        live = m
        for op, right_node in zip(node.ops, node.comparators):
            right = self.eval(right_node, live)
            here = _CMPOPS[type(op)](left, right) if type(op) in _CMPOPS else None
            if here is None:
                raise Unsupported(f"{self.where(node)}: comparison `{type(op).__name__}` is not supported")
            result = here if result is True else result & here
            if vec(result):
                live = m & result
            elif not result:
                return False
            left = right
        return result

    def ifexp(self, node, m):
        cond = truth(self.eval(node.test, m))
        if not vec(cond):
            return self.eval(node.body if cond else node.orelse, m)
        yes, no = m & cond, m & ~cond
        if not no.any():
            return self.eval(node.body, yes)
        if not yes.any():
            return self.eval(node.orelse, no)
        a, b = self.eval(node.body, yes), self.eval(node.orelse, no)
        return np.where(cond, a, b)

    def boolop(self, node, m):
        is_and = isinstance(node.op, ast.And)
        value = self.eval(node.values[0], m)
        for nxt in node.values[1:]:
            t = truth(value)
            if not vec(t):
                if t != is_and:         # `False and ...` / `True or ...`: decided for every lane
                    return value
                value = self.eval(nxt, m)
                continue
            go = m & (t if is_and else ~t)
            if not go.any():
                continue
            value = np.where(go, self.eval(nxt, go), value)
        return value

    def attribute(self, node, m):
        base = self.eval(node.value, m)
        attr = node.attr
        if isinstance(base, Path):
            return self.vocabulary(f"{base.path}.{attr}", node)
        if isinstance(base, (memory.Array, Local)) and attr in ("shape", "size", "ndim"):
            return getattr(base, attr)
        if isinstance(base, Dim3) and attr in ("x", "y", "z"):
            return getattr(base, attr)
        if isinstance(base, np.ndarray) and attr in ("shape", "size", "ndim"):
            raise Unsupported(f"{self.where(node)}: `.{attr}` of a per-lane value")
        raise Unsupported(f"{self.where(node)}: the attribute `.{attr}` is not supported here")

    def vocabulary(self, path: str, node):
        """The value of ``cuda.<name>``, ``math.<name>`` or ``np.<name>``."""
        root, _, name = path.partition(".")
        if root == "cuda":
            if name in _CUDA_DIMS:
                return self.dims(name)
            if name == "laneid":
                return LANES.copy()
            if name == "warpsize":
                return WARP
            return Path(path)
        if root == "math":
            value = getattr(math, name, None)
            if value is None:
                raise Unsupported(f"{self.where(node)}: `{path}` does not exist")
            return Path(path) if callable(value) else value
        if root in ("np", "numpy"):
            if name in ("inf", "nan", "pi", "e"):
                return getattr(np, name)
            return Cast(getattr(np, name))
        return Path(path)

    def dims(self, name: str):
        launch = self.launch
        if name == "threadIdx":
            return self.thread
        if name == "blockIdx":
            return Dim3(*self.block.index)
        if name == "blockDim":
            return Dim3(*launch.block_dim)
        return Dim3(*launch.grid_dim)

    def index(self, node, m) -> tuple:
        if isinstance(node, ast.Slice):
            raise Unsupported(f"{self.where(node)}: slices are not supported (index one element at a time)")
        value = self.eval(node, m)
        return value if isinstance(value, tuple) else (value,)
