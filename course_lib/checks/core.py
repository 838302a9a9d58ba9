"""Checks used by the test cells of every lesson's exercises (00-13).

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
    __tracebackhide__ = True  # IPython and pytest show the caller's line, not this one
    msg = f"{name}: expected {expected}, got {_describe(got)}"
    if got is None:
        msg += " (did the function forget to `return` its result?)"
    if hint:
        msg += f". Hint: {hint}"
    raise CheckFailed(msg)


def _ok(name: str) -> None:
    __tracebackhide__ = True  # IPython and pytest show the caller's line, not this one
    print(f"ok: {name}")


def check_close(name: str, got, expected: float, rtol: float = 1e-6, atol: float = 0.0,
                hint: str = "") -> None:
    """``got`` is a number within ``rtol`` (relative) or ``atol`` (absolute) of ``expected``."""
    __tracebackhide__ = True  # IPython and pytest show the caller's line, not this one
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
    __tracebackhide__ = True  # IPython and pytest show the caller's line, not this one
    if got != expected:
        _fail(name, _describe(expected), got, hint)
    _ok(name)


def check_in(name: str, got, allowed, hint: str = "") -> None:
    """``got`` is one of ``allowed``."""
    __tracebackhide__ = True  # IPython and pytest show the caller's line, not this one
    if got not in allowed:
        _fail(name, "one of " + ", ".join(_describe(a) for a in allowed), got, hint)
    _ok(name)


def check_true(name: str, condition: bool, expected: str, got, hint: str = "") -> None:
    """A condition that a plain comparison cannot express; ``expected`` describes it in words."""
    __tracebackhide__ = True  # IPython and pytest show the caller's line, not this one
    if not condition:
        _fail(name, expected, got, hint)
    _ok(name)


def check_raises(name: str, fn, exception: type[BaseException], hint: str = "") -> None:
    """Calling ``fn()`` raises ``exception``."""
    __tracebackhide__ = True  # IPython and pytest show the caller's line, not this one
    try:
        result = fn()
    except exception:
        _ok(name)
        return
    except Exception as exc:  # noqa: BLE001 - reported to the student
        _fail(name, f"{exception.__name__} to be raised", f"{type(exc).__name__}: {exc}", hint)
    _fail(name, f"{exception.__name__} to be raised", f"a normal return of {_describe(result)}", hint)


def check_array_close(name: str, got, expected, rtol: float = 1e-6, atol: float = 0.0,
                      hint: str = "") -> None:
    """``got`` has ``expected``'s shape and every element is within ``atol + rtol * |expected|``
    of it (as ``numpy.isclose``; NaN never matches). On failure the message names the first
    mismatching indices with both values there, how many elements differ, and the first
    expected values, so a student sees *where* the answer goes wrong, not only that it does."""
    __tracebackhide__ = True  # IPython and pytest show the caller's line, not this one
    import numpy as np

    def show(values, count: int = 6) -> str:
        flat = np.asarray(values).ravel()
        head = ", ".join(f"{v:.6g}" if isinstance(v, (float, np.floating)) else repr(v.item()
                         if hasattr(v, "item") else v) for v in flat[:count])
        return "[" + head + (", ...]" if flat.size > count else "]")

    if got is None:
        _fail(name, f"an array of shape {np.shape(expected)}", got, hint)
    exp = np.asarray(expected)
    if hasattr(got, "__cuda_array_interface__") and hasattr(got, "get"):
        got = got.get()                                  # a CuPy array: compare on the host
    try:
        arr = np.asarray(got, dtype=np.float64 if exp.dtype.kind == "f" else None)
    except (TypeError, ValueError):
        _fail(name, f"an array of shape {exp.shape}", got, hint)
    if arr.shape != exp.shape:
        msg = (f"{name}: expected an array of shape {exp.shape} starting {show(exp)}, "
               f"got shape {arr.shape} starting {show(arr)}")
        raise CheckFailed(msg + (f". Hint: {hint}" if hint else ""))
    if arr.dtype.kind not in "biufc" or exp.dtype.kind not in "biufc":
        bad = arr != exp
    else:
        def numeric(a):
            return a.astype(np.float64) if a.dtype.kind in "biu" else a

        bad = ~np.isclose(numeric(arr), numeric(exp), rtol=rtol, atol=atol)
    if bad.any():
        where = np.argwhere(bad)
        lines = []
        for idx in where[:4]:
            key = tuple(int(i) for i in idx)
            label = ", ".join(str(i) for i in key)
            lines.append(f"[{label}] expected {exp[key]:.6g} got {arr[key]:.6g}"
                         if exp.dtype.kind in "biufc" and arr.dtype.kind in "biufc"
                         else f"[{label}] expected {exp[key].item()!r} got {arr[key].item()!r}")
        tol = f"rtol={rtol:g}, atol={atol:g}"
        msg = (f"{name}: {int(bad.sum())} of {bad.size} elements differ ({tol}); first at "
               + "; ".join(lines) + f". Expected values start {show(exp)}")
        if hint:
            msg += f". Hint: {hint}"
        raise CheckFailed(msg)
    _ok(name)
