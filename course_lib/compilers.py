"""Eager, TorchScript, torch.compile and torch.export: compilers and interpreters (lesson 05).

Eager PyTorch is *imperative*: Python runs ``forward`` line by line and each operator is
dispatched on its own, paying interpreter and dispatch overhead every call. The other
routes capture the computation as a graph first (the *symbolic* style that Zhang, Lipton, Li
and Smola's *Dive into Deep Learning*, section "Compilers and Interpreters",
https://d2l.ai/chapter_computational-performance/hybridize.html, teaches with MXNet's
hybridization):

- ``torch.jit.trace`` runs the model once on an example and records the operators it saw
  (Python control flow is frozen to the path that example took);
- ``torch.jit.script`` compiles the Python source (control flow kept, a subset of Python);
  both TorchScript routes are deprecated since PyTorch 2.x but still found in deployed code;
- ``torch.compile`` (TorchDynamo + Inductor) captures graphs from Python bytecode, falls
  back to Python where it must ("graph breaks") and generates fused C++/Triton kernels;
- ``torch.export`` captures one whole graph ahead of time for deployment and saving.

Every function here returns measurements in seconds and never hides a failure: when a
route cannot work on this machine (Inductor needs a C++ compiler on the CPU) the reason
is returned so the lesson can say so.
"""
from __future__ import annotations

import contextlib
import io
import logging
import time
import warnings
from dataclasses import dataclass
from typing import Callable

import torch
import torch._dynamo
from torch import nn

from .timing import benchmark


def make_mlp(in_features: int = 512, hidden: tuple[int, ...] = (256, 128), out_features: int = 2,
             seed: int = 0) -> nn.Sequential:
    """The small MLP of *Dive into Deep Learning*'s hybridization section (512 inputs, hidden
    widths 256 and 128, 2 outputs by default): Linear + ReLU layers, then a Linear output, in
    evaluation mode, its weights drawn from ``torch.manual_seed(seed)``."""
    torch.manual_seed(seed)
    layers: list[nn.Module] = []
    width = in_features
    for size in hidden:
        layers += [nn.Linear(width, size), nn.ReLU()]
        width = size
    layers.append(nn.Linear(width, out_features))
    return nn.Sequential(*layers).eval()


