"""Running Triton kernels with or without a GPU, and counting the bytes they move (lesson 14).

Triton compiles ``@triton.jit`` kernels for NVIDIA and AMD GPUs. Without a usable GPU the same
kernels run in Triton's *interpreter* (``TRITON_INTERPRET=1``): every program of the grid runs
one after another on the CPU, each ``tl.*`` operation on NumPy arrays. :func:`prepare` decides
which, before any kernel is decorated, and says why; :func:`triton_mode` reports it (both
:mod:`.triton_mode`'s, as is :func:`lecture_kernel_source`).

In the interpreter every ``tl.load`` and ``tl.store`` reaches two methods of its builder with the
whole block of addresses and the mask. :func:`count` wraps them for one launch: it counts the
bytes each program loads and stores (only the lanes whose mask is true: a masked-off lane moves
nothing) and refuses any address outside the tensors the kernel was given
(:class:`OutOfBounds`), as a GPU would not. That is the memory-traffic budget of the exercises
(:class:`Traffic`), the same idea as lesson 03's access counts: deterministic, the same on
every machine. Units: bytes; a "program" is one instance of the grid.

No other route reaches memory in a counted launch (:mod:`.triton_handover`): the kernel gets
guarded *copies* of the tensors (the caller's are never handed to it); a tensor may go only to a plain parameter,
which the interpreter turns into a pointer (a parameter annotated ``tl.constexpr``, or with any
annotation or default, would receive the torch tensor itself: :class:`TensorParameter`);
atomics are refused; after the launch every input must equal what the caller passed
(:class:`InputWritten`) and only the outputs are copied back. Every tensor the kernel makes
(``tl.arange``, ``tl.zeros``, a broadcast, a load, a ``tl.dot`` ...) holds at most
``block_limit`` elements (:data:`MAX_BLOCK` unless an exercise bounds its tiles tighter;
:class:`BlockTooLarge`).

Each of these refusals is a :class:`~course_lib.checks.core.CheckFailed` as well, of one line:
what was expected, what the kernel did and, for what happens while it runs, the kernel's line
that did it; a notebook shows it as it shows a failed check (the message, then the student's
lines, no interpreter frames). A kernel that still holds the release's stub (``raise
NotImplementedError()``) is refused before it runs (``checks.unanswered.NotAnswered``).

Triton publishes Linux wheels only (x86-64 and aarch64): on macOS and Windows ``import triton``
fails, :func:`triton_mode` says so, and the lesson shows its kernels without running them.
"""
from __future__ import annotations

import dataclasses
import inspect
import linecache
import math
import sys
from contextlib import contextmanager
from pathlib import Path

from .checks.core import CheckFailed
from .checks.unanswered import refuse_unanswered
from .triton_handover import (  # noqa: F401 - InputWritten, TensorParameter, GUARD_BYTES: part of this API
    GUARD_BYTES,
    InputWritten,
    TensorParameter,
    arg_names,
    copy_with_strides,
    guarded,
    hand_back,
    refuse_tensor_constants,
    writable_names,
)
from .triton_interpreter import interpreted, jit_calls_interpreted, language_patched_once, language_restored, unwrap
from .triton_mode import lecture_kernel_source, prepare, triton_mode  # noqa: F401 - part of this API

MAX_PROGRAMS = 4096          # programs one counted launch may have (the interpreter runs them one by one)
MAX_BLOCK = 1 << 16          # elements one tensor of a kernel (a block, a tile) may have in a counted launch

class OutOfBounds(CheckFailed, IndexError):
    """A load or store whose address lies outside every tensor the kernel was given."""


class BlockTooLarge(CheckFailed, ValueError):
    """A tensor made by the kernel with more elements than the launch's ``block_limit``."""


class Uncounted(CheckFailed, RuntimeError):
    """An operation that reaches memory a counted launch cannot count (an atomic)."""


_NOT_THE_KERNEL = (str(Path(__file__).parent), str(Path(inspect.__file__).parent))   # course_lib, Python's library


def kernel_line() -> str:
    """Where the running kernel is, for a message: "add_kernel, line 5: `x = tl.load(x_ptr + offs)`"
    (the innermost frame that is neither Triton's, NumPy's, the course library's nor Python's,
    i.e. the student's kernel or a helper it calls; lines of its cell or its source), "" if none."""
    frame = sys._getframe(1)
    while frame is not None:
        name = frame.f_code.co_filename
        if not (name.startswith(_NOT_THE_KERNEL) or "site-packages" in name or "dist-packages" in name):
            text = linecache.getline(name, frame.f_lineno).strip()
            return f"{frame.f_code.co_name}, line {frame.f_lineno}" + (f": `{text[:120]}`" if text else "")
        frame = frame.f_back
    return ""


