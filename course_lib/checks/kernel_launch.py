"""Launching a student's kernel for a test (lessons 03 and 04): on copies, with its inputs checked.

A test that launches ``kernel(x, y, out)`` and then compares ``out`` with ``2.5 * x + y`` can be
fooled by a kernel that changes ``x`` and ``y`` instead of writing ``out`` (zero ``x`` and ``y``
and the expected value is the zeros ``out`` already holds). :func:`launch_checked` closes that:

- the kernel gets **copies** of every array argument; the caller's arrays, from which the test
  computes its expected values, are never handed to it;
- after the launch, every array that is an **input** (every argument but the outputs; by
  default the output is the last argument) must hold exactly what it held before. A kernel that
  wrote to one fails with :class:`~course_lib.checks.core.CheckFailed` naming the argument,
  how many elements changed and the first of them.

On a GPU the copies go to the device and every argument comes back after the launch, so inputs
are checked there too; in the simulator the launch is :func:`course_lib.kernels.launch`'s
checked one (races and out-of-bounds indices raise), and with ``count=True`` it also returns the
:class:`~course_lib.simt.counts.AccessCounts` (every atomic counted as one atomic, one read and
one write). Nothing is written to stderr.
"""
from __future__ import annotations

import numpy as np

from .core import CheckFailed
from .unanswered import refuse_unanswered


def _parameters(kernel) -> tuple[str, list[str]]:
    """(the kernel's name, its parameter names) as its Python source has them."""
    fn = getattr(kernel, "py_func", None) or getattr(kernel, "fn", None) or kernel
    code = getattr(fn, "__code__", None)
    name = getattr(fn, "__name__", None) or "the kernel"
    return name, list(code.co_varnames[:code.co_argcount]) if code is not None else []


def _changed(before: np.ndarray, after: np.ndarray) -> np.ndarray:
    """Boolean mask of the elements that differ (NaN where NaN was counts as unchanged)."""
    if after.shape != before.shape:
        return np.ones(before.shape, dtype=bool)
    same = after == before
    if before.dtype.kind in "fc":
        same |= np.isnan(before) & np.isnan(after)
    return ~same


def _value(v) -> str:
    return f"{v:.6g}" if isinstance(v, (float, np.floating)) else repr(v.item() if hasattr(v, "item") else v)


def check_inputs_unchanged(kernel, before, after, outputs) -> None:
    """Raise :class:`CheckFailed` if an array argument of ``kernel`` not in ``outputs`` (indices
    into the argument list) differs between ``before`` (the caller's arrays) and ``after`` (the
    copies the kernel was launched on)."""
    __tracebackhide__ = True  # IPython and pytest show the caller's line, not this one
    name, params = _parameters(kernel)
    for i, (old, new) in enumerate(zip(before, after)):
        if i in outputs or not isinstance(old, np.ndarray):
            continue
        bad = _changed(old, np.asarray(new))
        if not bad.any():
            continue
        param = f"`{params[i]}` (argument {i + 1})" if i < len(params) else f"argument {i + 1}"
        first = tuple(int(k) for k in np.argwhere(bad)[0])
        where = ", ".join(str(k) for k in first)
        out = ", ".join(f"`{params[k]}`" if k < len(params) else f"argument {k + 1}" for k in sorted(outputs))
        raise CheckFailed(
            f"{name} changed its input {param}: expected the inputs left as they were (a kernel here "
            f"writes only to its output {out}; atomics write too), got {int(bad.sum())} of {bad.size} "
            f"elements changed, first at [{where}]: was {_value(old[first])}, now {_value(np.asarray(new)[first])}")


def launch_checked(kernel, grid, block, args, outputs=(-1,), count: bool = False):
    """Launch ``kernel[grid, block](*args)`` on copies of its array arguments and return the
    output (``args[outputs[0]]`` after the launch, as NumPy), or (output, AccessCounts) with
    ``count=True``. ``outputs``: indices of the arguments the kernel may write (default: the
    last); every other array argument must come back unchanged, else :class:`CheckFailed`.
    The caller's arrays are never passed to the kernel, so expected values computed from them
    after the launch are computed from what the test generated. A kernel that still holds the
    release's stub is :class:`~course_lib.checks.unanswered.NotAnswered` before it launches."""
    __tracebackhide__ = True  # IPython and pytest show the caller's line, not this one
    from course_lib import kernels  # lazy: importing it chooses GPU or simulator for numba.cuda

    refuse_unanswered(kernel)   # a GPU would ignore the stub's raise and leave the output as it was
    args = list(args)
    outs = {i % len(args) for i in outputs}
    work = [np.array(a, copy=True) if isinstance(a, np.ndarray) else a for a in args]
    counts = None
    if count:
        _, counts = kernels.launch(kernel, grid, block, work, count=True)
    elif kernels.numba_cuda_mode() == "real":
        cuda = kernels.cuda
        dev = [cuda.to_device(a) if isinstance(a, np.ndarray) else a for a in work]
        kernels.launch(kernel, grid, block, dev)
        cuda.synchronize()
        work = [d.copy_to_host() if isinstance(a, np.ndarray) else a for a, d in zip(work, dev)]
    else:
        kernels.launch(kernel, grid, block, work)
    check_inputs_unchanged(kernel, args, work, outs)
    result = work[outputs[0] % len(args)]
    return (result, counts) if count else result