def quiet(fn: Callable, *args, **kwargs):
    """Call ``fn`` with PyTorch's deprecation and tracer warnings silenced (they are taught, not hidden)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


def trace(model: Callable, example: torch.Tensor, **options):
    """``torch.jit.trace(model, example)``: the operators one run on ``example`` executed.

    By default the tracer runs the model again to check the trace (``check_trace=True``).
    """
    return quiet(torch.jit.trace, model, example, **options)


def script(model: Callable):
    """``torch.jit.script(model)``: TorchScript compiled from the Python source."""
    return quiet(torch.jit.script, model)


@dataclass
class CompileResult:
    """A compiled callable (None if compiling failed), seconds the first call took, and why it failed."""

    fn: Callable | None
    first_call_seconds: float
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.fn is not None


def compile_and_warm(model: Callable, example: torch.Tensor, backend: str = "inductor",
                     **options) -> CompileResult:
    """``torch.compile(model)`` and its first call on ``example``, where compiling happens.

    Returns the compiled callable and the seconds of that first call (the compile time).
    Any failure (no C++ compiler, an unsupported platform) comes back as ``error`` text.
    """
    start = time.perf_counter()
    try:
        compiled = torch.compile(model, backend=backend, **options)
        with torch.no_grad():
            quiet(compiled, example)
    except Exception as exc:  # noqa: BLE001 - reported by the lesson, not hidden
        first_line = (str(exc).strip().splitlines() or [""])[0][:300]
        return CompileResult(None, time.perf_counter() - start, f"{type(exc).__name__}: {first_line}")
    return CompileResult(compiled, time.perf_counter() - start)


@dataclass
class Speedup:
    """An honest speedup: steady-state per-call seconds *and* the one-off compile cost."""

    eager_seconds: float
    compiled_seconds: float
    compile_seconds: float

    @property
    def steady(self) -> float:
        """Eager time / compiled time per call, after warm-up (>1: compiled is faster)."""
        return self.eager_seconds / self.compiled_seconds

    def including_compile(self, calls: int) -> float:
        """Speedup over ``calls`` calls when the compile time is paid once."""
        return calls * self.eager_seconds / (self.compile_seconds + calls * self.compiled_seconds)

    @property
    def break_even_calls(self) -> float:
        """Calls after which compiling has paid for itself (inf if compiled is not faster)."""
        saved = self.eager_seconds - self.compiled_seconds
        return self.compile_seconds / saved if saved > 0 else float("inf")


def measure_speedup(eager: Callable, compiled: Callable, example: torch.Tensor,
                    compile_seconds: float, device=None, repeat: int = 7) -> Speedup:
    """Time ``eager(example)`` and ``compiled(example)`` with ``timing.benchmark`` (medians)."""
    with torch.no_grad():
        t_eager = benchmark(lambda: eager(example), device=device, repeat=repeat).median
        t_compiled = benchmark(lambda: quiet(compiled, example), device=device, repeat=repeat).median
    return Speedup(t_eager, t_compiled, compile_seconds)


def dispatch_overhead(sizes=(1, 64, 4096, 262144), device=None) -> list[tuple[int, float]]:
    """Median seconds of one ``x + 1`` for tensors of each size (elements).

    For small tensors the time is flat: it is the cost of getting from Python to the
    kernel (interpreter, dispatcher, allocation), not of the arithmetic.
    """
    rows = []
    for n in sizes:
        x = torch.ones(n, device=device)
        rows.append((n, benchmark(lambda x=x: x + 1, device=device, repeat=5).median))
    return rows


def disagreements(reference: Callable, candidate: Callable, inputs) -> list[int]:
    """Indices of ``inputs`` where ``candidate(x)`` differs from ``reference(x)``.

    Use it to catch a trace that froze one branch of an ``if`` on its example input.
    """
    bad = []
    with torch.no_grad():
        for i, x in enumerate(inputs):
            if not torch.allclose(reference(x), quiet(candidate, x), atol=1e-6):
                bad.append(i)
    return bad


def export(model: nn.Module, example: torch.Tensor):
    """``torch.export.export(model, (example,))``: one whole graph, ahead of time."""
    return quiet(torch.export.export, model, (example,))


def try_export(model: nn.Module, example: torch.Tensor):
    """(exported program, "") or (None, the first line of why ``torch.export`` refused).

    Export must capture *one* graph, so a Python ``if`` on a tensor's value cannot be
    exported; ``torch.cond`` puts both branches in the graph instead.
    """
    logging.disable(logging.CRITICAL)  # the refusal also writes the partial graph to stderr
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            return export(model, example), ""
    except Exception as exc:  # noqa: BLE001 - the reason is the lesson
        return None, f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0][:200]}"
    finally:
        logging.disable(logging.NOTSET)


def graph_breaks(fn: Callable, example: torch.Tensor) -> tuple[int, int, list[str]]:
    """(graphs, graph breaks, reasons) that TorchDynamo finds in ``fn(example)``.

    A graph break is where ``torch.compile`` must return to Python (a data-dependent
    ``if``, a ``print``, an unsupported call) and start a new graph afterwards.
    """
    torch._dynamo.reset()
    logging.disable(logging.WARNING)  # Dynamo also logs each break (e.g. `.item()`) as a warning on stderr
    try:
        report = quiet(torch._dynamo.explain(fn), example)
    finally:
        logging.disable(logging.NOTSET)
        torch._dynamo.reset()
    reasons = [r.reason for r in report.break_reasons]
    return report.graph_count, report.graph_break_count, reasons


def graph_ops(exported) -> list[str]:
    """Operator names in an exported program's graph, in execution order."""
    return [str(node.target) for node in exported.graph_module.graph.nodes if node.op == "call_function"]