def _at(before: str = "") -> str:
    """``before`` + " at " + :func:`kernel_line` for a message; "" when the line cannot be found."""
    where = kernel_line()
    return f"{before} at {where}" if where else ""


@dataclasses.dataclass
class Traffic:
    """The bytes one launch moved, counted in the interpreter with masks honoured.

    ``loaded``/``stored``: {argument name: bytes} for each tensor argument;
    ``per_program``: {(x, y, z) program id: [bytes loaded, bytes stored]}."""
    loaded: dict
    stored: dict
    per_program: dict
    programs: int

    @property
    def bytes_loaded(self) -> int:
        """Bytes read from all tensors by all programs."""
        return sum(self.loaded.values())

    @property
    def bytes_stored(self) -> int:
        """Bytes written to all tensors by all programs."""
        return sum(self.stored.values())

    def max_per_program(self, what: str = "loaded") -> int:
        """The most bytes one program loaded (``what="loaded"``) or stored (``"stored"``)."""
        i = {"loaded": 0, "stored": 1}[what]
        return max((v[i] for v in self.per_program.values()), default=0)

    def summary(self) -> str:
        """One line: bytes loaded and stored in all, and per tensor."""
        parts = ", ".join(f"{n}: {self.loaded.get(n, 0)} B read / {self.stored.get(n, 0)} B written"
                          for n in sorted(set(self.loaded) | set(self.stored)))
        return (f"{self.programs} programs, {self.bytes_loaded} B loaded, {self.bytes_stored} B stored ({parts})")


def _regions(names, values):
    """[(first byte address, end address, name, element bytes)] of the tensor arguments."""
    out = []
    for name, value in zip(names, values):
        if hasattr(value, "data_ptr") and hasattr(value, "element_size"):
            size = value.element_size()
            span = 1 + sum((n - 1) * s for n, s in zip(value.shape, value.stride())) if value.numel() else 0
            out.append((value.data_ptr(), value.data_ptr() + span * size, name, size))
    return out


def _where(addr: int, regions) -> str:
    """Where a 64-bit address lies relative to the nearest tensor, for a message: an element
    index, negative before the tensor (a pointer that went below 0 and wrapped to near 2**64
    counts as before it, as the signed offset a GPU would compute)."""
    def offset(region) -> int:   # bytes from the region's start, as a signed 64-bit number
        return (addr - region[0] + 2**63) % 2**64 - 2**63

    base, end, name, size = min(regions, key=lambda r: min(abs(offset(r)), abs(offset(r) - (r[1] - r[0]))))
    index = offset((base, end)) // size
    count = (end - base) // size
    return f"element {index} of `{name}`, which has {count}"


def _inside(addrs, size: int, base: int, end: int):
    """Which of ``addrs`` (uint64 byte addresses) start an element of ``size`` bytes that lies
    wholly in ``[base, end)``: compared without arithmetic on the addresses, so an address near
    2**64 cannot wrap around into a tensor (``addrs + size`` would)."""
    import numpy as np

    last = end - size                # the last address an element fits at (Python int, exact)
    if last < base:
        return np.zeros(addrs.size, dtype=bool)
    return (addrs >= np.uint64(base)) & (addrs <= np.uint64(last))


