"""What a graded Triton kernel may be (lesson 14): the whitelist its source must pass, so that it
can reach nothing but its arguments, its own variables, the ``tl.*`` names in :data:`TL_CALLS`
and :data:`TL_VALUES`, the built-ins :data:`BUILTINS`, the attributes :data:`VALUE_ATTRS` of
values, ``.to(dtype)``, numbers the checker holds or the student sent, and other Triton
functions that passed the same check (``triton_source`` rebuilds what passes).

Refused, with a plain reason (:class:`Refused`): imports, names and attributes starting with
``_``, other attributes (``tl.extra``, ``tl.inline_asm_elementwise``, ``tl.device_print``,
``tl.softmax``, atomics, block pointers ...), calls of anything else, rebinding ``tl``,
``global``/``nonlocal``, ``lambda``, nested ``def``/``class``, ``with``, ``try``, ``raise``,
comprehensions, f-strings, slices other than ``:``, default values, annotations other than
``tl.constexpr``, and decorators other than a bare ``@triton.jit`` (autotuning is the grader's
choice). Which parameters may be ``tl.constexpr`` is known only at launch: ``triton_traffic``
refuses a tensor given to one (the interpreter would hand over the torch tensor itself). A
kernel that loops for ever is stopped by the checker's per-cell deadline; a grid is bounded by
``triton_traffic.MAX_PROGRAMS``, every tensor a kernel makes by ``MAX_BLOCK`` elements (or the
tighter ``block_limit`` an exercise's launch gives).

``triton_source.check`` applies it, after the decorators and the check that the kernel is not one
of the course library's own (``triton_library``).

Stdlib only.
"""
from __future__ import annotations

import ast

if __package__:
    from .checked import Checked
    from .source_whitelist import STATEMENTS_AND_EXPRESSIONS, Refused, WhitelistCheck, chain
else:  # the checker imports this file as a top-level module, its folder on sys.path
    from checked import Checked
    from source_whitelist import STATEMENTS_AND_EXPRESSIONS, Refused, WhitelistCheck, chain

MAX_SOURCE = 20_000        # characters of one kernel's source
MAX_NODES = 3_000          # syntax-tree nodes of one kernel
MAX_DEPS = 32              # helper functions and constants one kernel may use

BUILTINS = ("range", "min", "max", "abs", "int", "float", "len")
TL_CALLS = frozenset({
    "program_id", "num_programs", "arange", "load", "store", "zeros", "zeros_like", "full", "where", "maximum",
    "minimum", "max", "min", "sum", "argmax", "argmin", "exp", "exp2", "log", "log2", "sqrt", "rsqrt", "abs", "erf",
    "sigmoid", "cos", "sin", "fma", "dot", "cdiv", "static_range", "range", "reshape", "broadcast_to",
    "expand_dims", "trans", "permute", "cast", "multiple_of", "max_contiguous", "fdiv", "div_rn", "floor", "ceil",
    "clamp", "cumsum", "static_assert"})
TL_VALUES = frozenset({"float16", "bfloat16", "float32", "float64", "int1", "int8", "int16", "int32", "int64",
                       "uint8", "uint16", "uint32", "uint64", "constexpr"})
TL_MATH = frozenset({"abs", "ceil", "cos", "div_rn", "erf", "exp", "exp2", "fdiv", "floor", "fma", "log", "log2",
                     "rsqrt", "sin", "sqrt", "sqrt_rn"})
VALUE_ATTRS = ("dtype", "element_ty", "shape", "T")
VALUE_METHODS = ("to",)
VOCABULARY = frozenset({"tl", *BUILTINS})
RULE = ("a Triton kernel may use only its arguments, its own variables, tl.* (program_id, arange, load, store, "
        "reductions, dot, math, dtypes), " + "/".join(BUILTINS) + ", ." + "/.".join(VALUE_ATTRS)
        + " and .to() of values, other @triton.jit functions, and the lesson's constants")


def _is_constexpr(node) -> bool:
    return chain(node) == ["tl", "constexpr"]


