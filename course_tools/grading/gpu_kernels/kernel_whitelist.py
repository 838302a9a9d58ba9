"""The whitelist a student's Numba CUDA kernel source must pass before the trusted checker
compiles it (``kernel_source`` rebuilds it; lessons 03 and 04).

The vocabulary: ``cuda.<name>`` (thread and block indices and sizes, ``grid``, ``gridsize``,
barriers and fences, ``shared.array``, ``local.array``, ``const.array_like``, ``atomic.*``, warp
shuffles and votes (``shfl_*_sync``, ``activemask``, ``ballot_sync``, ...) and a few intrinsics),
``math.<name>``, Numba's scalar types (``float32``, ``int32``, ...), NumPy's scalar types and
constants as ``np.<name>`` (``np.float32``, ``np.inf``, ...), the built-ins :data:`BUILTINS`, the
attributes :data:`VALUE_ATTRS` of any value, and names the checker already holds or the student sent
as data: numbers (and tuples of them), Numba types, and other kernels and device functions that
passed the same check. Everything else is refused with a plain reason (:class:`Refused`): imports,
names and attributes starting with ``_`` (a local throwaway variable ``_`` aside), other attributes
and calls, ``global``/``nonlocal``, ``lambda``, nested ``def``/``class``, ``with``, ``try``,
``raise``, ``yield``, ``await``, comprehensions, f-strings, slices, and decorators other than
``cuda.jit`` and ``cuda.jit(device=True)`` (the decorator is never run: the checker applies its
own). Sizes are characters and syntax-tree nodes.

Stdlib only (the checker imports it before the instructor's setup has run).
"""
from __future__ import annotations

import ast
import math

if __package__:
    from .checked import Checked
    from .source_whitelist import STATEMENTS_AND_EXPRESSIONS, WORDS, Refused, WhitelistCheck, chain, one_function
else:  # the checker imports this file as a top-level module, its folder on sys.path
    from checked import Checked
    from source_whitelist import STATEMENTS_AND_EXPRESSIONS, WORDS, Refused, WhitelistCheck, chain, one_function

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
              "cbrt", "shared.array", "local.array", "const.array_like", "shfl_sync", "shfl_up_sync", "shfl_down_sync",
              "shfl_xor_sync", "activemask", "ballot_sync", "all_sync", "any_sync",
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

_WORDS = {**WORDS, ast.Slice: "a slice (index one element at a time: a slice's writes would go uncounted)"}


class CudaCheck(WhitelistCheck):
    """Walks one CUDA kernel's body; raises Refused at the first thing not allowed."""

    ALLOWED = (*STATEMENTS_AND_EXPRESSIONS, ast.Assert)
    WORDS = _WORDS
    RULE = RULE

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
        path = chain(func)
        if isinstance(func, ast.Name):
            self._name_ok(func, func.id)
            if func.id in self.params or func.id in self.stored:
                self.refuse(node, f"a call of its variable `{func.id}`", "only cuda.*, math.*, the built-ins "
                            f"{'/'.join(BUILTINS)}, Numba types and other checked device functions may be called")
            if func.id in MODULES:
                self.refuse(node, f"`{func.id}` itself as a function")
            if func.id not in VOCABULARY:
                self.free[func.id] = True
        elif path and path[0] in MODULES:
            self._path(func, path, call=True)
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
    if chain(target) != ["cuda", "jit"]:
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
    tree, fn = one_function(name, source, "CUDA", MAX_SOURCE, MAX_NODES)
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
    check_ = CudaCheck(name, set(), set())
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
    return Checked(name, source, tree, fn.name, check_.free, device=bool(device))
