"""Start k ``torch.distributed`` worker processes with a deadline (lessons 10, 11 and 13).

A notebook cannot hand a function it defines to ``multiprocessing``'s *spawn* start
method (the child re-imports ``__main__``, which is the kernel, not the notebook), so
:func:`launch` runs workers as fresh ``python -m course_lib.parallel.launch`` processes
and ships each one *what to run*:

- a function importable from a module (``course_lib.parallel.ddp.train_worker``), or
- the **source text** of a function (a student's cell), executed in a fresh namespace
  that already holds ``torch``, ``nn``, ``F`` and ``dist``.

Every worker gets the usual ``torchrun`` environment (``RANK``, ``WORLD_SIZE``,
``LOCAL_RANK``, ``MASTER_ADDR``, ``MASTER_PORT``), so the same worker code also runs
under ``torchrun``. Each worker lives in its own process group; on a timeout, or as
soon as one worker fails, the parent kills every group and raises an error that names
the rank and shows the end of its output. Nothing is left running.
"""
from __future__ import annotations

import datetime
import importlib
import inspect
import os
import pickle
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn


class WorkerFailed(RuntimeError):
    """A worker process exited with an error (its output is in the message)."""


class WorkerKilled(WorkerFailed):
    """A worker was killed by a signal (negative exit code), not by an error in its code."""


class WorkerTimeout(RuntimeError):
    """The workers did not all finish before the deadline; all of them were killed."""


@dataclass
class Job:
    """What a worker runs: ``module:qualname`` of a function, or its source text."""

    target: str | None = None
    source: str | None = None
    name: str | None = None


