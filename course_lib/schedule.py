"""Automatic parallelism: schedule a dependency graph of tasks on several devices (lesson 07).

A deep learning framework sees a program as a graph: a task (an operator, a copy) can
start once the tasks it depends on have finished. Tasks with no path between them may
run at the same time on different devices (two GPUs, the CPU and a GPU, a GPU and its
copy engine). The *makespan* is the time from the first start to the last finish.

- :class:`Task`: a name, a duration in seconds (one for all devices, or one per device),
  its dependencies, and optionally the only device it may run on (a PCIe copy runs on
  the copy engine, not on the GPU's cores);
- :func:`list_schedule`: list scheduling (the HEFT heuristic): take ready tasks in order
  of their critical path to the end, put each on the device where it finishes first
  (using an idle gap left earlier on that device when the task fits in it);
- :func:`schedule_assignment`: the schedule that follows a given task -> device choice;
- :func:`validate`, :func:`critical_path`, :func:`gantt` (a matplotlib Gantt chart);
- :func:`copy_compute_tasks` / :func:`pipeline_seconds`: compute a chunk, copy it out,
  with and without overlap (Zhang et al., Dive into Deep Learning, 2023, section
  "Automatic Parallelism", https://d2l.ai/chapter_computational-performance/auto-parallelism.html);
- :func:`run_parallel`: execute real Python callables with their dependencies on a thread
  pool and record when each one ran, for a measured Gantt chart.

Lesson 13 draws and checks its pipeline schedules with :class:`Schedule`, :func:`gantt` and
:func:`validate`.
"""
from __future__ import annotations

import threading
import time
import warnings
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from graphlib import TopologicalSorter
from typing import Callable, Mapping

import torch


@dataclass(frozen=True)
class Task:
    """One node of the graph. ``seconds``: a float (any device) or {device: seconds}."""
    name: str
    seconds: float | Mapping[str, float]
    deps: tuple[str, ...] = ()
    device: str | None = None

    def seconds_on(self, device: str) -> float:
        """Duration (seconds) on ``device``; KeyError if it cannot run there."""
        if self.device is not None and device != self.device:
            raise KeyError(f"task {self.name!r} runs only on {self.device!r}")
        if isinstance(self.seconds, Mapping):
            return float(self.seconds[device])
        return float(self.seconds)

    def can_run_on(self, device: str) -> bool:
        if self.device is not None:
            return device == self.device
        return not isinstance(self.seconds, Mapping) or device in self.seconds


@dataclass(frozen=True)
class Slot:
    """Where and when one task ran (seconds)."""
    task: str
    device: str
    start: float
    end: float


@dataclass
class Schedule:
    """Slots of every task; ``makespan`` is the last end time (seconds)."""
    slots: list[Slot] = field(default_factory=list)

    @property
    def makespan(self) -> float:
        return max((s.end for s in self.slots), default=0.0)

    def slot(self, task: str) -> Slot:
        return next(s for s in self.slots if s.task == task)

    def assignment(self) -> dict[str, str]:
        """{task: device}."""
        return {s.task: s.device for s in self.slots}

    def busy_seconds(self, device: str) -> float:
        return sum(s.end - s.start for s in self.slots if s.device == device)


def as_graph(tasks) -> dict[str, Task]:
    """{name: Task} from a list of tasks (or a dict already); checks the dependencies exist."""
    graph = dict(tasks) if isinstance(tasks, Mapping) else {t.name: t for t in tasks}
    for task in graph.values():
        for dep in task.deps:
            if dep not in graph:
                raise ValueError(f"task {task.name!r} depends on unknown task {dep!r}")
    return graph


def topological_order(tasks) -> list[str]:
    """Task names so that every task comes after its dependencies (raises on a cycle)."""
    graph = as_graph(tasks)
    return list(TopologicalSorter({n: t.deps for n, t in graph.items()}).static_order())


