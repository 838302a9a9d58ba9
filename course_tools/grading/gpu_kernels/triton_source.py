"""Student Triton kernels checked and rebuilt inside the trusted checker (lesson 14).

A ``@triton.jit`` kernel crosses the wall as its Python source, as lessons 03/04's Numba
kernels do (``wire._course_jit`` marks it ``"lang": "triton"``; ``kernel_source.Builder`` hands
it here). The source must pass a whitelist so strict that the kernel can reach nothing but its
arguments, its own variables, the ``tl.*`` names in :data:`TL_CALLS` and :data:`TL_VALUES`, the
built-ins :data:`BUILTINS`, the attributes :data:`VALUE_ATTRS` of values, ``.to(dtype)``, numbers
the checker holds or the student sent, and other Triton functions that passed the same check.
The checker then applies Triton's *interpreter* itself (``InterpretedFunction``, whatever
``TRITON_INTERPRET`` says), in a namespace of its own with the checker's ``triton.language``:
the test cell's ``run``/``count`` (``course_lib.triton_traffic``) launch it there, counting
bytes and refusing addresses outside the kernel's tensors, where student code cannot reach.

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

Also refused: a kernel that is one of the course library's own ``@triton.jit`` kernels (the
lectures' reference kernels in ``course_lib``) under another name, with its names, numbers or
docstrings changed, or with statements added that do nothing (:func:`library_copy`, which says
precisely what it holds): an exercise asks for the student's kernel, not a call of the lecture's.
A copy with one working statement changed is not refused here; it is graded like any kernel.

Stdlib only at import; ``triton`` is imported when a kernel is rebuilt.
"""
from __future__ import annotations

import ast
import builtins
import linecache
import os
import sys

if __package__:
    from .source_whitelist import STATEMENTS_AND_EXPRESSIONS, Refused, WhitelistCheck, chain, one_function
else:  # the checker imports this file as a top-level module, its folder on sys.path
    from source_whitelist import STATEMENTS_AND_EXPRESSIONS, Refused, WhitelistCheck, chain, one_function

__all__ = ["Refused", "check", "rebuild"]

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

class Checked:
    """A Triton kernel's source that passed the whitelist: its tree, the name of its ``def``
    and the names it takes from outside ({name: called?})."""

    def __init__(self, name: str, source: str, tree: ast.Module, func: str, free: dict):
        self.name, self.source, self.tree, self.func, self.free = name, source, tree, func, free


def _is_constexpr(node) -> bool:
    return chain(node) == ["tl", "constexpr"]


class _Check(WhitelistCheck):
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


class _Canonical(ast.NodeTransformer):
    """Every identifier (parameters, variables, names used) renamed by order of first
    appearance, annotations dropped and every number (ints, floats, booleans) made the same
    placeholder; attributes (``tl.load``), keywords and strings kept: two kernels that differ
    only in their names and numbers come out the same."""

    def __init__(self):
        self.names: dict[str, str] = {}

    def _name(self, name: str) -> str:
        return self.names.setdefault(name, f"v{len(self.names)}")

    def visit_arg(self, node):
        node.arg, node.annotation = self._name(node.arg), None
        return node

    def visit_Name(self, node):
        node.id = self._name(node.id)
        return node

    def visit_Constant(self, node):
        if node.value is not None and not isinstance(node.value, str):
            node.value = ...
        return node


STORING = ("store", "static_assert", "device_print", "device_assert")   # tl.* calls with an effect


def _stores_nothing(node) -> bool:
    """Whether ``node`` holds no call that could have an effect: only tl.* functions other
    than :data:`STORING` (and no atomics), the built-ins and ``.to()``; a helper may store."""
    for sub in ast.walk(node):
        if not isinstance(sub, ast.Call):
            continue
        path = chain(sub.func) or []
        if isinstance(sub.func, ast.Attribute) and sub.func.attr in VALUE_METHODS and path[:1] != ["tl"]:
            continue
        if path[:1] == ["tl"] and path[-1] not in STORING and not path[-1].startswith("atomic"):
            continue
        if len(path) == 1 and path[0] in BUILTINS:
            continue
        return False
    return True


