"""One warp of the course's SIMT engine (lessons 03 and 04): the 32 lanes of a warp execute a
kernel's Python syntax tree together, under an active mask.

Every value is either the same for all lanes (a Python or NumPy scalar, a tuple, an array) or a
NumPy vector of 32 per-lane values. A branch whose condition differs between lanes runs both paths,
each with the lanes that took it (divergence); a loop runs until its last lane leaves it; ``break``,
``continue`` and ``return`` take lanes out of the mask. Expressions are evaluated under the mask
too, so ``x[i] if i < n else 0.0`` and ``i < n and x[i] > 0`` never touch memory for the lanes
that skip it, exactly as one thread would not.

Arithmetic follows NumPy, as in Numba's CUDA simulator (one Python thread per CUDA thread, NumPy
scalars): float32 stays float32, a Python float mixes in weakly. ``cuda.syncthreads()`` hands
control back to the block (:mod:`course_lib.simt.launch`), which runs the other warps up to the same
barrier in the order the chosen schedule gives.
"""
from __future__ import annotations

import ast
import builtins
import math
import operator
import sys

import numpy as np

from . import memory
from .kernel_source import is_device_function, kernel_source, python_function
from .races import READ, WRITE

WARP = memory.WARP
LANES = np.arange(WARP)


class Unsupported(NotImplementedError):
    """A construct the SIMT engine does not run (the message names the line); lessons' kernels and the
    whitelisted subset of Python (course_tools/grading/kernel_whitelist.py) never need it."""


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


_BUILTINS = {getattr(builtins, n): n for n in ("range", "min", "max", "abs", "int", "float", "len", "bool",
                                                 "round", "print")}
_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
           ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
           ast.LShift: operator.lshift, ast.RShift: operator.rshift, ast.BitOr: operator.or_,
           ast.BitXor: operator.xor, ast.BitAnd: operator.and_}
_FLOPS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow)
_CMPOPS = {ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
           ast.Eq: operator.eq, ast.NotEq: operator.ne}
_MATH_UFUNCS = {"sqrt": np.sqrt, "exp": np.exp, "log": np.log, "sin": np.sin, "cos": np.cos, "tan": np.tan,
                "tanh": np.tanh, "fabs": np.fabs, "log2": np.log2, "log10": np.log10, "log1p": np.log1p,
                "expm1": np.expm1, "atan": np.arctan, "asin": np.arcsin, "acos": np.arccos, "sinh": np.sinh,
                "cosh": np.cosh, "atan2": np.arctan2, "hypot": np.hypot, "copysign": np.copysign,
                "fmod": np.fmod, "pow": np.power, "isnan": np.isnan, "isinf": np.isinf, "isfinite": np.isfinite}
_MATH_TO_INT = {"floor": np.floor, "ceil": np.ceil, "trunc": np.trunc}
_CUDA_DIMS = ("threadIdx", "blockIdx", "blockDim", "gridDim")
_ATOMICS = ("add", "sub", "max", "min", "nanmax", "nanmin", "and_", "or_", "xor", "exch", "inc", "dec", "cas",
            "compare_and_swap")


def vec(v) -> bool:
    """True for a per-lane value."""
    return isinstance(v, np.ndarray)


def truth(v):
    """Per-lane (or uniform) truth value, as Python's ``bool`` would give for each lane."""
    return v.astype(bool) if vec(v) else bool(v)


def _broadcast(v):
    return v if vec(v) else np.full(WARP, v)


class Frame:
    """The state of one function call in one warp: variables and which lanes left (return, break,
    continue)."""

    __slots__ = ("env", "returned", "loops", "off", "full", "result")

    def __init__(self, exists):
        self.env: dict = {}
        self.returned = np.zeros(WARP, dtype=bool)
        self.loops: list = []          # [broken, continued] per enclosing loop
        self.off = None                # lanes out of play (returned | broken | continued), None if none
        self.full = exists             # lanes that still run this function
        self.result = None

    def update(self) -> None:
        off = self.returned.copy()
        if self.loops:
            off |= self.loops[-1][0] | self.loops[-1][1]
        self.off = off if off.any() else None
        self.full = self.full & ~self.returned


