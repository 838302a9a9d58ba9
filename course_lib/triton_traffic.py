"""Running Triton kernels with or without a GPU, and counting the bytes they move (lesson 14).

Triton compiles ``@triton.jit`` kernels for NVIDIA and AMD GPUs. Without a usable GPU the same
kernels run in Triton's *interpreter* (``TRITON_INTERPRET=1``): every program of the grid runs
one after another on the CPU, each ``tl.*`` operation on NumPy arrays. :func:`prepare` decides
which, before any kernel is decorated, and says why; :func:`triton_mode` reports it.

In the interpreter every ``tl.load`` and ``tl.store`` reaches two methods of its builder with the
whole block of addresses and the mask. :func:`launch` wraps them for one launch: it counts the
bytes each program loads and stores (only the lanes whose mask is true: a masked-off lane moves
nothing) and refuses any address outside the tensors the kernel was given
(:class:`OutOfBounds`), as a GPU would not. That is the memory-traffic budget of the exercises
(:class:`Traffic`), the same idea as lesson 03's access counts: deterministic, the same on
every machine. Units: bytes; a "program" is one instance of the grid.

Triton publishes Linux wheels only (x86-64 and aarch64): on macOS and Windows ``import triton``
fails, :func:`triton_mode` says so, and the lesson shows its kernels without running them.
"""
from __future__ import annotations

import dataclasses
import importlib.util
import inspect
import os
import platform
from contextlib import contextmanager

from .triton_interpreter import interpreted, jit_calls_interpreted, language_restored, unwrap

MAX_PROGRAMS = 4096          # programs one counted launch may have (the interpreter runs them one by one)
MAX_BLOCK = 1 << 16          # elements one tl.arange may have in a counted launch
GUARD_BYTES = 4096           # unused bytes on either side of each tensor in a counted launch

_MODE: tuple[str, str] | None = None


def _gpu_reason() -> str | None:
    """None when torch sees a GPU Triton can compile for; else why not (one line)."""
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    acc = torch.accelerator.current_accelerator(check_available=True)
    if acc is None:
        return "torch sees no GPU (torch.accelerator found none)"
    if acc.type != "cuda":
        return f"torch's accelerator is {acc.type}, which this lesson's Triton does not compile for"
    return None


def prepare() -> tuple[str, str]:
    """Choose how Triton kernels run here, once, before any is decorated: ("gpu", why),
    ("interpreter", why) or ("unavailable", why). Sets ``TRITON_INTERPRET=1`` when there is
    Triton but no usable GPU (or keeps it when the user set it)."""
    global _MODE
    if _MODE is not None:
        return _MODE
    try:
        spec = importlib.util.find_spec("triton")
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        system = platform.system()
        why = (f"Triton publishes no wheels for {system}: its kernels are shown here but cannot run"
               if system in ("Darwin", "Windows") else "triton is not installed (scripts/setup.sh installs it)")
        _MODE = ("unavailable", why)
    elif os.environ.get("TRITON_INTERPRET") == "1":
        _MODE = ("interpreter", "TRITON_INTERPRET=1 was set before the lesson started")
    else:
        reason = _gpu_reason()
        if reason is None:
            _MODE = ("gpu", "kernels are compiled for this GPU")
        else:
            os.environ["TRITON_INTERPRET"] = "1"
            _MODE = ("interpreter", f"{reason}: kernels run in Triton's interpreter on the CPU (TRITON_INTERPRET=1)")
    return _MODE


def triton_mode() -> str:
    """'gpu', 'interpreter' or 'unavailable' (see :func:`prepare`)."""
    return prepare()[0]


def triton_reason() -> str:
    """Why :func:`triton_mode` is what it is, in one line."""
    return prepare()[1]


class OutOfBounds(IndexError):
    """A load or store whose address lies outside every tensor the kernel was given."""


