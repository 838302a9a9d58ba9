"""Running a Triton kernel in Triton's *interpreter* from a process that may also compile for a
GPU (lessons 14 and 15): the kernel as an interpreted function, the language's library callable
while it runs, ``triton.language`` put back afterwards, and the kernel's own exception rather
than the interpreter's wrapper. ``triton_traffic`` counts bytes on top of these.
"""
from __future__ import annotations

from contextlib import contextmanager


def interpreted(kernel):
    """``kernel`` as Triton's interpreter runs it (itself when it is already interpreted)."""
    from triton.runtime.interpreter import InterpretedFunction

    if isinstance(kernel, InterpretedFunction):
        return kernel
    fn = getattr(kernel, "fn", None)
    if not callable(fn):
        raise TypeError(f"{kernel!r} is not a @triton.jit kernel")
    return InterpretedFunction(fn)


@contextmanager
def language_restored():
    """Put ``triton.language`` back as it was after one interpreted launch. Triton's interpreter
    replaces the language's builtins (``tl.program_id``, ``tl.tensor.__mul__``, ``tl.dtype.to_ir``
    ...) with its own while a kernel runs; Triton 3.9 restores them afterwards, earlier versions
    (3.6, which torch 2.11's CUDA wheels bring) leave them patched, and every kernel compiled for
    the GPU later in the same process then fails ("'ir.value' object has no attribute 'dtype'")."""
    import triton.language as tl

    spaces = [tl, tl.core, tl.math, tl.tensor, tl.dtype, getattr(tl.core, "condition", None),
              getattr(tl.core, "tensor_descriptor_base", None)]
    saved = [(space, dict(vars(space))) for space in dict.fromkeys(s for s in spaces if s is not None)]
    try:
        yield
    finally:
        for space, before in saved:
            for name in [n for n in vars(space) if n not in before]:
                delattr(space, name)
            for name, value in before.items():
                if vars(space).get(name, _ABSENT) is not value and name not in ("__dict__", "__weakref__", "__doc__"):
                    setattr(space, name, value)


_ABSENT = object()


@contextmanager
def jit_calls_interpreted():
    """Where Triton was loaded to compile for a GPU, its library functions (``tl.sum``,
    ``tl.max``, ``tl.zeros`` ...) and a kernel's helpers are compiled ``JITFunction`` objects,
    which refuse to be called outside a compiled kernel; for one counted launch, calling one runs
    it in the interpreter instead. Nothing changes where Triton already interprets."""
    from triton.runtime import jit
    from triton.runtime.interpreter import InterpretedFunction

    cls = jit.JITFunction
    original = cls.__dict__.get("__call__")
    cache: dict = {}

    def call(self, *args, **kwargs):
        runner = cache.get(id(self))
        if runner is None:
            runner = cache[id(self)] = InterpretedFunction(self.fn)
        return runner(*args, **kwargs)

    cls.__call__ = call
    try:
        yield
    finally:
        if original is None:
            del cls.__call__
        else:
            cls.__call__ = original


@contextmanager
def language_patched_once():
    """For one interpreted launch, patch ``triton.language`` for the interpreter once per set of
    language modules, not at every call of a ``@triton.jit`` function inside the kernel.

    Triton's interpreter patches the language modules a function sees (``tl``, ``tl.core``) when
    the launch starts, which it undoes when the launch ends, and again at every call of a device
    function (``tl.max``, ``tl.sum``, a kernel's helper), which it never undoes: each of those
    walks the modules with ``inspect.getmembers`` (about 3 ms of CPU) to set what is set already
    (a wrapped builtin is no longer a builtin; the tensor and core attributes get the same
    functions). Here a device call whose language modules this launch has patched runs without
    patching them again: the language the kernel runs against is the same, and an online-softmax
    kernel, which calls ``tl.max`` and ``tl.sum`` per key block, launches in about a quarter less
    CPU. What the calls patched is still put back after the launch (:func:`language_restored`)."""
    import inspect

    import triton.language as tl
    from triton.runtime import interpreter

    original = interpreter._patch_lang
    patched: set = set()

    def once(fn):
        langs = tuple(sorted(id(v) for v in fn.__globals__.values() if inspect.ismodule(v) and v in (tl, tl.core)))
        if langs in patched:
            return interpreter._LangPatchScope()   # nothing set: nothing for the caller to undo
        scope = original(fn)
        patched.add(langs)
        return scope

    interpreter._patch_lang = once
    try:
        yield
    finally:
        interpreter._patch_lang = original


def unwrap(exc: BaseException) -> BaseException:
    """The interpreter wraps a kernel's exception in an InterpreterError; the original is clearer."""
    inner = exc
    while inner.__cause__ is not None and type(inner).__name__ == "InterpreterError":
        inner = inner.__cause__
    return inner
