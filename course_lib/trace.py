"""Where the time goes: record training steps with ``torch.profiler``, read the trace, draw
it (lesson 08). :mod:`course_lib.profile` counts a network's work from its shapes; this module
watches a real run.

* :func:`record`, :func:`record_training` - run code under ``torch.profiler`` (CPU; CUDA too
  when the work runs on a GPU) with shapes, memory and FLOPs recorded; the training loop marks
  each batch fetch as the range ``"data"`` and each step as ``"step"`` (``record_function``).
* :func:`op_table` - ``key_averages()`` narrowed to fit a slide; :func:`op_flops` - the FLOPs
  the profiler counted per operator and input shape.
* :func:`export_trace` writes the Chrome trace JSON (for https://ui.perfetto.dev or
  ``chrome://tracing``); :func:`load_trace` reads it back into plain events.
* :func:`summarise_ops`, :func:`summarise_ranges` - time per operator and per range.
* :func:`plot_timeline`, :func:`plot_memory` - the trace drawn with matplotlib, offline.

Times are microseconds (the Chrome trace's unit) unless a name says seconds; memory is bytes.
The CUDA allocator's history is in :mod:`course_lib.training_memory`.
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import matplotlib.pyplot as plt
import torch
from matplotlib.patches import Patch
from torch import nn
from torch.profiler import ProfilerActivity, profile, record_function

from .timing import synchronize

DATA_RANGE = "data"
STEP_RANGE = "step"
GPU_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
SLIDE_COLUMNS = ("Name", "Self CPU", "CPU total", "CPU Mem", "# of Calls", "Self CUDA", "CUDA total")
# kineto's and the CPU allocator's notices on stderr when a profile starts and stops
_NOTICES = re.compile(r"^(USDT|INFO|STAGE):\S+ \S+ \d+:\d+ \S+\.cpp:\d+\]"
                      r"|Memory block of unknown size was allocated before the profiling started")


# ---------------------------------------------------------------- recording
def activities(device="cpu") -> list[ProfilerActivity]:
    """The CPU always; CUDA kernels and copies too when ``device`` is a usable CUDA device."""
    cuda = torch.device(device).type == "cuda" and torch.cuda.is_available()
    return [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])


@contextlib.contextmanager
def _profiler_notices_hidden():
    """Hold back the process's stderr (file descriptor 2) while the profiler runs, then pass
    on every line but the profiler's start/stop notices (in a notebook: stderr under a cell)."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            text = captured.read().decode(errors="replace")
            kept = [line for line in text.splitlines(keepends=True) if not _NOTICES.search(line)]
            if kept:
                sys.stderr.write("".join(kept))
                sys.stderr.flush()


def record(fn: Callable[[], object], steps: int = 3, *, device="cpu", warmup: int = 1,
           record_shapes: bool = True, profile_memory: bool = True,
           with_flops: bool = True) -> profile:
    """Call ``fn()`` ``warmup`` times untraced, then ``steps`` times under ``torch.profiler``,
    and return the finished profile (``.key_averages()``, ``.events()``). Activities follow
    ``device``, which is synchronized before the profile stops (queued GPU work included)."""
    for _ in range(warmup):
        fn()
    synchronize(device)
    prof = profile(activities=activities(device), record_shapes=record_shapes,
                   profile_memory=profile_memory, with_flops=with_flops)
    with _profiler_notices_hidden():
        prof.start()
        try:
            for _ in range(steps):
                fn()
            synchronize(device)
        finally:
            prof.stop()
    return prof


def record_training(model: nn.Module, loader, steps: int = 3, *, device="cpu", warmup: int = 1,
                    lr: float = 1e-3, **options) -> profile:
    """Profile ``steps`` training steps of ``model`` (Adam, cross-entropy) on ``loader``'s
    batches after ``warmup`` untraced ones. Each step is two ranges: ``"data"`` around
    ``next()`` on the loader (the wait for the batch) and ``"step"`` around the copy to
    ``device``, forward, backward and optimizer step. ``options`` go to :func:`record`."""
    device = torch.device(device)
    needed = warmup + steps
    if hasattr(loader, "__len__") and len(loader) < needed:
        raise ValueError(f"the loader has {len(loader)} batches; {needed} are needed "
                         f"({warmup} warm-up + {steps} profiled)")
    model.to(device).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    batches = iter(loader)

    def one_step():
        with record_function(DATA_RANGE):
            inputs, targets = next(batches)
        with record_function(STEP_RANGE):
            inputs = inputs.to(device, non_blocking=True)
            targets = targets.to(device, non_blocking=True)
            optimizer.zero_grad(set_to_none=True)
            loss_fn(model(inputs), targets).backward()
            optimizer.step()

    return record(one_step, steps, device=device, warmup=warmup, **options)