class TritonCheck(WhitelistCheck):
    """Walks one Triton kernel's body; raises Refused at the first thing not allowed."""

    ALLOWED = STATEMENTS_AND_EXPRESSIONS
    WHO = "a graded Triton kernel"
    RULE = RULE

    def name_ok(self, node, ident: str) -> None:
        if ident.startswith("_") and ident != "_":
            self.refuse(node, f"the name `{ident}`", "names starting with _ are not allowed")

    def visit_Name(self, node):
        self.name_ok(node, node.id)
        if isinstance(node.ctx, ast.Store):
            if node.id in VOCABULARY:
                self.refuse(node, f"`{node.id}` as a variable name", "it names part of the kernel vocabulary")
        elif node.id == "tl":
            self.refuse(node, "`tl` itself as a value", "use tl.<name> directly")
        elif node.id not in self.params and node.id not in self.stored and node.id not in VOCABULARY:
            self.free.setdefault(node.id, False)

    def visit_Constant(self, node):
        if not (node.value is None or type(node.value) in (bool, int, float, str)):
            self.refuse(node, f"a constant of type {type(node.value).__name__}")

    def visit_Slice(self, node):
        if node.lower is not None or node.upper is not None or node.step is not None:
            self.refuse(node, "a slice with bounds", "only `:` (with None) is allowed, as in offs[:, None]")

    def _tl(self, node, chain: list[str], call: bool) -> None:
        text = ".".join(chain)
        if len(chain) == 2 and (chain[1] in TL_CALLS if call else chain[1] in TL_VALUES):
            return
        if len(chain) == 3 and chain[1] == "math" and call and chain[2] in TL_MATH:
            return
        self.refuse(node, f"`{text}`" + (" as a function" if call and chain[1] in TL_VALUES else ""))

    def visit_Attribute(self, node):
        path = chain(node)
        if not isinstance(node.ctx, ast.Load):
            self.refuse(node, f"assignment to `.{node.attr}`")
        if path and path[0] == "tl":
            for part in path:
                self.name_ok(node, part)
            self._tl(node, path, call=False)
            return
        inner, attrs = node, []
        while isinstance(inner, ast.Attribute):
            attrs.append(inner.attr)
            inner = inner.value
        for attr in attrs:
            self.name_ok(node, attr)
            if attr not in VALUE_ATTRS:
                self.refuse(node, f"the attribute `.{attr}`")
        self.visit(inner)

    def visit_Call(self, node):
        func = node.func
        path = chain(func)
        if isinstance(func, ast.Name):
            self.name_ok(func, func.id)
            if func.id == "tl":
                self.refuse(node, "`tl` itself as a function")
            if func.id in self.params or func.id in self.stored:
                self.refuse(node, f"a call of its variable `{func.id}`",
                            "only tl.*, the built-ins and other @triton.jit functions may be called")
            if func.id not in VOCABULARY:
                self.free[func.id] = True
        elif path and path[0] == "tl":
            for part in path:
                self.name_ok(func, part)
            self._tl(func, path, call=True)
        elif isinstance(func, ast.Attribute) and func.attr in VALUE_METHODS:
            self.visit(func.value)             # x.to(tl.float32): a value's cast
        else:
            if isinstance(func, ast.Attribute):
                self.name_ok(func, func.attr)
            self.refuse(node, "a call of a computed function" if not isinstance(func, ast.Attribute)
                        else f"the method `.{func.attr}`",
                        "only tl.*, the built-ins, .to() and other @triton.jit functions may be called")
        for arg in node.args:
            self.visit(arg)
        for kw in node.keywords:
            if kw.arg is None:
                self.refuse(kw.value, "`**` unpacking")
            self.name_ok(node, kw.arg)
            self.visit(kw.value)


def decorators(name: str, fn: ast.FunctionDef) -> None:
    """Refuse any decorator but one bare ``@triton.jit`` (autotuning is the grader's choice)."""
    for node in fn.decorator_list:
        target = node.func if isinstance(node, ast.Call) else node
        text = ast.unparse(node)[:80]
        if chain(target) == ["triton", "autotune"]:
            raise Refused(f"{name} is decorated with @triton.autotune: the grader chooses the meta-parameters "
                          "itself; remove the decorator")
        if chain(target) != ["triton", "jit"] or isinstance(node, ast.Call) and (node.args or node.keywords):
            raise Refused(f"{name} is decorated with `{text}`, which a graded kernel may not be: "
                          "use a bare @triton.jit")
    if len(fn.decorator_list) > 1:
        raise Refused(f"{name} has {len(fn.decorator_list)} decorators; a graded kernel has one, @triton.jit")


def whitelisted(name: str, source: str, tree: ast.Module, fn: ast.FunctionDef) -> Checked:
    """``fn`` (the one ``def`` of ``tree``, parsed from ``source``) walked against the whitelist:
    its parameters, then every statement of its body; raises Refused at the first thing not allowed."""
    args = fn.args
    if args.posonlyargs or args.vararg or args.kwonlyargs or args.kwarg or args.defaults or fn.returns:
        raise Refused(f"{name} uses default values, *args, **kwargs, keyword-only parameters or a return "
                      "annotation, which a graded kernel may not: give it plain parameters")
    checker = TritonCheck(name, set(), set())
    checker.name_ok(fn, fn.name)
    params = set()
    for arg in args.args:
        checker.name_ok(arg, arg.arg)
        if arg.annotation is not None and not _is_constexpr(arg.annotation):
            checker.refuse(arg, f"the annotation `{ast.unparse(arg.annotation)[:40]}`",
                           "the only annotation allowed is tl.constexpr")
        if arg.arg in VOCABULARY:
            checker.refuse(arg, f"`{arg.arg}` as a parameter name", "it names part of the kernel vocabulary")
        params.add(arg.arg)
    stored = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    checker.params, checker.stored = params, stored
    for statement in fn.body:
        checker.visit(statement)
    fn.decorator_list = []          # never run: the checker applies the interpreter itself
    return Checked(name, source, tree, fn.name, checker.free)
