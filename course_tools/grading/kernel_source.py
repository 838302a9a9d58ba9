"""Student Numba CUDA kernels rebuilt inside the trusted checker (lessons 03 and 04).

A ``@cuda.jit`` kernel cannot cross the wall as data (``wire``), and running it in the
student's kernel would let student code patch what counts its memory accesses. So it crosses
as its Python source text; here that text is checked against a whitelist so strict that the
code can reach nothing but its arguments, its own variables and a fixed vocabulary, and is
then compiled in a namespace of its own, with the checker's own ``numba.cuda``. The test cell's
``run``/``count`` (the instructor's setup, run in the checker) then launch it there: results
and access counts are measured in the checker process, which student code cannot reach.

The vocabulary: ``cuda.<name>`` (thread and block indices and sizes, ``grid``, ``gridsize``,
barriers and fences, ``shared.array``, ``local.array``, ``const.array_like``, ``atomic.*`` and a
few intrinsics), ``math.<name>``, Numba's scalar types (``float32``, ``int32``, ...), NumPy's
scalar types and constants as ``np.<name>`` (``np.float32``, ``np.inf``, ...), the built-ins
:data:`BUILTINS`, the attributes :data:`VALUE_ATTRS` of any value, and names the checker
already holds or the student sent as data: numbers (and tuples of them), Numba types, and
other kernels and device functions that passed the same check. Everything else is refused
with a plain reason (:class:`Refused`): imports, names and attributes starting with ``_`` (a
local throwaway variable ``_`` aside), other attributes and calls, ``global``/``nonlocal``,
``lambda``, nested ``def``/``class``, ``with``, ``try``, ``raise``, ``yield``, ``await``,
comprehensions, f-strings, slices, and decorators other than ``cuda.jit`` and
``cuda.jit(device=True)`` (the decorator is never run: the checker applies its own). A kernel
that loops for ever is stopped by the checker's per-cell deadline (the grader kills and
restarts the checker).

Stdlib only at import (the checker imports it before the instructor's setup has run); Numba
is taken from ``sys.modules`` when a kernel is rebuilt.
"""
from __future__ import annotations

import ast
import builtins
import linecache
import math
import sys

MAX_SOURCE = 50_000        # characters of one kernel's source
MAX_NODES = 5_000          # syntax-tree nodes of one kernel
MAX_DEPS = 64              # kernels, device functions and values one kernel may use

BUILTINS = ("range", "min", "max", "abs", "int", "float", "len", "bool", "round", "print")
NUMBA_TYPES = ("float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
               "intp", "uintp", "boolean", "complex64", "complex128")
VALUE_ATTRS = ("shape", "size", "ndim", "x", "y", "z")
CUDA_VALUES = ("threadIdx", "blockIdx", "blockDim", "gridDim", "laneid", "warpsize")
CUDA_CALLS = ("grid", "gridsize", "syncthreads", "syncthreads_count", "syncthreads_and", "syncthreads_or", "syncwarp",
              "threadfence", "threadfence_block", "threadfence_system", "fma", "selp", "popc", "brev", "clz", "ffs",
              "cbrt", "shared.array", "local.array", "const.array_like",
              *(f"atomic.{op}" for op in ("add", "sub", "max", "min", "nanmax", "nanmin", "and_", "or_", "xor",
                                          "exch", "inc", "dec", "cas", "compare_and_swap")))
MATH_NAMES = frozenset(n for n in dir(math) if not n.startswith("_"))
NUMPY_TYPES = ("float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
               "uint64", "intp", "uintp", "bool_", "complex64", "complex128")
NUMPY_NAMES = frozenset({*NUMPY_TYPES, "inf", "nan", "pi", "e"})
MODULES = ("cuda", "math", "np", "numpy")     # used only as cuda.<name>, math.<name>, np.<type or constant>
FORBIDDEN = frozenset({"getattr", "setattr", "delattr", "hasattr", "globals", "locals", "vars", "dir", "open", "eval",
                       "exec", "compile", "type", "object", "super", "input", "breakpoint", "help",
                       "memoryview", "classmethod", "staticmethod", "property", "id", "iter", "next", "isinstance",
                       "issubclass", "callable", "builtins", "sys", "os", "numba", "importlib"})
