"""Start k ``torch.distributed`` worker processes with a deadline (lessons 10, 11 and 13).

A notebook cannot hand a function it defines to ``multiprocessing``'s *spawn* start
method (the child re-imports ``__main__``, which is the kernel, not the notebook), so
:func:`launch` ships each worker *what to run*:

- a function importable from a module (``course_lib.parallel.ddp.train_worker``), or
- the **source text** of a function (a student's cell), executed in a fresh namespace
  that already holds ``torch``, ``nn``, ``F`` and ``dist``. The grader's trusted checker holds
  no student function, only a stand-in that carries the function's source text as
  ``__course_source__``; that text travels the same way.

Workers are forked from a fork server (:mod:`.fork_server`): a process, started by the first
launch, that has imported ``torch`` once. A worker then starts in about 0.1 s of CPU instead
of the 0.9 s a fresh interpreter spends importing ``torch``. The server is an exec'd
interpreter, not a fork of the caller, so a worker inherits nothing of the caller's memory;
what to run reaches it through a file in the launch folder.

Results come back as ``torch.save`` files read with ``torch.load(weights_only=True)``: plain
data (numbers, strings, ``None``, lists, tuples, dicts, sets, tensors, devices, dtypes) and
nothing that can run code in the process that reads them, since workers run code the caller
does not trust (a student's). Arguments go the other way by ``pickle``: the caller trusts itself.

Every worker gets the usual ``torchrun`` environment (``RANK``, ``WORLD_SIZE``,
``LOCAL_RANK``, ``MASTER_ADDR``, ``MASTER_PORT``) and meets the others at a store that the
parent holds, as ``torchrun``'s agent does (:func:`workers_store`), so the same worker code
also runs under ``torchrun``. Each worker lives in its own process group; on a timeout, or as
soon as one worker fails, the parent kills every group and raises an error that names
the rank and shows the end of its output. Nothing is left running.
"""
from __future__ import annotations

import ctypes
import importlib
import inspect
import os
import pickle
import signal
import sys
import tempfile
import textwrap
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from . import fork_server
from .fork_server import ForkServer, ServerGone
from .rendezvous import ephemeral_ports, free_port, init_process_group, workers_store  # noqa: F401 - also launch's names


class WorkerFailed(RuntimeError):
    """A worker process exited with an error (its output is in the message)."""


class WorkerKilled(WorkerFailed):
    """A worker was killed by a signal (negative exit code), not by an error in its code."""


class WorkerResultRefused(WorkerFailed):
    """A worker ended without a result, or left one that is not plain data."""


class WorkerTimeout(RuntimeError):
    """The workers did not all finish before the deadline; all of them were killed."""


@dataclass
class Job:
    """What a worker runs: ``module:qualname`` of a function, or its source text."""

    target: str | None = None
    source: str | None = None
    name: str | None = None


def job_for(fn) -> Job:
    """Describe ``fn`` so a fresh process can find it again.

    Functions defined in an importable module travel by name; functions defined in a
    notebook or a script (module ``__main__``) travel as their source text. A stand-in for a
    notebook function (the grading checker's proxy) travels as the source text it carries in
    ``__course_source__``; one without that text is refused with :class:`ValueError`. Shipping
    such a text makes the calling process non-dumpable (see :func:`_keep_workers_out`).
    """
    if isinstance(fn, str):
        return Job(target=fn)
    if hasattr(fn, "__course_source__"):
        source, name = fn.__course_source__, getattr(fn, "__name__", None)
        if not (isinstance(name, str) and name.isidentifier()):
            raise ValueError("a function without a plain name cannot run in worker processes")
        if not (isinstance(source, str) and source.strip()):
            raise ValueError(f"{name} cannot run in worker processes: its source text is not available "
                             f"(define it with `def {name}(...)` in a cell of its own)")
        _keep_workers_out()
        return Job(source=textwrap.dedent(source), name=name)
    module = getattr(fn, "__module__", "__main__") or "__main__"
    if _importable_by_workers(module):
        mod = importlib.import_module(module)
        if getattr(mod, fn.__qualname__, None) is fn:
            return Job(target=f"{module}:{fn.__qualname__}")
    return Job(source=textwrap.dedent(inspect.getsource(fn)), name=fn.__name__)


def _keep_workers_out() -> None:
    """Make this process non-dumpable (Linux ``prctl(PR_SET_DUMPABLE, 0)``).

    Workers run as the same user as the process that starts them; without this, code in a
    worker could attach to the caller (ptrace) or read its memory and open its files and pipes
    through ``/proc/<pid>/``. Non-dumpable, those need a privilege the workers lack. Called
    where a process that does not run student code (the grader's checker) ships student code."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 4
        except (OSError, AttributeError):
            pass


def _importable_by_workers(module: str) -> bool:
    """Workers see ``course_lib`` and installed packages, not a notebook's or a test's
    own folder, so only those travel by name."""
    if module.split(".")[0] == "course_lib":
        return True
    mod = sys.modules.get(module)
    path = getattr(mod, "__file__", None) or ""
    return "site-packages" in path or "dist-packages" in path


def _worker_env(rank: int, world_size: int, port: int, threads: int) -> dict:
    """What a worker adds to its environment: ``torchrun``'s variables and its thread count."""
    return dict(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world_size),
                LOCAL_WORLD_SIZE=str(world_size), MASTER_ADDR="127.0.0.1",
                MASTER_PORT=str(port), TORCHELASTIC_USE_AGENT_STORE="True", OMP_NUM_THREADS=str(threads),
                MKL_NUM_THREADS=str(threads))


