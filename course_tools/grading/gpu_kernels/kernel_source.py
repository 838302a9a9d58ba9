"""Student Numba CUDA kernels rebuilt inside the trusted checker (lessons 03 and 04).

A ``@cuda.jit`` kernel cannot cross the wall as data (``wire``), and running it in the
student's kernel would let student code patch what counts its memory accesses. So it crosses
as its Python source text; here that text is checked against a whitelist so strict that the
code can reach nothing but its arguments, its own variables and a fixed vocabulary, and is
then compiled in a namespace of its own, with the checker's own ``numba.cuda``. The test cell's
``run``/``count`` (the instructor's setup, run in the checker) then launch it there: results
and access counts are measured in the checker process, which student code cannot reach.

The source is checked by ``kernel_whitelist`` (what a graded kernel may use, and why anything
else is refused). A kernel that loops for ever is stopped by the checker's per-cell deadline
(the grader kills and restarts the checker).

Stdlib only at import (the checker imports it before the instructor's setup has run); Numba
is taken from ``sys.modules`` when a kernel is rebuilt.
"""
from __future__ import annotations

import builtins
import linecache
import math
import sys

if __package__:
    from .checked import Checked, is_cuda_plain
    from .kernel_whitelist import BUILTINS, MAX_DEPS, NUMBA_TYPES, RULE, Refused, check
    from .source_whitelist import Unanswered, unanswered_text
else:  # the checker imports this file as a top-level module, its folder on sys.path
    from checked import Checked, is_cuda_plain
    from kernel_whitelist import BUILTINS, MAX_DEPS, NUMBA_TYPES, RULE, Refused, check
    from source_whitelist import Unanswered, unanswered_text

__all__ = ["Builder", "Refused", "Unanswered", "check", "compile_kernel", "rebuilt", "unanswered_text"]

_REBUILT: dict = {}   # (source, device, scope) -> a kernel or device function built here


def _cuda_module():
    cuda = sys.modules.get("numba.cuda")
    if cuda is None:
        raise Refused("the grader cannot rebuild kernels here: its setup did not load numba.cuda")
    return cuda


class Builder:
    """Rebuilds the kernels of one set of student names (``kinds``: {name: [kind, payload]}
    as ``kernel_helpers._course_names`` sends them) against the checker's namespace ``held``; ``decode``
    reads values sent as data. A name's free names resolve, in this order: a name the student
    provides (its own kind), a name the checker holds (its own value: setup constants win over
    the student's copies), one of the kernel's dependencies sent with it."""

    def __init__(self, kinds: dict, held: dict, decode):
        self.kinds, self.held, self.decode = kinds, held, decode
        self.built: dict[str, object] = {}
        self.building: list[str] = []

    def all(self) -> dict:
        """{name: rebuilt kernel, or Refused} for every name of kind ``gpu_kernel``."""
        out = {}
        for name, (kind, payload) in self.kinds.items():
            if kind == "gpu_kernel":
                try:
                    out[name] = self.kernel(name, payload, {})
                except Refused as exc:
                    out[name] = exc
                except Exception as exc:  # noqa: BLE001 - e.g. a real GPU's compiler: a failed test, not a crash
                    out[name] = Refused(f"{name} could not be compiled by the grader: {type(exc).__name__}: "
                                        f"{str(exc)[:300]}")
        return out

    def kernel(self, name: str, payload, deps: dict):
        if isinstance(payload, dict) and payload.get("lang") == "triton":   # lesson 14's Triton kernels
            if __package__:
                from .triton_source import rebuild
            else:
                from triton_source import rebuild
            return rebuild(self, name, payload, deps)
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
            value = (self.kernel(name, payload, deps) if kind == "gpu_kernel" else
                     self._value(payload, where) if kind == "value" else self._refuse(where, "a function of yours"))
        elif name in self.held:
            value = self.held[name]
        elif name in deps and isinstance(deps[name], list) and len(deps[name]) == 2:
            kind, payload = deps[name]
            value = (self.kernel(name, payload, deps) if kind == "gpu_kernel" else
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
        if rebuilt(value) or not is_cuda_plain(value):
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
