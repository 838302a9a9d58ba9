"""A teaching model of asynchronous execution: a frontend enqueues, a backend executes (lesson 06).

PyTorch on a GPU works like this: the Python *frontend* thread only *issues* an
operation (a kernel launch goes into a CUDA stream, a FIFO queue) and returns at once;
the GPU, the *backend*, executes the queue in order. The frontend waits only at a
*synchronization point*: reading a value (`.item()`, `print`, `.cpu()`) or an explicit
`torch.cuda.synchronize()`.

:class:`AsyncBackend` reproduces that with real threads and a real :class:`queue.Queue`,
so the effect can be measured on any machine:

- ``submit(fn)`` is the launch: it puts ``fn`` in the queue and returns a
  :class:`LazyValue` at once;
- a backend thread executes queued functions one by one, in order;
- ``LazyValue.item()`` / ``print(value)`` / ``value.cpu()`` block until that value is
  computed; ``AsyncBackend.synchronize()`` blocks until the queue is empty.

Costs follow *Dive into Deep Learning* (Zhang, Lipton, Li, Smola), section "Asynchronous
Computation", https://d2l.ai/chapter_computational-performance/async-computation.html:
issuing a task costs the frontend ``t1`` seconds, executing it costs the backend ``t2``,
returning its result to Python costs ``t3``. Waiting after every task takes about
``N (t1 + t2 + t3)``; issuing all of them and waiting once takes
``max(t1 + N t2, N t1 + t2) + t3`` (which is ``t1 + N t2 + t3`` when ``t2 >= t1``).

The model measures how many tasks are *in flight* (issued, not finished) and how many
bytes each holds until it has run: with an unbounded queue and a fast frontend that number
grows with N. In PyTorch this is not device memory (the CUDA caching allocator hands a
tensor freed by Python to the next allocation on the same stream, which can only run after
the kernels already queued), but what the frontend keeps alive for queued work: pinned host
buffers of ``non_blocking`` copies, batches the data loader made, launches waiting in the
stream. ``max_in_flight`` bounds it, as one ``.item()`` per batch does.
"""
from __future__ import annotations

import queue
import statistics
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

import matplotlib.pyplot as plt
import torch

from .timing import synchronize

_NOT_READY = object()


def sleep_task(seconds: float) -> Callable[[], float]:
    """A backend task that takes ``seconds`` (sleeping, so it runs beside the frontend)."""
    def task() -> float:
        time.sleep(seconds)
        return seconds

    task.__name__ = f"sleep_{seconds:g}s"
    return task


class LazyValue:
    """The result of a queued task: like a CUDA tensor whose kernel may not have run yet.

    Reading it (``item()``, ``cpu()``, ``repr``/``print``) blocks until it is computed
    and counts as one synchronization point of its backend.
    """
    def __init__(self, backend: "AsyncBackend", nbytes: int = 0):
        self._backend = backend
        self._done = threading.Event()
        self._value = _NOT_READY
        self._error: BaseException | None = None
        self.nbytes = nbytes

    def ready(self) -> bool:
        """True when the backend has computed this value (never blocks)."""
        return self._done.is_set()

    def _set(self, value=None, error: BaseException | None = None) -> None:
        self._value, self._error = value, error
        self._done.set()

    def wait(self):
        """Block until computed; return the value (re-raise the task's error)."""
        self._backend.sync_points += 1
        self._done.wait()
        if self._error is not None:
            raise self._error
        return self._value

    def item(self):
        """Like ``tensor.item()``: a synchronization point that returns the value."""
        return self.wait()

    def cpu(self):
        """Like ``tensor.cpu()``: copying to the host must wait for the value."""
        return self.wait()

    def __repr__(self) -> str:
        return f"LazyValue({self.wait()!r})"


@dataclass
class Sample:
    """One point of an :class:`AsyncBackend` timeline (seconds since it started)."""
    seconds: float
    in_flight: int
    bytes_in_flight: int