class InputWritten(RuntimeError):
    """A store into a tensor the launch names as an input (not one of its ``outputs``)."""


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
                                   f"into {allowed}, got {nbytes // size} element(s) stored into `{name}` "
                                   "(inputs must come back unchanged)")
            (self.loaded if op == "load" else self.stored)[name] += nbytes
            row = self.per_program.setdefault(program, [0, 0])
            row[0 if op == "load" else 1] += nbytes
            hit |= inside
        if not hit.all():
            bad = int(addrs[~hit][0])
            where = _where(bad, self.regions) if self.regions else "no tensor at all"
            raise OutOfBounds(f"program {program}: a tl.{op} of {int((~hit).sum())} element(s) outside the tensors "
                              f"it was given (the first at address {bad:#x}, {where}); mask the lanes past the end")


@contextmanager
def _counting(counter: _Counter):
    """Wrap the interpreter builder's load, store and arange for one launch."""
    from triton.runtime import interpreter as ti

    builder = ti.interpreter_builder
    saved = {k: builder.__dict__[k] for k in ("create_masked_load", "create_masked_store", "create_make_range")
             if k in builder.__dict__}
    load, store, make_range = builder.create_masked_load, builder.create_masked_store, builder.create_make_range

    def counted_load(ptrs, mask, other, *rest):
        counter.account("load", ptrs, mask, tuple(builder.grid_idx))
        return load(ptrs, mask, other, *rest)

    def counted_store(ptrs, value, mask, *rest):
        counter.account("store", ptrs, mask, tuple(builder.grid_idx))
        return store(ptrs, value, mask, *rest)

    def bounded_range(ret_ty, start, stop):
        if stop - start > MAX_BLOCK:
            raise ValueError(f"tl.arange({start}, {stop}) has {stop - start} elements; a graded block has at most "
                             f"{MAX_BLOCK}")
        return make_range(ret_ty, start, stop)

    builder.create_masked_load, builder.create_masked_store = counted_load, counted_store
    builder.create_make_range = bounded_range
    try:
        with language_restored(), jit_calls_interpreted():
            yield
    finally:
        for k in ("create_masked_load", "create_masked_store", "create_make_range"):
            builder.__dict__.pop(k, None)
        builder.__dict__.update(saved)