class _Counter:
    def __init__(self, regions, writable=None):
        import numpy as np

        self.np = np
        self.regions = regions
        self.writable = writable      # names of the tensors stores may reach; None: any
        self.loaded = {r[2]: 0 for r in regions}
        self.stored = {r[2]: 0 for r in regions}
        self.per_program: dict = {}

    def account(self, op: str, ptrs, mask, program) -> None:
        np = self.np
        addrs = np.asarray(ptrs.data).astype(np.uint64).ravel()
        active = np.broadcast_to(np.asarray(mask.data, dtype=bool), np.shape(ptrs.data)).ravel()
        addrs = addrs[active]
        if addrs.size == 0:
            return
        size = max(1, ptrs.get_element_ty().primitive_bitwidth // 8)
        hit = np.zeros(addrs.size, dtype=bool)
        for base, end, name, _ in self.regions:
            inside = _inside(addrs, size, base, end)
            nbytes = int(inside.sum()) * size
            if op == "store" and nbytes and self.writable is not None and name not in self.writable:
                allowed = ", ".join(f"`{n}`" for n in sorted(self.writable)) or "no tensor"
                raise InputWritten(f"program {program}: a tl.store into `{name}`, an input: expected stores only "
                                   f"into {allowed}, got {nbytes // size} element(s) stored into `{name}`{_at()} "
                                   "(inputs must come back unchanged)")
            (self.loaded if op == "load" else self.stored)[name] += nbytes
            row = self.per_program.setdefault(program, [0, 0])
            row[0 if op == "load" else 1] += nbytes
            hit |= inside
        if not hit.all():
            bad = int(addrs[~hit][0])
            where = _where(bad, self.regions) if self.regions else "no tensor at all"
            raise OutOfBounds(f"program {program}: a tl.{op}{_at()}: expected every lane inside a tensor, got "
                              f"{int((~hit).sum())} element(s) outside the tensors it was given (the first at "
                              f"address {bad:#x}, {where}); mask the lanes past the end")


_MADE_BY = {"create_make_range": "tl.arange", "create_splat": "tl.full/tl.zeros (or a number spread over a block)",
            "create_broadcast": "broadcasting", "create_reshape": "tl.reshape", "create_dot": "tl.dot",
            "create_masked_load": "tl.load", "create_join": "tl.join", "create_cat": "tl.cat"}
_UNCOUNTED = {"create_atomic_cas": "tl.atomic_cas", "create_atomic_rmw": "tl.atomic_*"}   # memory the counter misses


def _planned_elements(op: str, args) -> int | None:
    """Elements of the tensor the builder's ``op`` is about to allocate, where that is known
    before it is made (``tl.arange``, ``tl.full``/``tl.zeros``, ``tl.dot``); else None."""
    if op == "create_make_range":
        return int(args[2]) - int(args[1])
    if op == "create_splat":
        return math.prod(int(n) for n in args[0].shape)
    if op == "create_dot":
        a, b = args[0].data.shape, args[1].data.shape
        return math.prod(a[:-1]) * (b[-1] if b else 1)
    return None


def _bounded(builder, op: str, method, limit: int):
    """The builder's ``op`` (``method``) refusing to make a tensor of over ``limit`` elements."""
    def too_large(elements: int, shape) -> BlockTooLarge:
        made = _MADE_BY.get(op, op.removeprefix("create_"))
        return BlockTooLarge(f"program {tuple(builder.grid_idx)}: {made} makes a tensor of {elements} elements"
                             + (f" (shape {tuple(shape)})" if shape is not None else "")
                             + f"; a graded block has at most {limit} elements in this launch (a tile of the "
                               f"exercise's block sizes, as its spec says){_at(';')}")

    def call(*args, **kwargs):
        planned = _planned_elements(op, args)
        if planned is not None and planned > limit:
            raise too_large(planned, None)
        out = method(*args, **kwargs)
        data = getattr(out, "data", None)
        if getattr(data, "size", 0) > limit:
            raise too_large(data.size, data.shape)
        return out
    return call


def _refused(builder, op: str):
    def call(*args, **kwargs):
        raise Uncounted(f"program {tuple(builder.grid_idx)}: {_UNCOUNTED[op]} reaches memory that a graded "
                        f"launch cannot count: use tl.load and tl.store{_at(';')}")
    return call


@contextmanager
def _counting(counter: _Counter, limit: int = MAX_BLOCK):
    """For one launch, wrap every ``create_*`` method of the interpreter's builder: loads and
    stores counted (``counter``), atomics refused, every tensor made bounded by ``limit``
    elements."""
    from triton.runtime import interpreter as ti

    builder = ti.interpreter_builder
    ops = [n for n in dir(type(builder)) if n.startswith("create_")]
    saved = {k: builder.__dict__[k] for k in ops if k in builder.__dict__}
    for op in ops:
        method = _refused(builder, op) if op in _UNCOUNTED else _bounded(builder, op, getattr(builder, op), limit)
        setattr(builder, op, method)
    load, store = builder.create_masked_load, builder.create_masked_store

    def counted_load(ptrs, mask, *rest, **kwargs):
        counter.account("load", ptrs, mask, tuple(builder.grid_idx))
        return load(ptrs, mask, *rest, **kwargs)

    def counted_store(ptrs, value, mask, *rest, **kwargs):
        counter.account("store", ptrs, mask, tuple(builder.grid_idx))
        return store(ptrs, value, mask, *rest, **kwargs)

    builder.create_masked_load, builder.create_masked_store = counted_load, counted_store
    try:
        with language_restored(), jit_calls_interpreted(), language_patched_once():
            yield
    finally:
        for k in ops:
            builder.__dict__.pop(k, None)
        builder.__dict__.update(saved)


def _grid(grid) -> tuple:
    grid = (grid,) if isinstance(grid, int) else tuple(grid)
    if not 1 <= len(grid) <= 3 or any(type(g) is not int or g < 0 for g in grid):
        raise ValueError(f"a grid is 1 to 3 non-negative integers, got {grid!r}")
    return grid


def count(kernel, grid, *args, outputs=None, block_limit=None, **meta) -> Traffic:
    """Run ``kernel[grid](*args, **meta)`` in the interpreter on CPU tensors, bounds-checked,
    and return the :class:`Traffic` it caused (bytes per tensor and per program).

    The kernel runs on guarded copies of the tensors. ``outputs``: the positions of the
    arguments the kernel may store into (e.g. ``(2,)`` for ``add(x, y, out, ...)``); a store into
    any other tensor raises :class:`InputWritten` before it happens, every other tensor is
    compared with the caller's after the launch, and only the outputs are copied back. ``None``
    (the default) allows stores anywhere and copies every tensor back. ``block_limit``: the
    most elements one tensor the kernel makes may have (:data:`MAX_BLOCK` at most, the default;
    :class:`BlockTooLarge`). A tensor given to a parameter with an annotation or a default
    raises :class:`TensorParameter`."""
    grid = _grid(grid)
    programs = math.prod(grid)
    if programs > MAX_PROGRAMS:
        raise ValueError(f"a grid of {programs} programs; a counted launch may have {MAX_PROGRAMS}")
    names = arg_names(kernel)
    refuse_unanswered(kernel)
    refuse_tensor_constants(kernel, args, meta)
    for name, value in zip(names, args):
        if hasattr(value, "device") and getattr(value.device, "type", "cpu") != "cpu":
            raise ValueError(f"count() runs in the interpreter: pass CPU tensors (`{name}` is on {value.device})")
    copies = [guarded(a) for a in args]
    counter = _Counter(_regions(names, copies), writable_names(names, outputs))
    runner = interpreted(kernel)
    with _counting(counter, min(MAX_BLOCK, block_limit or MAX_BLOCK)):
        try:
            runner[grid](*copies, **meta)
        except Exception as exc:  # noqa: BLE001 - the kernel's own error, not the interpreter's wrapper
            inner = unwrap(exc)
            if inner is exc:
                raise
            raise inner from None
    hand_back(names, args, copies, outputs)
    return Traffic({k: v for k, v in counter.loaded.items()}, {k: v for k, v in counter.stored.items()},
                   counter.per_program, programs)


def launch(kernel, grid, *args, outputs=None, block_limit=None, **meta) -> None:
    """Run ``kernel[grid](*args, **meta)`` where this machine runs Triton: compiled on a GPU
    (tensors are copied there, strides kept, and the outputs copied back), else in the interpreter,
    bounds-checked as :func:`count` does (``block_limit`` applies there only: a compiled
    kernel's tensors cannot be watched). Outputs are changed in place, as by a launch.

    ``outputs``: positions of the arguments the kernel may write (see :func:`count`); on a GPU,
    where stores cannot be intercepted, the other tensors are compared with copies taken before
    the launch and :class:`InputWritten` is raised if one changed."""
    mode, why = prepare()
    if mode == "unavailable":
        raise RuntimeError(why)
    import torch

    refuse_unanswered(kernel)   # compiled, the stub's raise is a compile error; interpreted, a traceback
    refuse_tensor_constants(kernel, args, meta)
    if mode == "interpreter" or type(kernel).__name__ == "InterpretedFunction":   # always bounds-checked
        cpu = [copy_with_strides(a, "cpu") if isinstance(a, torch.Tensor) and a.device.type != "cpu" else a
               for a in args]
        count(kernel, grid, *cpu, outputs=outputs, block_limit=block_limit, **meta)
        hand_back(arg_names(kernel), args, cpu, outputs)
        return
    moved = [copy_with_strides(a, "cuda") for a in args]   # copies (never the caller's own), strides kept
    kernel[_grid(grid)](*moved, **meta)
    torch.cuda.synchronize()
    hand_back(arg_names(kernel), args, moved, outputs)