DECORATOR_OPTIONS = ("device", "fastmath", "inline", "opt", "lineinfo", "debug")
VOCABULARY = frozenset({*MODULES, *BUILTINS, *NUMBA_TYPES})
RULE = ("a kernel may use only its arguments, its own variables, cuda.*, math.*, Numba's and NumPy's scalar types, "
        f"{'/'.join(BUILTINS)}, .{'/.'.join(VALUE_ATTRS)} of values, and the lesson's constants")

_WORDS = {ast.Import: "`import`", ast.ImportFrom: "`import`", ast.Global: "`global`", ast.Nonlocal: "`nonlocal`",
          ast.Lambda: "`lambda`", ast.FunctionDef: "a nested `def`", ast.AsyncFunctionDef: "a nested `def`",
          ast.ClassDef: "`class`", ast.With: "`with`", ast.AsyncWith: "`with`", ast.Try: "`try`",
          ast.Raise: "`raise`", ast.Yield: "`yield`", ast.YieldFrom: "`yield`", ast.Await: "`await`",
          ast.Delete: "`del`", ast.ListComp: "a comprehension", ast.SetComp: "a comprehension",
          ast.DictComp: "a comprehension", ast.GeneratorExp: "a comprehension", ast.List: "a list",
          ast.Dict: "a dict", ast.Set: "a set", ast.JoinedStr: "an f-string", ast.NamedExpr: "`:=`",
          ast.Starred: "`*` unpacking", ast.Match: "`match`", ast.AnnAssign: "an annotation",
          ast.AsyncFor: "`async for`",
          ast.Slice: "a slice (index one element at a time: a slice's writes would go uncounted)"}
if hasattr(ast, "TryStar"):
    _WORDS[ast.TryStar] = "`try`"
_ALLOWED = (ast.Assign, ast.AugAssign, ast.Expr, ast.If, ast.For, ast.While, ast.Break, ast.Continue, ast.Pass,
            ast.Return, ast.Assert, ast.BoolOp, ast.BinOp, ast.UnaryOp, ast.Compare, ast.IfExp, ast.Subscript,
            ast.Tuple, ast.Load, ast.Store, ast.operator, ast.unaryop, ast.cmpop, ast.boolop)

_REBUILT: dict = {}   # (source, device, scope) -> a kernel or device function built here


class Refused(ValueError):
    """A kernel the checker will not run; the message says why, in plain words."""


class Checked:
    """A kernel's source that passed the whitelist: its tree, the name of its ``def``, whether
    it is a device function, and the names it takes from outside ({name: called?})."""

    def __init__(self, name: str, source: str, tree: ast.Module, func: str, device: bool, free: dict):
        self.name, self.source, self.tree, self.func, self.device, self.free = name, source, tree, func, device, free