def saved_size(obj, kind: str = "export") -> int:
    """Bytes of ``obj`` saved to memory: kind 'export' (torch.export.save), 'jit'
    (torch.jit.save) or 'state_dict' (torch.save of the weights only)."""
    buffer = io.BytesIO()
    if kind == "export":
        torch.export.save(obj, buffer)
    elif kind == "jit":
        quiet(torch.jit.save, obj, buffer)
    elif kind == "state_dict":
        torch.save(obj.state_dict(), buffer)
    else:
        raise ValueError("kind is 'export', 'jit' or 'state_dict'")
    return buffer.getbuffer().nbytes


def round_trip(exported) -> Callable:
    """Save an exported program to bytes and load it back; returns the loaded module."""
    buffer = io.BytesIO()
    torch.export.save(exported, buffer)
    buffer.seek(0)
    return torch.export.load(buffer).module()


@dataclass
class CompileLog:
    """What TorchDynamo did over a sequence of calls: the number of graphs compiled so far after
    each call, and for each recompile the first guard that failed (why the cached graph was refused)."""

    compiles_after_call: list[int]
    recompile_reasons: list[str]

    @property
    def compiles(self) -> int:
        """Graphs compiled over all the calls (the first compile included)."""
        return self.compiles_after_call[-1] if self.compiles_after_call else 0


def _first_guard_failure(message: str) -> str:
    """The first failed guard of a 'Recompiling function ...' log message, trimmed to one line."""
    lines = [line.strip() for line in message.splitlines() if line.strip().startswith("- ")]
    return lines[0][2:].split("  #")[0].strip() if lines else message.splitlines()[0]


def count_compiles(fn: Callable, calls) -> CompileLog:
    """``torch.compile(fn)`` called on each argument tuple of ``calls``, counting compiles.

    The backend counts the graphs TorchDynamo hands it and runs them eagerly (no Inductor, so no
    seconds of C++ compiling): what is counted is capture and guarding, the part that decides
    recompiles. The recompile log (``torch._logging.set_logs(recompiles=True)``) is captured,
    not printed. Dynamo's cache is reset before and after.
    """
    graphs = 0

    def counting_backend(graph_module, example_inputs):
        nonlocal graphs
        graphs += 1
        return graph_module.forward

    messages: list[str] = []

    class _Collect(logging.Handler):
        def emit(self, record):
            if "Recompiling" in record.getMessage():
                messages.append(record.getMessage())

    handler, logger = _Collect(), logging.getLogger("torch._dynamo")
    torch._dynamo.reset()
    after = []
    logger.addHandler(handler)
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            torch._logging.set_logs(recompiles=True)
            compiled = torch.compile(fn, backend=counting_backend)
            for args in calls:
                quiet(compiled, *args)
                after.append(graphs)
    finally:
        torch._logging.set_logs()
        logger.removeHandler(handler)
        torch._dynamo.reset()
    return CompileLog(after, [_first_guard_failure(m) for m in messages])


def inductor_code(fn: Callable, *args) -> tuple[object, str]:
    """(``torch.compile(fn)(*args)``, the Python + C++ (CPU) or Triton (GPU) source Inductor wrote for it).

    Compiles for real (seconds on a CPU: a C++ compiler runs), through
    ``torch._inductor.utils.run_and_get_code``.
    """
    from torch._inductor.utils import run_and_get_code

    torch._dynamo.reset()
    try:
        output, sources = quiet(run_and_get_code, torch.compile(fn), *args)
    finally:
        torch._dynamo.reset()
    return output, "\n".join(sources)


def cpp_kernels(code: str) -> list[str]:
    """The C++ kernels inside Inductor's CPU output code (the ``r'''...'''`` strings it compiles)."""
    return [part.split("'''")[0].strip() for part in code.split("r'''")[1:]]