def op_table(prof: profile, rows: int = 8, sort_by: str = "self_cpu_time_total",
             name_width: int = 38) -> str:
    """``prof.key_averages().table(...)`` cut to fit a slide: ``rows`` operators sorted by
    ``sort_by``, names shortened to ``name_width`` characters, and only the columns in
    ``SLIDE_COLUMNS`` (plus the FLOPs column when FLOPs were counted)."""
    table = prof.key_averages().table(sort_by=sort_by, row_limit=rows, max_name_column_width=name_width)
    lines = table.splitlines()
    rule = next(line for line in lines if line.startswith("-"))
    spans = [match.span() for match in re.finditer(r"-+", rule)]
    header = next(line for line in lines if line.strip().startswith("Name"))
    keep = [(a, b) for a, b in spans
            if header[a:b].strip() in SLIDE_COLUMNS or header[a:b].strip().endswith("FLOPs")]
    out = []
    for line in lines:
        if line.startswith("Self ") and "time total" in line:
            out.append(line)
        elif line.strip():
            out.append("  ".join(line[a:b] for a, b in keep).rstrip())
    return "\n".join(out)


@dataclass(frozen=True)
class OpFlops:
    """FLOPs torch.profiler counted for one operator and input shape: ``flops`` per call,
    ``calls``, and the mean CPU time per call in microseconds (including nested operators)."""

    name: str
    input_shapes: tuple
    calls: int
    flops: int
    cpu_us: float