def _chain(node) -> list[str] | None:
    """['cuda', 'threadIdx', 'x'] for ``cuda.threadIdx.x``; None unless it ends in a name."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return [node.id, *reversed(parts)]


class _Check(ast.NodeVisitor):
    """Walks one function body in source order; raises Refused at the first thing not allowed."""

    def __init__(self, name: str, params: set, stored: set):
        self.name, self.params, self.stored = name, params, stored
        self.free: dict[str, bool] = {}

    def refuse(self, node, what: str, why: str = "") -> None:
        line = getattr(node, "lineno", None)
        raise Refused(f"{self.name} uses {what}, which a kernel may not{' (line ' + str(line) + ')' if line else ''}: "
                      f"{why or RULE}")

    def generic_visit(self, node):
        if not isinstance(node, _ALLOWED):
            self.refuse(node, _WORDS.get(type(node), f"`{type(node).__name__}`"))
        super().generic_visit(node)

    def _name_ok(self, node, ident: str) -> None:
        if ident.startswith("_"):
            self.refuse(node, f"the name `{ident}`", "names starting with _ are not allowed")
        if ident in FORBIDDEN:
            self.refuse(node, f"`{ident}`")

    def visit_Name(self, node):
        if not (node.id == "_" and "_" in self.stored):     # a local throwaway `_` is just a variable
            self._name_ok(node, node.id)
        if node.id in MODULES:
            self.refuse(node, f"`{node.id}` itself as a value", f"use {node.id}.<name> directly")
        if isinstance(node.ctx, ast.Store):
            if node.id in VOCABULARY:
                self.refuse(node, f"`{node.id}` as a variable name", "it names part of the kernel vocabulary")
        elif node.id not in self.params and node.id not in self.stored and node.id not in VOCABULARY:
            self.free.setdefault(node.id, False)

    def visit_Constant(self, node):
        if not (node.value is None or type(node.value) in (bool, int, float, complex, str)):
            self.refuse(node, f"a constant of type {type(node.value).__name__}")

    def visit_Attribute(self, node):
        """A whole chain ``a.b.c`` at once, its innermost part first (the first thing a reader meets)."""
        inner, attrs = node, []
        while isinstance(inner, ast.Attribute):
            attrs.append(inner.attr)
            inner = inner.value
        attrs.reverse()
        if isinstance(inner, ast.Name):
            self._name_ok(inner, inner.id)
        else:
            self.visit(inner)
        for attr in attrs:
            self._name_ok(node, attr)
        if not isinstance(node.ctx, ast.Load):
            self.refuse(node, f"assignment to `.{node.attr}`")
        if isinstance(inner, ast.Name) and inner.id in MODULES:
            self._path(node, [inner.id, *attrs], call=False)
            return
        for attr in attrs:
            if attr not in VALUE_ATTRS:
                self.refuse(node, f"the attribute `.{attr}`")
        if isinstance(inner, ast.Name):
            self.visit(inner)

    def _path(self, node, chain: list[str], call: bool) -> None:
        text = ".".join(chain)
        for part in chain:
            self._name_ok(node, part)
        root, rest = chain[0], ".".join(chain[1:])
        if root == "math":
            if len(chain) != 2 or chain[1] not in MATH_NAMES:
                self.refuse(node, f"`{text}`")
            if call != callable(getattr(math, chain[1])):
                self.refuse(node, f"`{text}`" + (" as a function" if call else " as a value"))
            return
        if root in ("np", "numpy"):
            if len(chain) != 2 or chain[1] not in NUMPY_NAMES or call and chain[1] not in NUMPY_TYPES:
                self.refuse(node, f"`{text}`" + (" as a function" if call and chain[1] in NUMPY_NAMES else ""),
                            f"of NumPy a kernel may use only the scalar types ({', '.join(NUMPY_TYPES)}) "
                            "and inf, nan, pi, e")
            return
        ok = rest in CUDA_CALLS if call else (
            rest in CUDA_VALUES or (len(chain) == 3 and chain[1] in CUDA_VALUES[:4] and chain[2] in ("x", "y", "z")))
        if not ok:
            self.refuse(node, f"`{text}`" + (" as a function" if call and rest in CUDA_VALUES else ""))

    def visit_Call(self, node):
        func = node.func
        chain = _chain(func)
        if isinstance(func, ast.Name):
            self._name_ok(func, func.id)
            if func.id in self.params or func.id in self.stored:
                self.refuse(node, f"a call of its variable `{func.id}`", "only cuda.*, math.*, the built-ins "
                            f"{'/'.join(BUILTINS)}, Numba types and other checked device functions may be called")
            if func.id in MODULES:
                self.refuse(node, f"`{func.id}` itself as a function")
            if func.id not in VOCABULARY:
                self.free[func.id] = True
        elif chain and chain[0] in MODULES:
            self._path(func, chain, call=True)
        else:
            self.visit(func)              # a forbidden name or attribute in it is the better reason
            self.refuse(node, "a call of a computed function", "only cuda.*, math.*, the built-ins "
                        f"{'/'.join(BUILTINS)}, Numba types and other checked device functions may be called")
        for arg in node.args:
            self.visit(arg)
        for kw in node.keywords:
            if kw.arg is None:
                self.refuse(kw.value, "`**` unpacking")
            self._name_ok(node, kw.arg)
            self.visit(kw.value)


def _decorator(name: str, node) -> bool | None:
    """True for ``cuda.jit(device=True)``, False for ``cuda.jit``/``cuda.jit()``, else Refused."""
    target = node.func if isinstance(node, ast.Call) else node
    if _chain(target) != ["cuda", "jit"]:
        raise Refused(f"{name} is decorated with `{ast.unparse(node)[:80]}`, which a graded kernel may not be: "
                      "use @cuda.jit or @cuda.jit(device=True)")
    if not isinstance(node, ast.Call):
        return False
    device = False
    for kw in node.keywords:
        plain = isinstance(kw.value, ast.Constant) and type(kw.value.value) is bool
        if kw.arg not in DECORATOR_OPTIONS or not plain:
            raise Refused(f"{name} is decorated with `{ast.unparse(node)[:80]}`: a graded kernel may pass "
                          f"only {', '.join(o + '=True/False' for o in DECORATOR_OPTIONS)} to cuda.jit (no signature)")
        device = kw.value.value if kw.arg == "device" else device
    if node.args:
        raise Refused(f"{name} is decorated with `{ast.unparse(node)[:80]}`: a graded kernel may not give cuda.jit "
                      "a signature (the grader compiles it for the arguments the test passes)")
    return device


def check(name: str, source, device: bool) -> Checked:
    """Check one kernel's (or device function's) source, as sent by the student's kernel
    (``device``: how it was decorated there; the decorator in the source, if any, must agree)."""
    if type(source) is not str or not source.strip():
        raise Refused(f"{name} is a CUDA kernel whose source the grader could not read (define it in a cell with "
                      "def and @cuda.jit)")
    if len(source) > MAX_SOURCE:
        raise Refused(f"{name} has {len(source)} characters of source; a graded kernel may have {MAX_SOURCE}")
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise Refused(f"the source of {name} does not parse: {str(exc)[:200]}") from None
    if sum(1 for _ in ast.walk(tree)) > MAX_NODES:
        raise Refused(f"{name} is too long for a graded kernel (more than {MAX_NODES} syntax nodes)")
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.FunctionDef):
        raise Refused(f"the source of {name} is not one plain function definition")
    fn = tree.body[0]
    if len(fn.decorator_list) > 1:
        raise Refused(f"{name} has {len(fn.decorator_list)} decorators; a graded kernel has one, @cuda.jit")
    if fn.decorator_list:
        declared = _decorator(name, fn.decorator_list[0])
        if declared != bool(device):
            raise Refused(f"{name}: its source and the object it names disagree on whether it is a device function")
    args = fn.args
    if args.posonlyargs or args.vararg or args.kwonlyargs or args.kwarg or args.defaults or fn.returns:
        raise Refused(f"{name} uses default values, *args, **kwargs, keyword-only or annotated parameters, "
                      "which a kernel may not: give it plain parameters")
    check_ = _Check(name, set(), set())
    check_._name_ok(fn, fn.name)
    params = set()
    for arg in args.args:
        check_._name_ok(arg, arg.arg)
        if arg.annotation is not None:
            check_.refuse(arg, "an annotation")
        if arg.arg in VOCABULARY:
            check_.refuse(arg, f"`{arg.arg}` as a parameter name", "it names part of the kernel vocabulary")
        params.add(arg.arg)
    stored = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    check_.params, check_.stored = params, stored
    for statement in fn.body:
        check_.visit(statement)
    fn.decorator_list = []          # never run: the checker applies its own cuda.jit
    return Checked(name, source, tree, fn.name, bool(device), check_.free)


def _plain(value, depth: int = 0) -> bool:
    """A number, a Numba type, or a (short) tuple of those: what a kernel may take from outside."""
    if type(value) in (bool, int, float, complex):
        return True
    if type(value) is tuple:
        return depth < 3 and len(value) <= 16 and all(_plain(v, depth + 1) for v in value)
    numba_types = sys.modules.get("numba.core.types")
    return numba_types is not None and isinstance(value, numba_types.Type)


def _cuda_module():
    cuda = sys.modules.get("numba.cuda")
    if cuda is None:
        raise Refused("the grader cannot rebuild kernels here: its setup did not load numba.cuda")
    return cuda


class Builder:
    """Rebuilds the kernels of one set of student names (``kinds``: {name: [kind, payload]}
    as ``wire._course_names`` sends them) against the checker's namespace ``held``; ``decode``
    reads values sent as data. A name's free names resolve, in this order: a name the student
    provides (its own kind), a name the checker holds (its own value: setup constants win over
    the student's copies), one of the kernel's dependencies sent with it."""

    def __init__(self, kinds: dict, held: dict, decode):
        self.kinds, self.held, self.decode = kinds, held, decode
        self.built: dict[str, object] = {}
        self.building: list[str] = []

    def all(self) -> dict:
        """{name: rebuilt kernel, or Refused} for every name of kind ``kernel``."""
        out = {}
        for name, (kind, payload) in self.kinds.items():
            if kind == "kernel":
                try:
                    out[name] = self.kernel(name, payload, {})
                except Refused as exc:
                    out[name] = exc
                except Exception as exc:  # noqa: BLE001 - e.g. a real GPU's compiler: a failed test, not a crash
                    out[name] = Refused(f"{name} could not be compiled by the grader: {type(exc).__name__}: "
                                        f"{str(exc)[:300]}")
        return out

    def kernel(self, name: str, payload, deps: dict):
        if name in self.built:
            return self.built[name]
        if name in self.building:
            raise Refused(f"{' -> '.join(self.building + [name])}: a kernel may not call itself")
        if not isinstance(payload, dict) or type(payload.get("device")) is not bool:
            raise Refused(f"{name}: the grader received a malformed kernel")
        more = payload.get("deps") or {}
        if not isinstance(more, dict) or len(more) > MAX_DEPS:
            raise Refused(f"{name}: the grader received a malformed kernel (or one using over {MAX_DEPS} names)")
        deps = {**more, **deps}
        checked = check(name, payload.get("source"), payload["device"])
        self.building.append(name)
        try:
            scope = {name_: self.resolve(checked, name_, called, deps) for name_, called in checked.free.items()}
        finally:
            self.building.pop()
        built = compile_kernel(checked, scope)
        self.built[name] = built
        return built

    def resolve(self, checked: Checked, name: str, called: bool, deps: dict):
        where = f"{checked.name} uses `{name}`"
        if name in self.kinds:
            kind, payload = self.kinds[name]
            value = (self.kernel(name, payload, deps) if kind == "kernel" else
                     self._value(payload, where) if kind == "value" else self._refuse(where, "a function of yours"))
        elif name in self.held:
            value = self.held[name]
        elif name in deps and isinstance(deps[name], list) and len(deps[name]) == 2:
            kind, payload = deps[name]
            value = (self.kernel(name, payload, deps) if kind == "kernel" else
                     self._value(payload, where) if kind == "value" else self._refuse(where, "not gradable"))
        else:
            raise Refused(f"{where}, which the grader does not know: {RULE}")
        if called:
            if not rebuilt(value):
                raise Refused(f"{checked.name} calls `{name}`, which a kernel may not: only cuda.*, math.*, the "
                              f"built-ins {'/'.join(BUILTINS)} and device functions (@cuda.jit(device=True)) "
                              "may be called")
            if not _is_device(value):
                raise Refused(f"{checked.name} calls `{name}`, a kernel: only device functions "
                              "(@cuda.jit(device=True)) may be called from a kernel")
            return value
        if rebuilt(value) or not _plain(value):
            self._refuse(where, f"a {type(value).__name__}")
        return value

    def _value(self, payload, where: str):
        try:
            return self.decode(payload)
        except (ValueError, TypeError, RecursionError):
            self._refuse(where, "malformed data")

    @staticmethod
    def _refuse(where: str, what: str):
        raise Refused(f"{where} ({what}), which a kernel may not: {RULE}")


def rebuilt(obj) -> bool:
    """True for a kernel or device function built by :func:`compile_kernel` in this process."""
    return any(k is obj for k in _REBUILT.values())


def _is_device(obj) -> bool:
    return bool(getattr(obj, "_device", False) or (getattr(obj, "targetoptions", None) or {}).get("device"))


def compile_kernel(checked: Checked, scope: dict):
    """The checked function compiled in a namespace of its own (the vocabulary, the built-ins
    :data:`BUILTINS` and ``scope``), decorated with the checker's own ``cuda.jit``."""
    key = (checked.source, checked.device, tuple(sorted(
        (n, ("kernel", id(v)) if rebuilt(v) else (type(v).__name__, repr(v))) for n, v in scope.items())))
    if key in _REBUILT:    # the same kernel again (asked for before every test cell): compiled once
        return _REBUILT[key]
    cuda = _cuda_module()
    numba = sys.modules["numba"]
    import numpy  # loaded with numba already; bound only for np.<scalar type or constant>
    space = {"__builtins__": {n: getattr(builtins, n) for n in BUILTINS}, "__name__": "course_kernel",
             "cuda": cuda, "math": math, "np": numpy, "numpy": numpy, **{n: getattr(numba, n) for n in NUMBA_TYPES},
             **scope}
    filename = f"<kernel {checked.name}>"
    lines = checked.source.splitlines(True)
    linecache.cache[filename] = (len(checked.source), None, lines, filename)   # names in race reports
    exec(compile(checked.tree, filename, "exec"), space)  # noqa: S102 - whitelisted above: one plain def
    fn = space[checked.func]
    built = cuda.jit(device=True)(fn) if checked.device else cuda.jit(fn)
    _REBUILT[key] = built
    return built