def _kill(pids: list, server: ForkServer) -> None:
    """SIGKILL to the process group of every worker still running; wait (5 s at most) until
    the server reports them ended."""
    try:
        codes = server.exit_codes(pids)
    except ServerGone:
        codes = [None] * len(pids)
    for pid, code in zip(pids, codes):
        if code is None:
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                try:
                    os.kill(pid, signal.SIGKILL)   # not yet in a session of its own
                except (ProcessLookupError, PermissionError):
                    pass
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            if None not in server.exit_codes(pids):
                break
        except ServerGone:
            break
        time.sleep(0.01)


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
    ``RANK`` environment variable. Arguments must be picklable; results must be plain data
    (numbers, strings, ``None``, lists, tuples, dicts, sets, tensors, ``torch.device``): they
    come back through ``torch.load(weights_only=True)``, so a worker cannot make the caller run
    code (:class:`WorkerResultRefused` otherwise).

    Raises :class:`WorkerFailed` as soon as a worker exits with an error (:class:`WorkerKilled`
    when a signal ended it) and :class:`WorkerTimeout` when ``timeout`` seconds pass; both kill
    every worker first. One failure is retried, as ``torchrun --max-restarts=1`` would: gloo
    failing to connect the ranks ("connectFullMesh failed ... Connection closed by peer", in 2
    of 4 full test runs on the loaded 2-core machine, cause not found); the workers are then
    started again, with a new store.
    """
    job = job_for(fn)
    try:
        return _launch_once(job, world_size, args, kwargs, timeout, threads)
    except WorkerFailed as exc:
        if GROUP_NOT_FORMED not in str(exc):
            raise
    return _launch_once(job, world_size, args, kwargs, timeout, threads)


GROUP_NOT_FORMED = "connectFullMesh failed"   # gloo's words when the ranks could not connect


def _launch_once(job: Job, world_size: int, args, kwargs, timeout: float, threads: int) -> list:
    store = workers_store(max(timeout, 30.0))
    port = store.port
    with tempfile.TemporaryDirectory(prefix="course-launch-") as tmp:
        tmp = Path(tmp)
        with (tmp / "job.pkl").open("wb") as fh:
            pickle.dump((job, args, kwargs), fh)
        pids, logs = [], []
        server = fork_server.server()
        try:
            for rank in range(world_size):
                log = tmp / f"rank{rank}.log"
                logs.append(log)
                log.touch(mode=0o600)
                pids.append(server.start(str(tmp), _worker_env(rank, world_size, port, threads), str(log)))
            deadline = time.monotonic() + timeout
            while True:
                codes = server.exit_codes(pids)
                bad = [r for r, c in enumerate(codes) if c not in (None, 0)]
                if bad:
                    rank = bad[0]
                    _kill(pids, server)
                    raise (WorkerKilled if codes[rank] < 0 else WorkerFailed)(
                        f"worker rank {rank} of {world_size} exited with code {codes[rank]}; "
                        f"the other workers were stopped. Its output ends with:\n"
                        f"{_tail(logs[rank])}")
                if all(c == 0 for c in codes):
                    break
                if time.monotonic() > deadline:
                    running = [r for r, c in enumerate(codes) if c is None]
                    _kill(pids, server)
                    raise WorkerTimeout(
                        f"ranks {running} of {world_size} were still running after {timeout:g} s "
                        f"and were killed (a hung collective waits for a peer that never "
                        f"comes). Output of rank {running[0]}:\n{_tail(logs[running[0]])}")
                time.sleep(0.02)
        except ServerGone as exc:
            raise WorkerKilled(f"{exc}\n(the workers it had started were stopped)") from None
        finally:
            _kill(pids, server)
            server.forget(pids)
            del store
        return [read_result(tmp / RESULT.format(rank=rank), rank, world_size) for rank in range(world_size)]


RESULT = "result{rank}.pt"  # a worker's result in the launch folder


def read_result(path: Path, rank: int = 0, world_size: int = 1):
    """The plain data a worker left in ``path``: read by ``torch.load(weights_only=True)``,
    which builds only numbers, strings, containers, tensors, dtypes and devices and calls no
    other function, so a file crafted by the worker's code runs nothing here."""
    try:
        with warnings.catch_warnings():  # e.g. "Detected pickle protocol 4": the file is judged below
            warnings.simplefilter("ignore")
            return torch.load(path, weights_only=True)
    except FileNotFoundError:
        raise WorkerResultRefused(f"worker rank {rank} of {world_size} exited without leaving a result") from None
    except Exception as exc:  # noqa: BLE001 - UnpicklingError, RuntimeError: the file is refused
        raise WorkerResultRefused(
            f"the result of worker rank {rank} of {world_size} was refused: only plain data (numbers, "
            f"strings, None, lists, tuples, dicts, tensors) comes back ({type(exc).__name__}: "
            f"{str(exc)[:300]})") from None


