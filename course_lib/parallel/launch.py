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
interpreter, not a fork of the caller, so a worker inherits nothing of the caller's memory. What a
worker does once started (collect its job, run it, leave its result) is :mod:`.worker`.

What to run, and the arguments, reach each worker from the caller directly, after it started
(:class:`.rendezvous.Handoff`): no file holds them, and the fork server never sees them. An
argument wrapped in :class:`PerRank` differs by rank, and each worker receives only its own
rank's value: in a check, one rank's code cannot find another rank's inputs in its frames, in
``gc.get_objects()``, in the launch folder or in the fork server, because they are in no process
but their own rank's and the caller's. Workers are non-dumpable (the fork server makes itself so,
and forks inherit it), so a sibling or the server cannot be read or written through ``/proc``
either; the caller is made so too when it ships a stand-in's source (:func:`job_for`).

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

import importlib
import importlib.util
import inspect
import os
import pickle
import re
import signal
import sys
import tempfile
import textwrap
import time
import warnings
from pathlib import Path

import torch

from . import fork_server
from .fork_server import ForkServer, ServerGone
from .rendezvous import (  # noqa: F401 - also launch's names
    HANDOFF_ENV,
    Handoff,
    ephemeral_ports,
    free_port,
    init_process_group,
    workers_store,
)
from .worker import RESULT, Job
from .worker import keep_workers_out as _keep_workers_out


class WorkerFailed(RuntimeError):
    """A worker process exited with an error (its output is in the message)."""


class WorkerKilled(WorkerFailed):
    """A worker was killed by a signal (negative exit code), not by an error in its code."""


class WorkerResultRefused(WorkerFailed):
    """A worker ended without a result, or left one that is not plain data."""


class WorkerTimeout(RuntimeError):
    """The workers did not all finish before the deadline; all of them were killed."""


class PerRank:
    """An argument of :func:`launch` that differs by rank: rank ``r`` is given ``values[r]``, and
    no other rank's value ever reaches its process (see :class:`.rendezvous.Handoff`)."""

    def __init__(self, values):
        self.values = list(values)

    def __repr__(self) -> str:
        return f"PerRank(<{len(self.values)} values>)"


def _payloads(job: Job, args: tuple, kwargs: dict, world_size: int) -> list[bytes]:
    """What each rank receives, pickled: ``(job, args, kwargs)`` with every :class:`PerRank`
    replaced by that rank's value."""
    for value in (*args, *kwargs.values()):
        if isinstance(value, PerRank) and len(value.values) != world_size:
            raise ValueError(f"a PerRank argument holds {len(value.values)} values for {world_size} ranks")

    def mine(value, rank):
        return value.values[rank] if isinstance(value, PerRank) else value

    return [pickle.dumps((job, tuple(mine(a, r) for a in args), {k: mine(v, r) for k, v in kwargs.items()}))
            for r in range(world_size)]


def job_for(fn) -> Job:
    """Describe ``fn`` so a fresh process can find it again.

    Functions (and classes) defined in an importable module travel by name; those defined in a
    notebook or a script (module ``__main__``) travel as their source text (:func:`source_text`). A stand-in for a
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
    return Job(source=source_text(fn), name=fn.__name__)


def source_text(fn) -> str:
    """The source text of a function, or of a class (lessons 10 and 13 ship a student's
    ``DDP`` and ``ShardedOptimizer`` classes to their workers). Python 3.11's ``inspect`` finds a
    class's source only in a module file; a class defined in a notebook cell is found through
    its methods instead (:func:`class_source`)."""
    try:
        return textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError):
        if not inspect.isclass(fn):
            raise
        source = class_source(fn)
        if source is None:
            raise OSError(f"the source text of class {fn.__name__} cannot be found") from None
        return source


def class_source(cls) -> str | None:
    """The text of the ``class`` statement that defined ``cls``, found through the file (or the
    notebook cell, which IPython keeps in ``linecache``) its methods were compiled from; None
    when no method of it leads there."""
    import ast
    import linecache

    for value in vars(cls).values():
        code = getattr(inspect.unwrap(value) if callable(value) else value, "__code__", None)
        lines = linecache.getlines(code.co_filename) if code is not None else []
        if not lines:
            continue
        text = "".join(lines)
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if (isinstance(node, ast.ClassDef) and node.name == cls.__name__
                    and node.lineno <= code.co_firstlineno <= node.end_lineno):
                start = node.decorator_list[0].lineno if node.decorator_list else node.lineno
                return textwrap.dedent("".join(lines[start - 1:node.end_lineno]))
    return None


# what builds DDP, FSDP2, DTensor or torch.distributed.pipelining objects: their constructors
# (or, for pipelining, its import) import torch._dynamo; so does a torch optimizer's first step
# (measured: 1.2 s of CPU alone; lesson 13's graded sharded optimizer steps torch optimizers)
_NEEDS_DYNAMO = re.compile(r"DistributedDataParallel|\bDDP\(|fully_shard|parallelize_module|distribute_tensor|DTensor|"
                           r"\bpipelining\b|\btorch\.optim\.")


def worker_preload(job: Job) -> tuple:
    """What the fork server should import before forking this job's workers
    (:data:`.fork_server.PRELOADABLE`): ``torch._dynamo`` when the job's source text, or its
    module's, builds DDP, FSDP2, DTensor or ``torch.distributed.pipelining`` objects or steps a
    ``torch.optim`` optimizer (they import it), else nothing."""
    text = job.source or ""
    if job.target:
        spec = importlib.util.find_spec(job.target.partition(":")[0])
        try:
            text = Path(spec.origin).read_text() if spec and spec.origin else ""
        except OSError:
            text = ""
    return ("torch._dynamo",) if _NEEDS_DYNAMO.search(text) else ()


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
    ``RANK`` environment variable. Arguments must be picklable; one wrapped in :class:`PerRank`
    gives each rank its own value, and no rank ever holds another's. Results must be plain data
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
    payloads, preload = _payloads(job, args, kwargs, world_size), worker_preload(job)
    try:
        return _launch_once(payloads, timeout, threads, preload)
    except WorkerFailed as exc:
        if GROUP_NOT_FORMED not in str(exc):
            raise
    return _launch_once(payloads, timeout, threads, preload)


GROUP_NOT_FORMED = "connectFullMesh failed"   # gloo's words when the ranks could not connect


def _launch_once(payloads: list[bytes], timeout: float, threads: int, preload: tuple = ()) -> list:
    """Start one worker per payload (rank order), hand each its own, wait for them all
    (``preload``: see :func:`worker_preload`)."""
    world_size = len(payloads)
    store = workers_store(max(timeout, 30.0))
    port = store.port
    with tempfile.TemporaryDirectory(prefix="course-launch-") as tmp:
        tmp = Path(tmp)
        desk = Handoff(str(tmp))
        pids, logs = [], []
        server = fork_server.server()
        deadline = time.monotonic() + timeout
        try:
            for rank in range(world_size):
                log = tmp / f"rank{rank}.log"
                logs.append(log)
                log.touch(mode=0o600)
                env = {**_worker_env(rank, world_size, port, threads), HANDOFF_ENV: desk.address}
                pids.append(server.start(str(tmp), env, str(log), preload=preload))
                desk.expect(pids[-1], rank, payloads[rank])
                desk.serve(deadline)
            while True:
                desk.serve(deadline)
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
            desk.close()
            _kill(pids, server)
            server.forget(pids)
            del store
        return [read_result(tmp / RESULT.format(rank=rank), rank, world_size) for rank in range(world_size)]


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