def _fastest(task: Task, devices) -> float:
    return min(task.seconds_on(d) for d in devices if task.can_run_on(d))


def upward_rank(tasks, devices) -> dict[str, float]:
    """Seconds from a task's start to the end of the graph along its longest path,
    each task counted at its fastest device: the list scheduler's priority."""
    graph = as_graph(tasks)
    children: dict[str, list[str]] = {n: [] for n in graph}
    for task in graph.values():
        for dep in task.deps:
            children[dep].append(task.name)
    rank: dict[str, float] = {}
    for name in reversed(topological_order(graph)):
        rank[name] = _fastest(graph[name], devices) + max((rank[c] for c in children[name]), default=0.0)
    return rank


def critical_path(tasks, devices) -> tuple[float, list[str]]:
    """Longest dependency chain (seconds, names), tasks at their fastest device.

    No schedule can be shorter: it is a lower bound on the makespan.
    """
    graph = as_graph(tasks)
    rank = upward_rank(graph, devices)
    roots = [n for n, t in graph.items() if not t.deps]
    path = [max(roots, key=rank.__getitem__)] if roots else []
    while path:
        children = [n for n, t in graph.items() if path[-1] in t.deps]
        if not children:
            break
        path.append(max(children, key=rank.__getitem__))
    return (rank[path[0]] if path else 0.0), path


def earliest_start(busy: list[tuple[float, float]], ready: float, seconds: float) -> float:
    """First time >= ``ready`` at which a task of ``seconds`` fits between the ``busy``
    intervals (sorted (start, end) pairs) of a device: gaps left earlier are used."""
    start = ready
    for b_start, b_end in busy:
        if start + seconds <= b_start:
            return start
        start = max(start, b_end)
    return start


def _place(graph: dict[str, Task], order: list[str], choose: Callable[[Task, float, dict], str]) -> Schedule:
    """Place tasks in ``order`` (dependencies first), each on the device ``choose`` picks,
    at the earliest time its dependencies and a free gap on that device allow."""
    busy: dict[str, list[tuple[float, float]]] = {}
    end: dict[str, float] = {}
    schedule = Schedule()
    for name in order:
        task = graph[name]
        ready = max((end[d] for d in task.deps), default=0.0)
        device = choose(task, ready, busy)
        seconds = task.seconds_on(device)
        start = earliest_start(busy.get(device, []), ready, seconds)
        busy.setdefault(device, []).append((start, start + seconds))
        busy[device].sort()
        end[name] = start + seconds
        schedule.slots.append(Slot(name, device, start, start + seconds))
    return schedule


def _priority_order(graph: dict[str, Task], devices) -> list[str]:
    """Dependencies first; among ready tasks the one with the longest path to the end."""
    rank = upward_rank(graph, devices)
    sorter = TopologicalSorter({n: t.deps for n, t in graph.items()})
    sorter.prepare()
    order: list[str] = []
    ready: list[str] = []
    while sorter.is_active():
        ready.extend(sorter.get_ready())
        ready.sort(key=lambda n: (-rank[n], n))
        name = ready.pop(0)
        order.append(name)
        sorter.done(name)
    return order


def list_schedule(tasks, devices) -> Schedule:
    """List scheduling: by priority, each task to the device where it would finish first."""
    graph = as_graph(tasks)
    devices = list(devices)

    def earliest_finish(task: Task, ready: float, busy: dict) -> str:
        options = [d for d in devices if task.can_run_on(d)]
        if not options:
            raise ValueError(f"task {task.name!r} can run on none of {devices}")
        return min(options, key=lambda d: (earliest_start(busy.get(d, []), ready, task.seconds_on(d))
                                           + task.seconds_on(d),
                                           devices.index(d)))

    return _place(graph, _priority_order(graph, devices), earliest_finish)


