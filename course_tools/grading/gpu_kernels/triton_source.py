"""Student Triton kernels rebuilt inside the trusted checker (lesson 14).

A ``@triton.jit`` kernel crosses the wall as its Python source, as lessons 03/04's Numba
kernels do (``kernel_helpers``' ``_course_jit`` marks it ``"lang": "triton"``;
``kernel_source.Builder`` hands it here). Its source must pass ``triton_whitelist``; the checker
then applies Triton's *interpreter* itself (``InterpretedFunction``, whatever
``TRITON_INTERPRET`` says), in a namespace of its own with the checker's ``triton.language``:
the test cell's ``run``/``count`` (``course_lib.triton_traffic``) launch it there, counting
bytes and refusing addresses outside the kernel's tensors, where student code cannot reach.

Stdlib only at import; ``triton`` is imported when a kernel is rebuilt.
"""
from __future__ import annotations

import builtins
import linecache
import os
import sys

if __package__:
    from .checked import Checked, is_number
    from .source_whitelist import Refused, one_function
    from .triton_library import library_copy
    from .triton_whitelist import BUILTINS, MAX_DEPS, MAX_NODES, MAX_SOURCE, RULE, decorators, whitelisted
else:  # the checker imports this file as a top-level module, its folder on sys.path
    from checked import Checked, is_number
    from source_whitelist import Refused, one_function
    from triton_library import library_copy
    from triton_whitelist import BUILTINS, MAX_DEPS, MAX_NODES, MAX_SOURCE, RULE, decorators, whitelisted

__all__ = ["Refused", "check", "rebuild"]


def check(name: str, source) -> Checked:
    """Check one Triton kernel's (or helper's) source as the student's kernel sent it: one plain
    ``def``, a bare ``@triton.jit``, not the course library's own kernel, then the whitelist."""
    tree, fn = one_function(name, source, "Triton", MAX_SOURCE, MAX_NODES)
    decorators(name, fn)
    library_copy(name, fn)
    return whitelisted(name, source, tree, fn)


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
    if not is_number(value):
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