def _inert(statement, read: set) -> bool:
    """Whether ``statement`` does nothing: ``pass``, a bare constant or effect-free expression,
    or an assignment whose value stores nothing to names that nothing reads."""
    if isinstance(statement, ast.Pass):
        return True
    if isinstance(statement, ast.Expr):
        return _stores_nothing(statement.value)
    if isinstance(statement, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
        targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
        names = [n for t in targets for n in (t.elts if isinstance(t, ast.Tuple) else [t])]
        return (all(isinstance(n, ast.Name) and n.id not in read for n in names)
                and statement.value is not None and _stores_nothing(statement.value))
    return False


def _without_inert(fn: ast.FunctionDef) -> None:
    """Take the inert statements (:func:`_inert`) out of ``fn``, in place, until none is left
    (taking out one assignment can leave the one that fed it unread)."""
    before = None
    while (now := ast.dump(fn)) != before:
        before = now
        read = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        for node in list(ast.walk(fn)):
            for field in ("body", "orelse"):
                body = getattr(node, field, None)
                if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
                    setattr(node, field, [st for st in body if not _inert(st, read)] or [ast.Pass()])


def _canonical(fn: ast.FunctionDef) -> str:
    """A kernel with its name, decorators, docstrings and other inert statements taken out
    (:func:`_without_inert`), then its names and numbers made canonical (:class:`_Canonical`)."""
    import copy  # noqa: PLC0415

    fn = copy.deepcopy(fn)
    fn.name, fn.decorator_list, fn.returns = "kernel", [], None
    _without_inert(fn)
    return ast.dump(_Canonical().visit(fn), annotate_fields=False)


_LIBRARY: dict | None = None


def library_kernels() -> dict[str, str]:
    """{canonical body: "module.name"} of every ``@triton.jit`` function in ``course_lib``'s
    own files (read as text, not imported)."""
    global _LIBRARY
    if _LIBRARY is None:
        import importlib.util  # noqa: PLC0415
        from pathlib import Path  # noqa: PLC0415

        _LIBRARY = {}
        spec = importlib.util.find_spec("course_lib")
        for folder in (spec.submodule_search_locations or []) if spec else []:
            for path in sorted(Path(folder).glob("*.py")):
                text = path.read_text()
                if "triton.jit" not in text:
                    continue
                for node in ast.walk(ast.parse(text)):
                    if isinstance(node, ast.FunctionDef) and any("jit" in ast.unparse(d) for d in node.decorator_list):
                        _LIBRARY.setdefault(_canonical(node), f"course_lib.{path.stem}.{node.name}")
    return _LIBRARY


def library_copy(name: str, fn: ast.FunctionDef) -> None:
    """Refuse a kernel that is one of course_lib's own ``@triton.jit`` functions up to what
    :func:`_canonical` takes out or evens out: its names (the kernel's, its parameters', its
    variables'), its numbers, its annotations, docstrings and other bare strings, ``pass``,
    effect-free bare expressions, and assignments that store nothing to names nothing reads.
    It holds no more than that: a copy with one working statement added, removed or changed
    (an operator, a call, a used assignment such as ``v = v + 0.0``), or two statements swapped,
    passes this check and is graded on what it computes, like any kernel; the lectures' kernels
    do not meet the exercises' specs (masks, strides, loops) nor their budgets."""
    found = library_kernels().get(_canonical(fn))
    if found:
        raise Refused(f"{name} is the course library's kernel {found} (its names, numbers, docstrings or unused "
                      "assignments changed at most): an exercise is graded on a kernel you write, not on the lecture's")


def _decorators(name: str, fn: ast.FunctionDef) -> None:
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


def check(name: str, source) -> Checked:
    """Check one Triton kernel's (or helper's) source as the student's kernel sent it."""
    tree, fn = one_function(name, source, "Triton", MAX_SOURCE, MAX_NODES)
    _decorators(name, fn)
    library_copy(name, fn)
    args = fn.args
    if args.posonlyargs or args.vararg or args.kwonlyargs or args.kwarg or args.defaults or fn.returns:
        raise Refused(f"{name} uses default values, *args, **kwargs, keyword-only parameters or a return "
                      "annotation, which a graded kernel may not: give it plain parameters")
    checker = _Check(name, set(), set())
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


def _plain(value) -> bool:
    return type(value) in (bool, int, float)


def _is_triton_fn(value) -> bool:
    return type(value).__name__ == "InterpretedFunction" and getattr(value, "_course_checked", False)


def rebuild(builder, name: str, payload, deps: dict):
    """The kernel ``name`` (``payload``: {"source", "deps", "lang": "triton"}) checked and built
    as an interpreted Triton function; ``builder`` is ``kernel_source.Builder`` (its ``kinds``,
    ``held``, ``decode``, ``built`` and ``building``)."""
    if name in builder.built:
        return builder.built[name]
    if name in builder.building:
        raise Refused(f"{' -> '.join(builder.building + [name])}: a kernel may not call itself")
    more = payload.get("deps") or {}
    if not isinstance(more, dict) or len(more) > MAX_DEPS:
        raise Refused(f"{name}: the grader received a malformed kernel (or one using over {MAX_DEPS} names)")
    deps = {**more, **deps}
    checked = check(name, payload.get("source"))
    builder.building.append(name)
    try:
        scope = {n: _resolve(builder, checked, n, called, deps) for n, called in checked.free.items()}
    finally:
        builder.building.pop()
    built = _compile(checked, scope)
    builder.built[name] = built
    return built


def _resolve(builder, checked: Checked, name: str, called: bool, deps: dict):
    where = f"{checked.name} uses `{name}`"
    entry = builder.kinds.get(name)
    if entry is None and name not in builder.held and isinstance(deps.get(name), list) and len(deps[name]) == 2:
        entry = deps[name]
    if entry is not None:
        kind, payload = entry
        if kind == "gpu_kernel" and isinstance(payload, dict) and payload.get("lang") == "triton":
            value = rebuild(builder, name, payload, deps)
        elif kind == "value":
            try:
                value = builder.decode(payload)
            except (ValueError, TypeError, RecursionError):
                raise Refused(f"{where} (malformed data): {RULE}") from None
        else:
            raise Refused(f"{where} ({'a CUDA kernel' if kind == 'gpu_kernel' else 'a function of yours'}), "
                          f"which a Triton kernel may not: {RULE}")
    elif name in builder.held:
        value = builder.held[name]
    else:
        raise Refused(f"{where}, which the grader does not know: {RULE}")
    if called:
        if not _is_triton_fn(value):
            raise Refused(f"{checked.name} calls `{name}`, which a Triton kernel may not: only tl.*, the built-ins "
                          "and other @triton.jit functions may be called")
        return value
    if not _plain(value):
        raise Refused(f"{where} (a {type(value).__name__}), which a Triton kernel may not: {RULE}")
    return value


_BUILT: dict = {}


def _compile(checked: Checked, scope: dict):
    """The checked function compiled in a namespace of its own and wrapped in Triton's
    interpreter (never compiled for a GPU here: bytes are counted in the interpreter)."""
    key = (checked.source, tuple(sorted((n, ("fn", id(v)) if _is_triton_fn(v) else (type(v).__name__, repr(v)))
                                        for n, v in scope.items())))
    if key in _BUILT:
        return _BUILT[key]
    if "triton" not in sys.modules:   # kernels may arrive before the setup cells ran: interpreter mode first
        # (where Triton was loaded to compile for a GPU, triton_traffic.count runs its library in the interpreter)
        os.environ["TRITON_INTERPRET"] = "1"
    import triton.language as tl  # noqa: PLC0415
    from triton.runtime.interpreter import InterpretedFunction  # noqa: PLC0415


    space = {"__builtins__": {n: getattr(builtins, n) for n in BUILTINS}, "__name__": "course_triton_kernel",
             "tl": tl, **scope}
    filename = f"<triton kernel {checked.name} {len(_BUILT)}>"
    linecache.cache[filename] = (len(checked.source), None, checked.source.splitlines(True), filename)
    exec(compile(checked.tree, filename, "exec"), space)  # noqa: S102 - whitelisted above: one plain def
    fn = space[checked.func]
    built = InterpretedFunction(fn)
    built._course_checked = True
    _BUILT[key] = built
    return built
