"""The worker's side of :func:`course_lib.parallel.launch.launch` (lessons 10, 11 and 13).

A worker is a child of the fork server (:mod:`.fork_server`), which calls :func:`main` in it.
:func:`main` makes the process non-dumpable, collects this rank's job and arguments from the
launcher (:func:`.rendezvous.collect_inputs`: only this rank's, never another's), finds the
function (:func:`resolve`: by name, or by executing a shipped source text in a fresh namespace,
after :func:`block_collectives` for exercises that must build collectives from send and recv),
runs it and leaves its result in the launch folder (``RESULT``), which the launcher reads as plain
data only. The launcher's side (starting, watching and killing workers) is in :mod:`.launch`;
this module imports nothing of it, so the fork server, which imports this module, and the
launcher, which imports the fork server, form no circle.
"""
from __future__ import annotations

import ctypes
import importlib
import os
import pickle
import sys
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from .rendezvous import collect_inputs

RESULT = "result{rank}.pt"  # a worker's result in the launch folder


@dataclass
class Job:
    """What a worker runs: ``module:qualname`` of a function, or its source text."""

    target: str | None = None
    source: str | None = None
    name: str | None = None


def keep_workers_out() -> None:
    """Make this process non-dumpable (Linux ``prctl(PR_SET_DUMPABLE, 0)``).

    Workers run as the same user as the process that starts them; without this, code in a
    worker could attach to the caller (ptrace) or read its memory and open its files and pipes
    through ``/proc/<pid>/``. Non-dumpable, those need a privilege the workers lack. Called
    where a process that does not run student code (the grader's checker) ships student code,
    by the fork server, and by each worker before it collects its inputs (so a sibling cannot
    read them out of its memory)."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 4
        except (OSError, AttributeError):
            pass


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


def resolve(job: Job, point_to_point_only: bool = False):
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


def main(folder: str) -> None:
    """Collect this rank's job and arguments from the launcher (:func:`.rendezvous.collect_inputs`;
    this process is made non-dumpable first, as the fork server already made it), run the job,
    write this rank's result, and end the process without interpreter
    finalization: a gloo process group still alive then (a worker that never called
    ``destroy_process_group``) has C++ threads that abort the process while Python is torn
    down ("terminate called without an active exception", pytorch/pytorch#190489)."""
    tmp = Path(folder)
    code = 1
    try:
        keep_workers_out()
        job, args, kwargs = pickle.loads(collect_inputs())
        torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
        result = resolve(job)(*args, **kwargs)
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