class AsyncBackend:
    """A backend thread that executes queued tasks in order (one CUDA stream, modelled).

    ``max_in_flight`` bounds the tasks issued but not finished: ``submit`` blocks while
    that many are pending (None: unbounded, like a CUDA stream with no sync point).
    Use it as a context manager, or call :meth:`close` when done.
    """
    def __init__(self, max_in_flight: int | None = None):
        if max_in_flight is not None and max_in_flight < 1:
            raise ValueError("max_in_flight must be at least 1 (or None for unbounded)")
        self.max_in_flight = max_in_flight
        self._queue: queue.Queue = queue.Queue()
        self._slots = threading.BoundedSemaphore(max_in_flight) if max_in_flight else None
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._in_flight = 0
        self._bytes = 0
        self._start = time.perf_counter()
        self.timeline: list[Sample] = [Sample(0.0, 0, 0)]
        self.sync_points = 0
        self.executed = 0
        self._thread = threading.Thread(target=self._run, name="async-backend", daemon=True)
        self._thread.start()

    # -- frontend side -------------------------------------------------------------
    def submit(self, fn: Callable[[], object], nbytes: int = 0, hold: object = None) -> LazyValue:
        """Enqueue ``fn`` and return its :class:`LazyValue` without waiting for it.

        ``nbytes`` is the memory the task keeps alive until it has run (its input batch,
        its activations); ``hold`` is an object kept referenced until then (a real buffer).
        """
        if self._slots is not None:
            self._slots.acquire()
        value = LazyValue(self, nbytes)
        with self._lock:
            self._in_flight += 1
            self._bytes += nbytes
            self._record()
        self._queue.put((fn, value, hold))
        return value

    def synchronize(self) -> None:
        """Block until every queued task has run (``torch.cuda.synchronize()``)."""
        self.sync_points += 1
        with self._idle:
            self._idle.wait_for(lambda: self._in_flight == 0)

    @property
    def in_flight(self) -> int:
        """Tasks issued and not finished yet."""
        return self._in_flight

    @property
    def peak_in_flight(self) -> int:
        return max(s.in_flight for s in self.timeline)

    @property
    def peak_bytes(self) -> int:
        """Most bytes held at once by tasks in flight."""
        return max(s.bytes_in_flight for s in self.timeline)

    def close(self) -> None:
        """Finish the queued work and stop the backend thread."""
        self._queue.put(None)
        self._thread.join()

    def __enter__(self) -> "AsyncBackend":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- backend side ----------------------------------------------------------------
    def _record(self) -> None:
        self.timeline.append(Sample(time.perf_counter() - self._start, self._in_flight, self._bytes))

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            fn, value, hold = item
            try:
                value._set(fn())
            except BaseException as exc:  # noqa: BLE001 - handed to whoever reads the value
                value._set(error=exc)
            del hold, item
            with self._idle:
                self._in_flight -= 1
                self._bytes -= value.nbytes
                self.executed += 1
                self._record()
                self._idle.notify_all()
            if self._slots is not None:
                self._slots.release()


# ----------------------------------------------------------------- the backlog model
def predicted_peak_in_flight(n: int, t1: float, t2: float, max_in_flight: int | None = None) -> int:
    """Most tasks in flight at once when ``n`` tasks are issued back to back (about
    n (1 - t1/t2) unbounded when the backend is slower), stepping through the run exactly.

    The frontend issues task k ``t1`` seconds after it issued task k-1, but with a bound of
    ``m`` tasks in flight it must first wait for task k-m to finish. The backend starts task
    k when it has finished task k-1 and task k has been issued, and runs it ``t2`` seconds.
    (The run's total time is lesson 06's exercise: the lecture derives it.)
    """
    issued: list[float] = []
    finished: list[float] = []
    peak = 0
    for k in range(max(0, n)):
        issue = (issued[-1] if issued else 0.0) + t1
        if max_in_flight is not None and k >= max_in_flight:
            issue = max(issue, finished[k - max_in_flight])
        peak = max(peak, 1 + sum(1 for f in finished if f > issue))
        finished.append(max(finished[-1] if finished else 0.0, issue) + t2)
        issued.append(issue)
    return peak