class Warp:
    """One warp of one block running one kernel. ``lanes_exist``: lanes that are threads of the
    block (a block of 48 threads has a second warp of 16). Per-lane counts of memory accesses are in
    ``counts`` (32 x number of kinds, the kinds of :data:`course_lib.access_counts.ACCESS_KINDS`)."""

    def __init__(self, launch, block, index: int, tids: np.ndarray, lanes_exist: np.ndarray):
        self.launch, self.block, self.number = launch, block, index
        self.tids, self.exists = tids, lanes_exist
        bx, by, _ = launch.block_dim
        self.thread = Dim3(tids % bx, (tids // bx) % by, tids // (bx * by))
        self.intervals = np.zeros(WARP, dtype=np.int64)   # syncthreads passed, per lane
        self.epochs = np.zeros(WARP, dtype=np.int64)      # syncwarp passed, per lane
        self.counts = np.zeros((WARP, len(launch.kinds)), dtype=np.int64)
        self.frame: Frame | None = None
        self.source = None
        self.depth = 0

    # ------------------------------------------------------------------ running
    def run(self, source, args):
        """Generator: run the kernel; yields at every barrier (see :mod:`course_lib.simt.launch`)."""
        self.source = source
        self.frame = Frame(self.exists)
        self.frame.env.update(zip(source.params, args))
        with np.errstate(all="ignore"):
            yield from self.block_(source.tree.body, self.exists)

    def where(self, node) -> str:
        return f"{self.source.name}, line {self.source.line(node)}"

    def block_(self, stmts, mask):
        frame, record = self.frame, self.launch.traffic
        for stmt in stmts:
            cur = mask if frame.off is None else mask & ~frame.off
            active = np.count_nonzero(cur)
            if not active:
                return
            if record is not None and not isinstance(stmt, (ast.For, ast.While)):
                record.instruction(active)
            kind = type(stmt)
            if kind is ast.If:
                yield from self.if_(stmt, cur)
            elif kind is ast.For:
                yield from self.for_(stmt, cur)
            elif kind is ast.While:
                yield from self.while_(stmt, cur)
            elif stmt in self.source.barriers:
                yield from self.barrier_(stmt, cur)
            else:
                self.simple(stmt, cur)

    def simple(self, stmt, m) -> None:
        kind = type(stmt)
        if kind is ast.Assign:
            value = self.eval(stmt.value, m)
            for target in stmt.targets:
                self.assign(target, value, m)
        elif kind is ast.AugAssign:
            self.augassign(stmt, m)
        elif kind is ast.Expr:
            self.eval(stmt.value, m)
        elif kind is ast.Return:
            frame = self.frame
            if stmt.value is not None:
                value = self.eval(stmt.value, m)
                frame.result = value if frame.result is None else np.where(m, value, frame.result)
            frame.returned |= m
            frame.update()
        elif kind is ast.Break:
            self.frame.loops[-1][0] |= m
            self.frame.update()
        elif kind is ast.Continue:
            self.frame.loops[-1][1] |= m
            self.frame.update()
        elif kind is ast.Pass:
            pass
        elif kind is ast.Assert:
            ok = truth(self.eval(stmt.test, m))
            if not np.all(ok[m] if vec(ok) else ok):
                raise AssertionError(f"{self.where(stmt)}: assert {self.source.text(stmt.test)} failed")
        else:
            raise Unsupported(f"{self.where(stmt)}: the SIMT engine does not run `{type(stmt).__name__}`")

    # ------------------------------------------------------------ control flow
    def if_(self, stmt, m):
        cond = truth(self.eval(stmt.test, m))
        if not vec(cond):
            yield from self.block_(stmt.body if cond else stmt.orelse, m)
            return
        yes, no = m & cond, m & ~cond
        n_yes, n_no = np.count_nonzero(yes), np.count_nonzero(no)
        if self.launch.traffic is not None:
            self.launch.traffic.branch(self.source, stmt, n_yes, n_no if stmt.orelse else 0, n_no)
        if n_yes:
            yield from self.block_(stmt.body, yes)
        if n_no and stmt.orelse:
            yield from self.block_(stmt.orelse, no)

    def _loop(self, body, m, step):
        """Run ``body`` while ``step(active)`` gives lanes; ``step`` sets the loop variable."""
        frame = self.frame
        frame.loops.append([np.zeros(WARP, dtype=bool), np.zeros(WARP, dtype=bool)])
        frame.update()
        try:
            active = m
            while True:
                active = active & ~frame.loops[-1][0] & ~frame.returned
                frame.loops[-1][1][:] = False
                frame.update()
                if not active.any():
                    break
                active = step(active)
                if active is None or not active.any():
                    break
                if self.launch.traffic is not None:
                    self.launch.traffic.instruction(np.count_nonzero(active))
                yield from self.block_(body, active)
        finally:
            frame.loops.pop()
            frame.update()

    def while_(self, stmt, m):
        if stmt.orelse:
            raise Unsupported(f"{self.where(stmt)}: `while ... else` is not supported")

        def step(active):
            cond = truth(self.eval(stmt.test, active))
            return (active if cond else None) if not vec(cond) else active & cond

        yield from self._loop(stmt.body, m, step)

    def for_(self, stmt, m):
        it = stmt.iter
        if (stmt.orelse or not isinstance(it, ast.Call) or not isinstance(it.func, ast.Name)
                or self.lookup(it.func.id, it) is not range_marker or it.keywords):
            raise Unsupported(f"{self.where(stmt)}: a kernel's for loop must be `for v in range(...)`")
        args = [self.eval(a, m) for a in it.args]
        start, stop, stride = (0, args[0], 1) if len(args) == 1 else (args[0], args[1], args[2] if len(args) > 2 else 1)
        if not any(vec(a) for a in (start, stop, stride)):
            values = iter(range(int(start), int(stop), int(stride)))

            def step(active):
                value = next(values, None)
                if value is None:
                    return None
                self.assign(stmt.target, value, active)
                return active
        else:
            current = _broadcast(start).astype(np.int64)
            stop, stride = _broadcast(stop), _broadcast(stride)
            first = [True]

            def step(active):
                if not first[0]:
                    current[active] += stride[active]
                first[0] = False
                inside = np.where(stride > 0, current < stop, current > stop)
                active = active & inside
                if active.any():
                    self.assign(stmt.target, current.copy(), active)
                return active

        yield from self._loop(stmt.body, m, step)

    def barrier_(self, stmt, m):
        """``cuda.syncthreads()`` (and ``_count``/``_and``/``_or``) as a statement or assignment."""
        call = stmt.value if isinstance(stmt, (ast.Expr, ast.Assign)) else None
        if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Attribute):
            raise Unsupported(f"{self.where(stmt)}: cuda.syncthreads* must be a statement of its own "
                              "(or `v = cuda.syncthreads_count(...)`)")
        op = call.func.attr
        if op not in ("syncthreads", "syncthreads_count", "syncthreads_and", "syncthreads_or"):
            raise Unsupported(f"{self.where(stmt)}: unknown barrier cuda.{op}")
        pred = None
        if op != "syncthreads":
            p = truth(self.eval(call.args[0], m))
            pred = (_broadcast(p) & m)
        self.intervals[m] += 1
        result = yield (op, pred, m)
        if isinstance(stmt, ast.Assign):
            for target in stmt.targets:
                self.assign(target, result, m)

    # ------------------------------------------------------------- assignment
    def full(self, m) -> bool:
        """True when ``m`` holds every lane still running this function (a plain replace then)."""
        return m is self.frame.full or not (self.frame.full & ~m).any()

    def set_name(self, name: str, value, m) -> None:
        env = self.frame.env
        old = env.get(name)
        if old is None or self.full(m) or (not vec(value) and not vec(old) and _same(value, old)):
            env[name] = value
        elif isinstance(value, (memory.Array, Local, tuple)) or isinstance(old, (memory.Array, Local, tuple)):
            if value is not old:
                raise Unsupported(f"{self.source.name}: `{name}` holds different arrays or tuples in different "
                                  "lanes of a warp")
        else:
            env[name] = np.where(m, value, old)

    def assign(self, target, value, m) -> None:
        kind = type(target)
        if kind is ast.Name:
            self.set_name(target.id, value, m)
        elif kind is ast.Tuple:
            if not isinstance(value, tuple) or len(value) != len(target.elts):
                raise Unsupported(f"{self.where(target)}: cannot unpack this value into {len(target.elts)} names")
            for t, v in zip(target.elts, value):
                self.assign(t, v, m)
        elif kind is ast.Subscript:
            arr = self.eval(target.value, m)
            self.store(arr, self.index(target.slice, m), value, m, target)
        else:
            raise Unsupported(f"{self.where(target)}: cannot assign to `{self.source.text(target)}`")

    def augassign(self, stmt, m) -> None:
        op = _BINOPS[type(stmt.op)]
        target = stmt.target
        if isinstance(target, ast.Name):
            old = self.lookup(target.id, target)
            value = self.binop(op, old, self.eval(stmt.value, m), m, stmt.op)
            self.set_name(target.id, value, m)
        elif isinstance(target, ast.Subscript):
            arr = self.eval(target.value, m)
            index = self.index(target.slice, m)
            old = self.load(arr, index, m, target)
            value = self.binop(op, old, self.eval(stmt.value, m), m, stmt.op)
            self.store(arr, index, value, m, target)
        else:
            raise Unsupported(f"{self.where(stmt)}: cannot update `{self.source.text(target)}`")

    # ------------------------------------------------------------ expressions
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

    # ----------------------------------------------------------------- memory
    def load(self, arr, index, m, node):
        if isinstance(arr, Local):
            return self._local(arr, index, m, node, None)
        if isinstance(arr, tuple):
            if len(index) != 1 or vec(index[0]):
                raise Unsupported(f"{self.where(node)}: a tuple indexed by a per-lane value")
            return arr[int(index[0])]
        if not isinstance(arr, memory.Array):
            raise Unsupported(f"{self.where(node)}: `{self.source.text(node)}` indexes something that is not an array")
        lanes = np.flatnonzero(m)
        offs = memory.element_offsets(arr, index, lanes, self.where(node))
        self.launch.access(self, arr, READ, lanes, offs, node)
        values = arr.flat[offs]
        if not any(vec(i) for i in index):
            return values[0]
        out = np.zeros(WARP, dtype=arr.dtype)
        out[lanes] = values
        return out

    def store(self, arr, index, value, m, node) -> None:
        if isinstance(arr, Local):
            self._local(arr, index, m, node, value)
            return
        if not isinstance(arr, memory.Array):
            raise Unsupported(f"{self.where(node)}: `{self.source.text(node)}` is not an array element")
        lanes = np.flatnonzero(m)
        offs = memory.element_offsets(arr, index, lanes, self.where(node))
        self.launch.access(self, arr, WRITE, lanes, offs, node)
        values = value[lanes] if vec(value) else np.full(lanes.size, value)
        order = self.launch.schedule.lane_order(lanes.size)
        if order is not None and np.unique(offs).size < offs.size:   # several lanes, one slot: one wins
            offs, values = offs[order], values[order]
        arr.flat[offs] = values

    def _local(self, arr: Local, index, m, node, value):
        lanes = np.flatnonzero(m)
        if len(index) != len(arr.shape):
            raise IndexError(f"{self.where(node)}: {len(index)} indices for a local array of shape {arr.shape}")
        parts = []
        for dim, (i, size) in enumerate(zip(index, arr.shape)):
            i = np.asarray(i[lanes] if vec(i) else np.full(lanes.size, i)).astype(np.int64)
            if np.any((i < 0) | (i >= size)):
                raise IndexError(f"{self.where(node)}: index out of bounds for a local array of shape {arr.shape}")
            parts.append(i)
        if value is None:
            out = np.zeros(WARP, dtype=arr.dtype)
            out[lanes] = arr.data[(lanes, *parts)]
            return out
        arr.data[(lanes, *parts)] = value[lanes] if vec(value) else value
        return None

    # ------------------------------------------------------------------ calls
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

    def atomic(self, op: str, node, m):
        """``cuda.atomic.<op>``: the active lanes update one after the other (in the schedule's lane
        order); each gets the value it saw before its own update."""
        if op not in _ATOMICS:
            raise Unsupported(f"{self.where(node)}: cuda.atomic.{op} is not supported")
        args = [self.eval(a, m) for a in node.args]
        arr = args[0]
        if not isinstance(arr, memory.Array):
            raise Unsupported(f"{self.where(node)}: atomics on local arrays are not supported")
        if op == "compare_and_swap":
            index, rest = (0,) * arr.ndim, args[1:]
        else:
            index, rest = args[1], args[2:]
        index = index if isinstance(index, tuple) else (index,)
        lanes = np.flatnonzero(m)
        offs = memory.element_offsets(arr, index, lanes, self.where(node))
        self.launch.atomic_access(self, arr, op, lanes, offs, node)
        order = self.launch.schedule.lane_order(lanes.size)
        olds = np.zeros(WARP, dtype=arr.dtype)
        flat = arr.flat
        for k in (range(lanes.size) if order is None else order):
            lane, off = int(lanes[k]), int(offs[k])
            vals = [r[lane] if vec(r) else r for r in rest]
            old = flat[off]
            olds[lane] = old
            flat[off] = _atomic_update(op, old, vals)
        if not any(vec(i) for i in index) and lanes.size == 1:
            return olds[lanes[0]]
        return olds

    def shuffle(self, name: str, args, node, m):
        """``cuda.shfl_sync(mask, value, src_lane)``, ``shfl_up_sync``/``shfl_down_sync(mask, value,
        delta)``, ``shfl_xor_sync(mask, value, lane_mask)``: each active lane gets ``value`` of another
        lane of its warp. A source lane outside the warp (up/down) gives the lane its own value, as
        on the GPU; a source lane that is not active here is an error (its value is undefined)."""
        if len(args) != 3:
            raise TypeError(f"{self.where(node)}: cuda.{name} takes (mask, value, lane or delta)")
        _, value, k = args
        k = _broadcast(k).astype(np.int64)
        if name == "shfl_sync":
            src = k % WARP
        elif name == "shfl_down_sync":
            src = np.where(LANES + k < WARP, LANES + k, LANES)
        elif name == "shfl_up_sync":
            src = np.where(LANES - k >= 0, LANES - k, LANES)
        elif name == "shfl_xor_sync":
            src = (LANES ^ k) % WARP
        else:
            raise Unsupported(f"{self.where(node)}: cuda.{name} is not supported")
        if not vec(value):
            return value
        bad = m & ~m[src]
        if bad.any():
            raise ValueError(f"{self.where(node)}: cuda.{name}: lane {int(np.flatnonzero(bad)[0])} reads lane "
                             f"{int(src[np.flatnonzero(bad)[0]])}, which is not active here (undefined on a GPU)")
        return value[src]

    def vote(self, name, args, m):
        if name == "activemask":
            return int(sum(1 << int(lane) for lane in np.flatnonzero(m)))
        pred = _broadcast(truth(args[1])) & m
        if name == "ballot_sync":
            return int(sum(1 << int(lane) for lane in np.flatnonzero(pred)))
        return bool(pred[m].all()) if name == "all_sync" else bool(pred.any())


class _Missing:
    pass


_MISSING = _Missing()
range_marker = Path("range")


def _same(a, b) -> bool:
    try:
        return type(a) is type(b) and bool(a == b)
    except (TypeError, ValueError):
        return False


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


def _atomic_update(op: str, old, vals):
    if op == "add":
        return old + vals[0]
    if op == "sub":
        return old - vals[0]
    if op in ("max", "nanmax"):
        return old if (op == "nanmax" and np.isnan(vals[0])) else max(old, vals[0])
    if op in ("min", "nanmin"):
        return old if (op == "nanmin" and np.isnan(vals[0])) else min(old, vals[0])
    if op == "and_":
        return old & vals[0]
    if op == "or_":
        return old | vals[0]
    if op == "xor":
        return old ^ vals[0]
    if op == "exch":
        return vals[0]
    if op == "inc":
        return 0 if old >= vals[0] else old + 1
    if op == "dec":
        return vals[0] if (old == 0 or old > vals[0]) else old - 1
    expected, new = vals             # cas / compare_and_swap
    return new if old == expected else old


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