def free_port() -> int:
    """A TCP port on localhost that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def job_for(fn) -> Job:
    """Describe ``fn`` so a fresh process can find it again.

    Functions defined in an importable module travel by name; functions defined in a
    notebook or a script (module ``__main__``) travel as their source text.
    """
    if isinstance(fn, str):
        return Job(target=fn)
    module = getattr(fn, "__module__", "__main__") or "__main__"
    if _importable_by_workers(module):
        mod = importlib.import_module(module)
        if getattr(mod, fn.__qualname__, None) is fn:
            return Job(target=f"{module}:{fn.__qualname__}")
    return Job(source=textwrap.dedent(inspect.getsource(fn)), name=fn.__name__)


def _importable_by_workers(module: str) -> bool:
    """Workers see ``course_lib`` and installed packages, not a notebook's or a test's
    own folder, so only those travel by name."""
    if module.split(".")[0] == "course_lib":
        return True
    mod = sys.modules.get(module)
    path = getattr(mod, "__file__", None) or ""
    return "site-packages" in path or "dist-packages" in path


def _worker_env(rank: int, world_size: int, port: int, threads: int) -> dict:
    env = dict(os.environ)
    env.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world_size),
               LOCAL_WORLD_SIZE=str(world_size), MASTER_ADDR="127.0.0.1",
               MASTER_PORT=str(port), OMP_NUM_THREADS=str(threads),
               MKL_NUM_THREADS=str(threads), PYTHONWARNINGS="ignore",
               TORCH_CPP_LOG_LEVEL="ERROR")
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def _kill(procs) -> None:
    for proc in procs:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                proc.kill()
    for proc in procs:
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass


def _tail(path: Path, chars: int = 1500) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return text[-chars:].strip()


def launch(fn, world_size: int, *args, timeout: float = 60.0, threads: int = 1,
           **kwargs) -> list:
    """Run ``fn(*args, **kwargs)`` in ``world_size`` processes; return their results by rank.

    ``fn`` is a function (importable, or defined in a notebook: then its source is
    shipped, so it must import what it uses itself or use ``torch``, ``nn``, ``F``,
    ``dist``), or a string ``"module:function"``. Inside, each worker reads its rank
    from ``dist.get_rank()`` after calling :func:`init_process_group`, or from the
    ``RANK`` environment variable. Arguments and results must be picklable.

    Raises :class:`WorkerFailed` as soon as a worker exits with an error and
    :class:`WorkerTimeout` when ``timeout`` seconds pass; both kill every worker first.
    A worker killed by a signal (gloo's threads sometimes abort a process on a loaded
    machine: "terminate called without an active exception") gets the job run once more;
    an ordinary error in the code is reported at once.
    """
    try:
        return _launch_once(fn, world_size, *args, timeout=timeout, threads=threads, **kwargs)
    except WorkerKilled:
        return _launch_once(fn, world_size, *args, timeout=timeout, threads=threads, **kwargs)


def _launch_once(fn, world_size: int, *args, timeout: float = 60.0, threads: int = 1, **kwargs) -> list:
    """One attempt of :func:`launch`."""
    job = job_for(fn)
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="course-launch-") as tmp:
        tmp = Path(tmp)
        with (tmp / "job.pkl").open("wb") as fh:
            pickle.dump((job, args, kwargs), fh)
        procs, logs = [], []
        try:
            for rank in range(world_size):
                log = tmp / f"rank{rank}.log"
                logs.append(log)
                with log.open("wb") as out:
                    procs.append(subprocess.Popen(
                        [sys.executable, "-m", "course_lib.parallel.launch", str(tmp)],
                        env=_worker_env(rank, world_size, port, threads), stdout=out,
                        stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                        start_new_session=True))
            deadline = time.monotonic() + timeout
            while True:
                codes = [p.poll() for p in procs]
                bad = [r for r, c in enumerate(codes) if c not in (None, 0)]
                if bad:
                    rank = bad[0]
                    _kill(procs)
                    raise (WorkerKilled if codes[rank] < 0 else WorkerFailed)(
                        f"worker rank {rank} of {world_size} exited with code {codes[rank]}; "
                        f"the other workers were stopped. Its output ends with:\n"
                        f"{_tail(logs[rank])}")
                if all(c == 0 for c in codes):
                    break
                if time.monotonic() > deadline:
                    running = [r for r, c in enumerate(codes) if c is None]
                    _kill(procs)
                    raise WorkerTimeout(
                        f"ranks {running} of {world_size} were still running after {timeout:g} s "
                        f"and were killed (a hung collective waits for a peer that never "
                        f"comes). Output of rank {running[0]}:\n{_tail(logs[running[0]])}")
                time.sleep(0.02)
        finally:
            _kill(procs)
        results = []
        for rank in range(world_size):
            with (tmp / f"result{rank}.pkl").open("rb") as fh:
                results.append(pickle.load(fh))
        return results


class _PointToPointOnly:
    """``torch.distributed`` without its collectives: for exercises that must build them."""

    BLOCKED = {"all_reduce", "reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter",
               "reduce_scatter_tensor", "broadcast", "all_to_all", "all_reduce_coalesced"}

    def __getattr__(self, name):
        if name in self.BLOCKED:
            raise RuntimeError(f"dist.{name} is not allowed in this exercise: build it from "
                               "dist.send / dist.recv / dist.isend / dist.irecv")
        return getattr(dist, name)


def _resolve(job: Job, point_to_point_only: bool = False):
    if job.target:
        module, _, qualname = job.target.partition(":")
        obj = importlib.import_module(module)
        for part in qualname.split("."):
            obj = getattr(obj, part)
        return obj
    namespace = {"torch": torch, "dist": _PointToPointOnly() if point_to_point_only else dist,
                 "nn": nn, "F": F, "__name__": "__student__"}
    exec(compile(job.source, f"<shipped source of {job.name}>", "exec"), namespace)
    return namespace[job.name]


def _main(folder: str) -> None:
    tmp = Path(folder)
    with (tmp / "job.pkl").open("rb") as fh:
        job, args, kwargs = pickle.load(fh)
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    result = _resolve(job)(*args, **kwargs)
    rank = int(os.environ["RANK"])
    with (tmp / f"result{rank}.pkl.part").open("wb") as fh:
        pickle.dump(result, fh)
    os.replace(tmp / f"result{rank}.pkl.part", tmp / f"result{rank}.pkl")


def init_process_group(backend: str | None = None, timeout: float = 30.0):
    """Join the process group described by the environment (as ``torchrun`` sets it).

    ``backend`` defaults to NCCL when this machine has a CUDA GPU for every local process
    (``LOCAL_WORLD_SIZE``), gloo on the CPU otherwise: NCCL refuses two ranks on one GPU.
    ``timeout`` (seconds) bounds every collective, so a missing peer becomes an error.
    Returns ``(rank, world_size, device)``.
    """
    if backend is None:
        local = int(os.environ.get("LOCAL_WORLD_SIZE", os.environ.get("WORLD_SIZE", "1")))
        enough = torch.cuda.is_available() and torch.cuda.device_count() >= local
        backend = "nccl" if enough else "gloo"
    if not dist.is_initialized():
        dist.init_process_group(backend, timeout=datetime.timedelta(seconds=timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    if backend == "nccl":
        local = int(os.environ.get("LOCAL_RANK", rank)) % torch.cuda.device_count()
        torch.cuda.set_device(local)
        device = torch.device("cuda", local)
    else:
        device = torch.device("cpu")
    return rank, world, device


if __name__ == "__main__":
    _main(sys.argv[1])