# ----------------------------------------------------------------- measured runs
@dataclass
class RunReport:
    """What one run of :func:`run_tasks` measured. Times in seconds, memory in bytes."""
    mode: str
    n: int
    seconds: float
    frontend_seconds: float
    peak_in_flight: int
    peak_bytes: int
    timeline: list[Sample] = field(repr=False)


def run_tasks(n: int, t1: float, t2: float, t3: float, mode: str = "async",
              max_in_flight: int | None = None, bytes_per_task: int = 0) -> RunReport:
    """Issue ``n`` tasks to an :class:`AsyncBackend` and measure the wall time.

    The frontend spends ``t1`` per task issuing it, the backend ``t2`` running it, and
    reading a result back costs the frontend ``t3`` (all modelled with ``time.sleep``, which
    releases the GIL, so the two threads really run side by side). ``mode='sync'`` reads every
    result before issuing the next (``.item()`` in the loop); ``mode='async'`` reads only
    the last one. Each task holds a real ``bytes_per_task`` buffer until it has run.
    """
    if mode not in ("sync", "async"):
        raise ValueError("mode is 'sync' or 'async'")
    start = time.perf_counter()
    with AsyncBackend(max_in_flight=max_in_flight) as backend:
        last = None
        for _ in range(n):
            time.sleep(t1)
            buffer = bytearray(bytes_per_task)
            last = backend.submit(sleep_task(t2), nbytes=bytes_per_task, hold=buffer)
            del buffer
            if mode == "sync":
                last.item()
                time.sleep(t3)
        frontend_seconds = time.perf_counter() - start
        if mode == "async" and last is not None:
            last.item()
            time.sleep(t3)
        seconds = time.perf_counter() - start
    return RunReport(mode, n, seconds, frontend_seconds, backend.peak_in_flight,
                     backend.peak_bytes, backend.timeline)


def plot_in_flight(reports: list[RunReport], ax=None):
    """Tasks in flight over time for each report (a step plot); returns the axes."""
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 3))
    for report in reports:
        label = report.mode + (f" ({report.peak_in_flight} peak)")
        ax.step([s.seconds * 1e3 for s in report.timeline],
                [s.in_flight for s in report.timeline], where="post", label=label)
    ax.set_xlabel("time since start (ms)")
    ax.set_ylabel("tasks in flight")
    ax.legend()
    return ax


# ----------------------------------------------------------------- the real thing (CUDA)
def cuda_enqueue_and_finish(n: int = 10, size: int = 4096, device="cuda") -> tuple[float, float]:
    """(seconds until ``n`` matmuls of ``size`` x ``size`` are *issued*, seconds until they *finish*).

    On a CUDA device the first figure is tiny: the Python thread only queued the kernels.
    On the CPU, PyTorch computes each operator before returning, so both are the same.
    """


    a = torch.randn(size, size, device=device)
    a @ a  # warm-up: cuBLAS handle, kernel selection
    synchronize(device)
    start = time.perf_counter()
    for _ in range(n):
        a @ a
    issued = time.perf_counter() - start
    synchronize(device)
    return issued, time.perf_counter() - start


def cuda_event_seconds(fn: Callable[[], object], repeat: int = 10) -> float:
    """Median seconds of ``fn()`` measured on the GPU with CUDA events (needs a CUDA GPU).

    Events are recorded into the stream around the work; ``elapsed_time`` is read only after
    the end event has completed, so the queue is measured, not the launch.
    """


    fn()
    times = []
    for _ in range(repeat):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)  # elapsed_time is in milliseconds
    return statistics.median(times)
