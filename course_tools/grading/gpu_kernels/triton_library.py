"""Refused: a student's Triton kernel that is one of the course library's own ``@triton.jit``
kernels (the lectures' reference kernels in ``course_lib``) under another name, with its names,
numbers or docstrings changed, or with statements added that do nothing (:func:`library_copy`,
which says precisely what it holds): an exercise asks for the student's kernel, not a call of
the lecture's. A copy with one working statement changed is not refused here; it is graded like
any kernel.

Stdlib only.
"""
from __future__ import annotations

import ast

if __package__:
    from .source_whitelist import Refused, chain
    from .triton_whitelist import BUILTINS, VALUE_METHODS
else:  # the checker imports this file as a top-level module, its folder on sys.path
    from source_whitelist import Refused, chain
    from triton_whitelist import BUILTINS, VALUE_METHODS


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