COLLECTIVES = ("all_reduce", "reduce", "all_gather", "all_gather_into_tensor", "all_gather_object",
               "reduce_scatter", "reduce_scatter_tensor", "broadcast", "broadcast_object_list",
               "all_to_all", "all_to_all_single", "scatter", "scatter_object_list", "gather",
               "gather_object", "all_reduce_coalesced", "all_gather_coalesced", "_all_gather_base",
               "_reduce_scatter_base")
# the same operations as methods of the C++ process group and its backends
GROUP_COLLECTIVES = ("allreduce", "allreduce_coalesced", "reduce", "allgather", "allgather_coalesced",
                     "allgather_into_tensor_coalesced", "all_gather_single", "all_gather_single_coalesced",
                     "_allgather_base", "reduce_scatter", "reduce_scatter_single",
                     "reduce_scatter_single_coalesced", "reduce_scatter_tensor_coalesced",
                     "_reduce_scatter_base", "broadcast", "alltoall", "alltoall_base", "all_to_all_single",
                     "scatter", "gather")


def _not_allowed(name: str):
    def blocked(*args, **kwargs):
        raise RuntimeError(f"dist.{name} is not allowed in this exercise: build it from "
                           "dist.send / dist.recv / dist.isend / dist.irecv")
    blocked.__name__ = name
    return blocked


class _PointToPointOnly:
    """``torch.distributed`` without its collectives: for exercises that must build them."""

    BLOCKED = set(COLLECTIVES)

    def __getattr__(self, name):
        if name in self.BLOCKED:
            return _not_allowed(name)
        return getattr(dist, name)


def block_collectives() -> None:
    """Make every collective of this process raise (point-to-point stays): the functions of
    ``torch.distributed`` (however the module is imported again), of its ``distributed_c10d``
    and ``_functional_collectives`` modules, and the methods of the C++ process group and its
    backends.

    A rule kept inside the process that runs the code it restricts: it stops a student who
    calls a collective by any ordinary route, not one who digs the originals out (e.g. through
    the dispatcher's ``torch.ops.c10d`` operators). Values are judged elsewhere, by the caller.
    """
    from torch.distributed import _functional_collectives as funcol
    from torch.distributed import distributed_c10d

    for module in (dist, distributed_c10d):
        for name in COLLECTIVES:
            if hasattr(module, name):
                setattr(module, name, _not_allowed(name))
    for name in dir(funcol):
        if not name.startswith("_") and callable(getattr(funcol, name)) and any(
                word in name for word in ("reduce", "gather", "broadcast", "all_to_all", "scatter")):
            setattr(funcol, name, _not_allowed(name))
    c10d = torch._C._distributed_c10d
    for cls in (c10d.ProcessGroup, c10d.Backend):
        for name in GROUP_COLLECTIVES:
            if hasattr(cls, name):
                setattr(cls, name, _not_allowed(name))


def _resolve(job: Job, point_to_point_only: bool = False):
    """The function a job names, or the one its source text defines (executed in a fresh
    namespace; with ``point_to_point_only`` after :func:`block_collectives`)."""
    if job.target:
        module, _, qualname = job.target.partition(":")
        obj = importlib.import_module(module)
        for part in qualname.split("."):
            obj = getattr(obj, part)
        return obj
    if point_to_point_only:
        block_collectives()
    namespace = {"torch": torch, "dist": _PointToPointOnly() if point_to_point_only else dist,
                 "nn": nn, "F": F, "__name__": "__student__"}
    exec(compile(job.source, f"<shipped source of {job.name}>", "exec"), namespace)
    if not callable(namespace.get(job.name)):
        raise TypeError(f"the shipped source does not define a function {job.name}")
    return namespace[job.name]


def _main(folder: str) -> None:
    """Run the job, write this rank's result, and end the process without interpreter
    finalization: a gloo process group still alive then (a worker that never called
    ``destroy_process_group``) has C++ threads that abort the process while Python is torn
    down ("terminate called without an active exception", pytorch/pytorch#190489)."""
    tmp = Path(folder)
    code = 1
    try:
        with (tmp / "job.pkl").open("rb") as fh:
            job, args, kwargs = pickle.load(fh)
        torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
        result = _resolve(job)(*args, **kwargs)
        rank = int(os.environ["RANK"])
        done = tmp / RESULT.format(rank=rank)
        torch.save(result, done.with_suffix(".part"))
        os.replace(done.with_suffix(".part"), done)
        code = 0
    except SystemExit as exc:  # sys.exit(n) in the job: the process ends with n, as it would
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if exc.code is not None and not isinstance(exc.code, int):
            print(exc.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001 - shown in the rank's log, which the parent reports
        import traceback

        traceback.print_exc()
    finally:
        if dist.is_available() and dist.is_initialized():
            try:
                dist.destroy_process_group()
            except Exception:  # noqa: BLE001 - a peer that already left; the exit code says enough
                pass
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)