def schedule_assignment(tasks, assignment: Mapping[str, str], devices=None) -> Schedule:
    """The schedule when task ``t`` runs on ``assignment[t]``: tasks are placed in priority
    order, each as early as its dependencies and a free gap on its device allow."""
    graph = as_graph(tasks)
    missing = set(graph) - set(assignment)
    if missing:
        raise ValueError(f"no device chosen for {sorted(missing)}")
    devices = list(devices) if devices is not None else sorted(set(assignment.values()))
    return _place(graph, _priority_order(graph, devices), lambda task, ready, busy: assignment[task.name])


def validate(schedule: Schedule, tasks, tol: float = 1e-9) -> list[str]:
    """Problems with ``schedule`` (empty list: it is valid): every task once, durations
    right, dependencies finished before a task starts, no two tasks at once on a device."""
    graph = as_graph(tasks)
    problems = []
    names = [s.task for s in schedule.slots]
    for name in set(graph) - set(names):
        problems.append(f"task {name!r} is not scheduled")
    for name in {n for n in names if names.count(n) > 1}:
        problems.append(f"task {name!r} is scheduled more than once")
    slots = {s.task: s for s in schedule.slots if s.task in graph}
    for s in slots.values():
        task = graph[s.task]
        if not task.can_run_on(s.device):
            problems.append(f"task {s.task!r} cannot run on {s.device!r}")
            continue
        if abs((s.end - s.start) - task.seconds_on(s.device)) > tol:
            problems.append(f"task {s.task!r} lasts {s.end - s.start:g} s, not {task.seconds_on(s.device):g} s")
        for dep in task.deps:
            if dep in slots and slots[dep].end > s.start + tol:
                problems.append(f"task {s.task!r} starts before its dependency {dep!r} ends")
    by_device: dict[str, list[Slot]] = {}
    for s in slots.values():
        by_device.setdefault(s.device, []).append(s)
    for device, row in by_device.items():
        row.sort(key=lambda s: s.start)
        for a, b in zip(row, row[1:]):
            if b.start < a.end - tol:
                problems.append(f"{a.task!r} and {b.task!r} overlap on {device!r}")
    return problems


# ----------------------------------------------------------------- copy and compute
def copy_compute_tasks(chunks: int, compute_seconds: float, copy_seconds: float,
                       overlap: bool = True) -> list[Task]:
    """Compute ``chunks`` results on 'gpu', copy each to the host on 'copy' (the PCIe engine).

    With ``overlap`` a copy depends only on its own chunk; without it the first copy
    also waits for the last compute (a synchronize between the two phases).
    """
    tasks = []
    for i in range(chunks):  # one stream: compute i waits for compute i-1
        deps = (f"compute{i - 1}",) if i else ()
        tasks.append(Task(f"compute{i}", compute_seconds, deps, device="gpu"))
    last = f"compute{chunks - 1}"
    for i in range(chunks):
        deps = (f"compute{i}",) if overlap else (f"compute{i}", last)
        tasks.append(Task(f"copy{i}", copy_seconds, tuple(dict.fromkeys(deps)), device="copy"))
    return tasks


def pipeline_seconds(chunks: int, compute_seconds: float, copy_seconds: float,
                     overlap: bool = True) -> float:
    """Makespan of :func:`copy_compute_tasks` in closed form (seconds).

    Without overlap: ``n c + n k``. With overlap the slower stage sets the pace and the other
    adds one chunk: ``max(n c + k, c + n k)``.
    """
    if chunks <= 0:
        return 0.0
    n, c, k = chunks, compute_seconds, copy_seconds
    return max(n * c + k, c + n * k) if overlap else n * (c + k)