def _guarded(value):
    """A copy of a contiguous tensor with :data:`GUARD_BYTES` of unused memory on either side,
    so that an access just past its end (or before its start) lands outside every argument
    rather than in a neighbouring tensor; other values unchanged."""
    if not (hasattr(value, "is_contiguous") and hasattr(value, "element_size")) or not value.is_contiguous():
        return value
    import torch

    pad = -(-GUARD_BYTES // value.element_size())
    buf = torch.empty(value.numel() + 2 * pad, dtype=value.dtype, device=value.device)
    view = buf[pad:pad + value.numel()].view(value.shape)
    view.copy_(value)
    return view


def _grid(grid) -> tuple:
    grid = (grid,) if isinstance(grid, int) else tuple(grid)
    if not 1 <= len(grid) <= 3 or any(type(g) is not int or g < 0 for g in grid):
        raise ValueError(f"a grid is 1 to 3 non-negative integers, got {grid!r}")
    return grid


def _arg_names(kernel) -> list[str]:
    fn = getattr(kernel, "fn", kernel)
    return list(inspect.signature(fn).parameters)


def _writable(names: list[str], outputs) -> set[str] | None:
    """The parameter names at positions ``outputs`` (None: every tensor may be stored into)."""
    if outputs is None:
        return None
    return {names[i] for i in outputs if 0 <= i < len(names)}


def count(kernel, grid, *args, outputs=None, **meta) -> Traffic:
    """Run ``kernel[grid](*args, **meta)`` in the interpreter on CPU tensors, bounds-checked,
    and return the :class:`Traffic` it caused (bytes per tensor and per program).

    ``outputs``: the positions of the arguments the kernel may store into (e.g. ``(2,)`` for
    ``add(x, y, out, ...)``); a store into any other tensor raises :class:`InputWritten` before
    it happens, so inputs come back unchanged. ``None`` (the default) allows stores anywhere."""
    grid = _grid(grid)
    programs = 1
    for g in grid:
        programs *= g
    if programs > MAX_PROGRAMS:
        raise ValueError(f"a grid of {programs} programs; a counted launch may have {MAX_PROGRAMS}")
    names = _arg_names(kernel)
    for name, value in zip(names, args):
        if hasattr(value, "device") and getattr(value.device, "type", "cpu") != "cpu":
            raise ValueError(f"count() runs in the interpreter: pass CPU tensors (`{name}` is on {value.device})")
    guarded = [_guarded(a) for a in args]
    counter = _Counter(_regions(names, guarded), _writable(names, outputs))
    runner = interpreted(kernel)
    with _counting(counter):
        try:
            runner[grid](*guarded, **meta)
        except Exception as exc:  # noqa: BLE001 - the kernel's own error, not the interpreter's wrapper
            inner = unwrap(exc)
            if inner is exc:
                raise
            raise inner from None
    for a, g in zip(args, guarded):
        if g is not a:
            a.copy_(g)
    return Traffic({k: v for k, v in counter.loaded.items()}, {k: v for k, v in counter.stored.items()},
                   counter.per_program, programs)


def launch(kernel, grid, *args, outputs=None, **meta) -> None:
    """Run ``kernel[grid](*args, **meta)`` where this machine runs Triton: compiled on a GPU
    (CPU tensors are copied there and the results copied back), else in the interpreter,
    bounds-checked as :func:`count` does. Tensors are changed in place, as by a launch.

    ``outputs``: positions of the arguments the kernel may write (see :func:`count`); on a GPU,
    where stores cannot be intercepted, the other tensors are compared with copies taken before
    the launch and :class:`InputWritten` is raised if one changed."""
    mode, why = prepare()
    if mode == "unavailable":
        raise RuntimeError(why)
    import torch

    if mode == "interpreter" or type(kernel).__name__ == "InterpretedFunction":   # always bounds-checked
        cpu = [a.cpu() if isinstance(a, torch.Tensor) else a for a in args]
        count(kernel, grid, *cpu, outputs=outputs, **meta)
        for a, c in zip(args, cpu):
            if isinstance(a, torch.Tensor) and c is not a:
                a.copy_(c)
        return

    moved = [a.to("cuda") if isinstance(a, torch.Tensor) else a for a in args]
    inputs = {i: m.clone() for i, m in enumerate(moved)
              if isinstance(m, torch.Tensor) and outputs is not None and i not in outputs}
    kernel[_grid(grid)](*moved, **meta)
    torch.cuda.synchronize()
    names = _arg_names(kernel)
    for i, before in inputs.items():
        changed = int((moved[i] != before).sum().item() - (moved[i].isnan() & before.isnan()).sum().item())
        if changed:
            raise InputWritten(f"the kernel changed its input `{names[i] if i < len(names) else i}`: expected it "
                               f"unchanged, got {changed} of {before.numel()} element(s) changed")
    for a, m in zip(args, moved):
        if isinstance(a, torch.Tensor) and m is not a:
            a.copy_(m.cpu())


def lecture_kernel_source(name: str, module: str = "triton_kernels") -> str:
    """The source of one function (decorator included) of ``course_lib.<module>`` (lesson 14's
    ``triton_kernels``, lesson 15's ``attention_kernels``) read from its file, without importing
    Triton: what the lessons show where Triton cannot be installed (macOS, Windows)."""
    import ast
    from pathlib import Path

    path = Path(__file__).with_name(f"{module}.py")
    text = path.read_text()
    for node in ast.parse(text).body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            return "\n".join(text.splitlines()[first - 1:node.end_lineno]) + "\n"
    raise KeyError(f"course_lib.{module} has no function {name!r}")