def op_flops(prof: profile) -> list[OpFlops]:
    """Every (operator, input shapes) whose FLOPs the profiler counted (it knows formulas for
    convolutions, matrix products and a few element-wise ops), most time-consuming first.
    Needs a profile recorded with ``record_shapes=True, with_flops=True``."""
    rows = [OpFlops(avg.key, tuple(tuple(s) for s in avg.input_shapes), avg.count,
                    avg.flops // max(avg.count, 1), avg.cpu_time_total / max(avg.count, 1))
            for avg in prof.key_averages(group_by_input_shape=True) if avg.flops]
    return sorted(rows, key=lambda row: row.cpu_us * row.calls, reverse=True)


# ---------------------------------------------------------------- the Chrome trace file
def trace_dir() -> Path:
    """Where traces are written: ``$COURSE_TRACE_DIR``, else ``build/traces`` of the
    repository (never committed), else a folder in the system's temporary directory."""
    env = os.environ.get("COURSE_TRACE_DIR")
    if env:
        return Path(env).expanduser()
    repo = Path(__file__).resolve().parents[1]
    if (repo / "pyproject.toml").is_file() and os.access(repo, os.W_OK):
        return repo / "build" / "traces"
    return Path(tempfile.gettempdir()) / "course_lib_traces"


def export_trace(prof: profile, name: str | os.PathLike) -> Path:
    """Write ``prof`` (once only) as a Chrome trace JSON file and return its path: a bare
    ``name`` ('step.json') goes into :func:`trace_dir`, a path with a folder is used as given."""
    path = Path(name)
    if path.parent == Path("."):
        path = trace_dir() / path
    path.parent.mkdir(parents=True, exist_ok=True)
    prof.export_chrome_trace(str(path))
    return path


@dataclass(frozen=True)
class TraceEvent:
    """One complete event ("ph": "X") of a Chrome trace: an operator, a ``record_function``
    range, a GPU kernel or copy. Times in microseconds from the start of the trace."""

    name: str
    category: str
    start_us: float
    duration_us: float
    pid: int | str = 0
    tid: int | str = 0
    args: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def end_us(self) -> float:
        return self.start_us + self.duration_us

    @property
    def lane(self) -> tuple:
        """(process, thread): events in one lane nest; a GPU stream is a lane of its own."""
        return (self.pid, self.tid)


@dataclass(frozen=True)
class MemorySample:
    """A ``[memory]`` event of a trace: ``allocated_bytes`` in use on ``device`` right after an
    allocation (``change_bytes`` > 0) or a free (< 0), at ``time_us``."""

    time_us: float
    allocated_bytes: int
    change_bytes: int
    device: str


@dataclass
class Trace:
    """Complete events sorted by start, and memory samples (with ``profile_memory=True``)."""

    events: list[TraceEvent]
    memory: list[MemorySample] = field(default_factory=list)

    def ranges(self, name: str) -> list[TraceEvent]:
        """The ``record_function`` ranges called ``name``, in order."""
        return [e for e in self.events if e.category == "user_annotation" and e.name == name]


def load_trace(source: str | os.PathLike | dict) -> Trace:
    """Read a Chrome trace (a path to the JSON file, or the parsed dict) into a :class:`Trace`;
    times become microseconds since the earliest event; flow and metadata events, and the
    profiler's own span (category "Trace"), are dropped."""
    raw = source if isinstance(source, dict) else json.loads(Path(source).read_text())
    entries = raw["traceEvents"] if isinstance(raw, dict) else raw
    complete = [e for e in entries if e.get("ph") == "X" and e.get("cat") != "Trace"]
    memory = [e for e in entries if e.get("ph") == "i" and e.get("name") == "[memory]"]
    origin = min((float(e["ts"]) for e in complete + memory), default=0.0)
    events = [TraceEvent(e["name"], e.get("cat", ""), float(e["ts"]) - origin, float(e.get("dur", 0.0)),
                         e.get("pid", 0), e.get("tid", 0), e.get("args", {})) for e in complete]
    events.sort(key=lambda e: (e.start_us, -e.duration_us))
    samples = [MemorySample(float(e["ts"]) - origin, int(args.get("Total Allocated", 0)),
                            int(args.get("Bytes", 0)), "cpu" if args.get("Device Type", 0) == 0
                            else f"cuda:{args.get('Device Id', 0)}")
               for e in memory for args in [e.get("args", {})]]
    samples.sort(key=lambda s: s.time_us)
    return Trace(events, samples)


# ---------------------------------------------------------------- summaries
@dataclass(frozen=True)
class OpTotal:
    """Calls of one operator and their summed duration in microseconds. The duration is
    inclusive: an operator that calls others (``aten::conv2d`` calls ``aten::convolution``)
    contains their time too, so the totals of nested operators overlap."""

    name: str
    calls: int
    total_us: float


def summarise_ops(events: list[TraceEvent], category: str = "cpu_op") -> list[OpTotal]:
    """Calls and inclusive time of every event name of ``category`` ('cpu_op' for operators on
    the CPU, 'kernel' for GPU kernels), largest total first."""
    totals: dict[str, list] = {}
    for event in events:
        if event.category == category:
            entry = totals.setdefault(event.name, [0, 0.0])
            entry[0] += 1
            entry[1] += event.duration_us
    ranked = [OpTotal(name, calls, total) for name, (calls, total) in totals.items()]
    return sorted(ranked, key=lambda op: op.total_us, reverse=True)


@dataclass(frozen=True)
class RangeTotals:
    """Seconds spent inside each ``record_function`` range name, and how many times it ran."""

    seconds: dict[str, float]
    counts: dict[str, int]

    def share(self, name: str, among=(DATA_RANGE, STEP_RANGE)) -> float:
        """Fraction (0 to 1) of the time in the ranges ``among`` that went to ``name``."""
        total = sum(self.seconds.get(other, 0.0) for other in among)
        return self.seconds.get(name, 0.0) / total if total else 0.0


def summarise_ranges(events: list[TraceEvent]) -> RangeTotals:
    """Total seconds and count of every ``record_function`` range (CPU side) in ``events``."""
    seconds: dict[str, float] = {}
    counts: dict[str, int] = {}
    for event in events:
        if event.category == "user_annotation":
            seconds[event.name] = seconds.get(event.name, 0.0) + event.duration_us * 1e-6
            counts[event.name] = counts.get(event.name, 0) + 1
    return RangeTotals(seconds, counts)


# ---------------------------------------------------------------- drawing
_COLOURS = {"data": "tab:red", "step": "tab:green", "user_annotation": "tab:olive",
            "cpu_op": "tab:blue", "kernel": "tab:purple", "gpu_memcpy": "tab:orange",
            "gpu_memset": "tab:orange", "cuda_runtime": "tab:gray", "cuda_driver": "tab:gray",
            "gpu_user_annotation": "tab:cyan", "python_function": "tab:brown"}


def nesting_depths(events: list[TraceEvent]) -> list[int]:
    """For each event, how many events of its lane enclose it (0: outermost). Events of one
    thread nest like a call stack; ties in start put the longer event outside."""
    depths = [0] * len(events)
    order = sorted(range(len(events)), key=lambda i: (str(events[i].lane), events[i].start_us,
                                                      -events[i].duration_us))
    enclosing: list[float] = []  # end times of the events that enclose the current one
    lane = None
    for i in order:
        event = events[i]
        if event.lane != lane:
            lane, enclosing = event.lane, []
        enclosing = [end for end in enclosing if end > event.start_us]
        depths[i] = len(enclosing)
        enclosing.append(event.end_us)
    return depths


def plot_timeline(events: list[TraceEvent], ax=None, start_us: float | None = None,
                  end_us: float | None = None, max_depth: int = 4, title: str = ""):
    """Draw ``events`` as a timeline: one band per lane (CPU thread, GPU stream), one row per
    nesting depth (up to ``max_depth``), bars coloured by category (``record_function`` ranges
    "data" red and "step" green, CPU operators blue, GPU kernels purple, copies orange).
    Bars wide enough for their (shortened) name carry it. Time axis in ms."""
    lo = min(e.start_us for e in events) if start_us is None else start_us
    hi = max(e.end_us for e in events) if end_us is None else end_us
    shown = [e for e in events if e.duration_us > 0 and e.end_us >= lo and e.start_us <= hi]
    if not shown:
        raise ValueError("no events with a duration in this window")
    depths = nesting_depths(shown)
    lanes = sorted({e.lane for e in shown}, key=lambda lane: (any(
        e.category in GPU_CATEGORIES for e in shown if e.lane == lane), str(lane)))
    ax = ax or plt.subplots(figsize=(10, 1.0 + 0.45 * len(lanes) * (max_depth + 1)))[1]
    row_of, labels = {}, []
    for lane in lanes:
        gpu = any(e.category in GPU_CATEGORIES for e in shown if e.lane == lane)
        name = f"{'GPU stream' if gpu else 'CPU thread'} {lane[1]}"
        for depth in range(min(max_depth, max(d for e, d in zip(shown, depths) if e.lane == lane)) + 1):
            row_of[(lane, depth)] = len(labels)
            labels.append(f"{name} · {depth}" if depth else name)
    bars: dict[tuple, list] = {}  # (row, category key) -> [(left ms, width ms)]
    points_per_us = ax.get_position().width * ax.figure.get_figwidth() * 72 / (hi - lo)
    for event, depth in zip(shown, depths):
        if depth > max_depth:
            continue
        key = event.name if event.category == "user_annotation" and event.name in _COLOURS else event.category
        row = row_of[(event.lane, depth)]
        left, right = max(event.start_us, lo), min(event.end_us, hi)
        bars.setdefault((row, key), []).append(((left - lo) / 1e3, (right - left) / 1e3))
        text = re.sub(r"^(aten::|autograd::engine::evaluate_function: |.*#)", "", event.name)
        if (right - left) * points_per_us > 4.2 * len(text) + 4:  # 7-point characters
            ax.text((left + right) / 2e3 - lo / 1e3, row, text, ha="center", va="center",
                    fontsize=7, clip_on=True)
    for (row, key), spans in bars.items():
        ax.broken_barh(spans, (row - 0.4, 0.8), facecolors=_COLOURS.get(key, "tab:pink"),
                       edgecolor="white", linewidth=0.3)
    used = sorted({key for _, key in bars})  # legend entries
    ax.set_yticks(range(len(labels)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, (hi - lo) / 1e3)
    ax.set_xlabel("time (ms)")
    ax.legend(handles=[Patch(color=_COLOURS.get(k, "tab:pink"), label=k) for k in used],
              fontsize=7, loc="lower right", bbox_to_anchor=(1.0, 1.0), ncol=len(used), frameon=False)
    ax.set_title(title or "profiler trace", loc="left", fontsize=10)
    return ax


def plot_memory(samples: list[MemorySample], ax=None, start_us: float = 0.0,
                end_us: float | None = None, device: str | None = None):
    """Step plot of the bytes allocated (MiB) over time (ms from ``start_us``), from the
    ``[memory]`` samples of a trace, for one ``device`` (default: the first one seen)."""
    device = device or (samples[0].device if samples else "cpu")
    chosen = [s for s in samples if s.device == device and s.time_us >= start_us
              and (end_us is None or s.time_us <= end_us)]
    ax = ax or plt.subplots(figsize=(10, 2))[1]
    ax.step([(s.time_us - start_us) / 1e3 for s in chosen],
            [s.allocated_bytes / 2**20 for s in chosen], where="post")
    ax.set_xlabel("time (ms)")
    ax.set_ylabel(f"allocated on {device} (MiB)")
    return ax