# ----------------------------------------------------------------- plot
def gantt(schedule: Schedule, ax=None, title: str = "", unit: str = "s"):
    """A Gantt chart of ``schedule`` (one row per device); returns the axes."""
    import matplotlib.pyplot as plt  # lazy: pipeline workers import this module and never draw
    scale = {"s": 1.0, "ms": 1e3, "us": 1e6}[unit]
    devices = sorted({s.device for s in schedule.slots})
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 0.6 + 0.5 * len(devices)))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    width_inches = ax.figure.get_size_inches()[0] * ax.get_position().width
    span = (schedule.makespan or 1.0) * 7.0 / max(width_inches, 1.0)
    for row, device in enumerate(devices):
        for i, s in enumerate(sorted((s for s in schedule.slots if s.device == device),
                                     key=lambda s: s.start)):
            ax.broken_barh([(s.start * scale, (s.end - s.start) * scale)], (row - 0.4, 0.8),
                           facecolors=colors[i % len(colors)], edgecolor="black")
            if (s.end - s.start) >= 0.011 * len(s.task) * span:  # label only bars wide enough
                ax.text((s.start + s.end) / 2 * scale, row, s.task, ha="center", va="center", fontsize=8)
    ax.set_yticks(range(len(devices)), devices)
    ax.set_xlabel(f"time ({unit})")
    ax.set_title(title or f"makespan {schedule.makespan * scale:.3g} {unit}")
    return ax


# ----------------------------------------------------------------- real execution
def run_parallel(functions: Mapping[str, Callable[[], object]], deps: Mapping[str, tuple] | None = None,
                 workers: int = 2) -> tuple[dict[str, object], Schedule]:
    """Run callables on ``workers`` threads, each once its dependencies have finished.

    Returns (results, measured schedule) with the thread that ran each task as its
    'device' and start/end in seconds since the first start. PyTorch operators release
    the GIL, so two threads run two matmuls on two cores at the same time.
    """
    deps = {name: tuple(deps.get(name, ())) if deps else () for name in functions}
    sorter = TopologicalSorter(deps)
    sorter.prepare()
    results: dict[str, object] = {}
    times: dict[str, tuple[str, float, float]] = {}
    origin = time.perf_counter()

    def timed(name: str):

        start = time.perf_counter() - origin
        value = functions[name]()
        times[name] = (threading.current_thread().name, start, time.perf_counter() - origin)
        return value

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="worker") as pool:
        running = {}
        while sorter.is_active():
            for name in sorter.get_ready():
                running[pool.submit(timed, name)] = name
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                name = running.pop(future)
                results[name] = future.result()
                sorter.done(name)
    threads = sorted({t for t, _, _ in times.values()})
    label = {t: f"thread {i}" for i, t in enumerate(threads)}
    slots = [Slot(n, label[t], s, e) for n, (t, s, e) in times.items()]
    return results, Schedule(sorted(slots, key=lambda s: s.start))


# ----------------------------------------------------------------- torch.jit.fork on the CPU
def matmul_chain(x: torch.Tensor, steps: int = 10) -> torch.Tensor:
    """``steps`` dependent products ``y = tanh(y @ x)``: a chain no thread can split."""
    y = x
    for _ in range(steps):
        y = torch.tanh(y @ x)
    return y


def _two_chains_in_sequence(x: torch.Tensor, steps: int) -> torch.Tensor:
    return matmul_chain(x, steps) + matmul_chain(x, steps)


def _two_chains_forked(x: torch.Tensor, steps: int) -> torch.Tensor:
    left = torch.jit.fork(matmul_chain, x, steps)
    right = torch.jit.fork(matmul_chain, x, steps)
    return torch.jit.wait(left) + torch.jit.wait(right)


def two_chains(forked: bool):
    """A TorchScript function computing two independent :func:`matmul_chain` s and adding them.

    ``forked=True`` launches each chain with ``torch.jit.fork`` so TorchScript's inter-op
    thread pool (``torch.get_num_interop_threads()`` threads) may run them at the same time;
    ``forked=False`` runs them one after the other. Call it as ``fn(x, steps)``.
    ``torch.jit.fork`` is deprecated along with TorchScript; it is still the simplest way
    to see inter-op parallelism inside one PyTorch program.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.jit.script(_two_chains_forked if forked else _two_chains_in_sequence)
