"""Checks used by the exercise notebooks' test cells.

Each check passes silently except for one line on stdout ("ok: ..."), or raises an
``AssertionError`` whose message says what was expected and what came back. Nothing
is written to stderr: nbgrader gives zero points to a test cell that writes to stderr.
"""
from __future__ import annotations

import math
import numbers


class CheckFailed(AssertionError):
    """A test in an exercise failed; the message teaches what was expected."""


def _describe(value) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    text = repr(value)
    return text if len(text) < 200 else text[:197] + "..."


def _fail(name: str, expected: str, got, hint: str = "") -> None:
    msg = f"{name}: expected {expected}, got {_describe(got)}"
    if got is None:
        msg += " (did the function forget to `return` its result?)"
    if hint:
        msg += f". Hint: {hint}"
    raise CheckFailed(msg)


def _ok(name: str) -> None:
    print(f"ok: {name}")


def check_close(name: str, got, expected: float, rtol: float = 1e-6, atol: float = 0.0,
                hint: str = "") -> None:
    """``got`` is a number within ``rtol`` (relative) or ``atol`` (absolute) of ``expected``."""
    if isinstance(got, bool) or not isinstance(got, numbers.Real) and not hasattr(got, "__float__"):
        _fail(name, f"a number close to {_describe(expected)}", got, hint)
    try:
        value = float(got)
    except (TypeError, ValueError):
        _fail(name, f"a number close to {_describe(expected)}", got, hint)
    if not math.isclose(value, expected, rel_tol=rtol, abs_tol=atol):
        tol = f"within {rtol:.0e} relative" if rtol else f"within {atol:g}"
        _fail(name, f"{_describe(float(expected))} ({tol})", value, hint)
    _ok(name)


def check_equal(name: str, got, expected, hint: str = "") -> None:
    """``got == expected`` (exactly; use :func:`check_close` for floats)."""
    if got != expected:
        _fail(name, _describe(expected), got, hint)
    _ok(name)


def check_in(name: str, got, allowed, hint: str = "") -> None:
    """``got`` is one of ``allowed``."""
    if got not in allowed:
        _fail(name, "one of " + ", ".join(_describe(a) for a in allowed), got, hint)
    _ok(name)


def check_true(name: str, condition: bool, expected: str, got, hint: str = "") -> None:
    """A condition that a plain comparison cannot express; ``expected`` describes it in words."""
    if not condition:
        _fail(name, expected, got, hint)
    _ok(name)


def check_raises(name: str, fn, exception: type[BaseException], hint: str = "") -> None:
    """Calling ``fn()`` raises ``exception``."""
    try:
        result = fn()
    except exception:
        _ok(name)
        return
    except Exception as exc:  # noqa: BLE001 - reported to the student
        _fail(name, f"{exception.__name__} to be raised", f"{type(exc).__name__}: {exc}", hint)
    _fail(name, f"{exception.__name__} to be raised", f"a normal return of {_describe(result)}", hint)
