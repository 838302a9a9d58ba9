"""An exercise not answered yet: a function or kernel that still holds the release's stub.

A blank release's solution cell holds nbgrader's code stub where the answer goes: ``# YOUR CODE
HERE`` and a line raising ``NotImplementedError()``. A test that reaches it says so in one line,
``NotAnswered: NAME is not answered yet ...``, followed by the test's line:

- in the student's notebook, a plain function's stub is shown that way by
  :mod:`.failure_display`, and the kernel launches of lessons 03, 04, 14 and 15 and the
  multi-process checks of lessons 10, 11 and 13 (:func:`refuse_unanswered`) refuse a kernel or
  function whose source still raises it before running it (the SIMT engine, Numba's simulator,
  a GPU, Triton's interpreter and a worker process would each fail their own way, some of them
  silently: a GPU ignores a kernel's ``raise``);
- in the grader's feedback, the trusted checker says the same of the student's function (its
  kernel names the stub that raised) and kernel (the kernel whitelist finds the stub).
"""
from __future__ import annotations

import ast
import inspect
import textwrap

from .core import CheckFailed

STUB_ERROR = "NotImplementedError"   # what nbgrader's code stub raises
STUB = f"raise {STUB_ERROR}"


class NotAnswered(CheckFailed):
    """A test reached an exercise that still holds the release's stub."""


def message(name: str) -> str:
    """The one line said of an unanswered function or kernel ``name``."""
    what = "this cell" if name in ("", "<module>") else name
    return f"{what} is not answered yet: write it where it says # YOUR CODE HERE, then run that cell again"


def is_stub_line(line: str) -> bool:
    """A source line that raises the stub's error (the release's own line or one like it)."""
    text = line.strip()
    return text == STUB or text.startswith(STUB + "(")


def _raises_stub(node: ast.AST) -> bool:
    if not isinstance(node, ast.Raise):
        return False
    exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
    return isinstance(exc, ast.Name) and exc.id == STUB_ERROR


def python_function(fn):
    """The Python function behind a Numba kernel (``py_func``), a Triton kernel (``fn``), or ``fn`` itself."""
    return getattr(fn, "py_func", None) or getattr(fn, "fn", None) or fn


def _source(fn) -> str | None:
    """``fn``'s source: the text the grader's stand-in for a student's function carries
    (``__course_source__``), else what :mod:`inspect` finds; None when neither can be read."""
    carried = getattr(fn, "__course_source__", None)
    if isinstance(carried, str):
        return carried
    try:
        return inspect.getsource(python_function(fn))
    except (OSError, TypeError):
        if inspect.isclass(fn):   # a class defined in a notebook cell (lessons 10, 13)
            from ..parallel.launch import class_source
            return class_source(fn)
        return None


def holds_stub(fn) -> bool:
    """Whether the body of ``fn`` (a function, a Numba or Triton kernel, the grader's stand-in for
    the student's function; for a class, the body of one of its methods) has a statement raising
    ``NotImplementedError`` of its own, outside any ``if`` or loop (the release's stub, or one
    left in: it always raises); False when its source cannot be read."""
    try:
        tree = ast.parse(textwrap.dedent(_source(fn) or ""))
    except (SyntaxError, ValueError):
        return False
    defs = [node for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    if len(defs) != 1:
        return False
    if isinstance(defs[0], ast.ClassDef):   # a class (lessons 10, 13): a method of it holds the stub
        return any(isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef))
                   and any(_raises_stub(statement) for statement in method.body) for method in defs[0].body)
    return any(_raises_stub(statement) for statement in defs[0].body)


def refuse_unanswered(kernel) -> None:
    """Raise :class:`NotAnswered` when ``kernel`` (or a student's function that a check runs
    elsewhere, e.g. in worker processes) still holds the release's stub."""
    __tracebackhide__ = True  # IPython and pytest show the caller's line, not this one
    if holds_stub(kernel):
        raise NotAnswered(message(getattr(python_function(kernel), "__name__", "the kernel")))
