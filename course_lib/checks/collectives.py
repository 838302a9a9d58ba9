"""The check behind lesson 11's graded allreduce: run the student's ``fn(tensor)`` on several
gloo processes (shipped as source, see :func:`course_lib.parallel.launch.job_for`) and judge the
result against the sum of the inputs.

The task is an allreduce *in place*: afterwards the tensor the function was given holds the
sum, and the function returns that same tensor. The check therefore measures three things
separately: the value returned, the value left in the input tensor, and whether the returned
object is the input.

The work is split in two, because the worker processes run the student's code:

* :func:`student_worker` (in each worker) calls the function on the tensors it is given and
  sends back raw observations only: what each call returned, the input tensor afterwards,
  whether the call returned its input, and the ``course_lib`` modules the function imported;
* :func:`check_allreduce` (in the calling process, the grader's checker when grading) chooses
  every rank's inputs, computes their sums itself and every difference, and reads the
  workers' results only as plain data (:func:`course_lib.parallel.launch.read_result`).

Each worker receives its own rank's tensors and nothing of the others' (``launch.PerRank``), and
they are drawn from a seed chosen afresh by the checker for each check (never a fixed one that
the function could replay): a function that does not communicate cannot know the sum.

With ``point_to_point_only`` the workers refuse the built-in collectives
(:func:`course_lib.parallel.worker.block_collectives`). That rule, the identity of the returned
object and the list of imported modules are kept or observed inside the workers, so code that
rewrites a worker can get around them; the sums cannot be misreported that way.
"""
from __future__ import annotations

import secrets
import sys

import torch
import torch.distributed as dist

from ..parallel.launch import PerRank, init_process_group, job_for, launch
from ..parallel.worker import resolve
from .unanswered import refuse_unanswered
from .worker_results import MalformedResult, difference, worst


def _shape(size) -> tuple[int, ...]:
    return tuple(size) if isinstance(size, (tuple, list)) else (int(size),)


def _inputs(world_size: int, shapes: list, seed: int | None = None) -> list[list[torch.Tensor]]:
    """Random float64 tensors, ``[rank][call]``: what each rank's function is given, drawn from
    ``seed`` (by default a fresh secret one, from the operating system)."""
    gen = torch.Generator().manual_seed(secrets.randbits(63) if seed is None else seed)
    return [[torch.randn(shape, generator=gen, dtype=torch.float64) for shape in shapes]
            for _ in range(world_size)]


def _plain(value):
    """What a call returned, as plain data: a CPU tensor, None, or the name of its type."""
    if value is None:
        return None
    if torch.is_tensor(value):
        return value.detach().cpu().as_subclass(torch.Tensor).clone()
    return f"an object of type {type(value).__name__}"


def student_worker(job, inputs: list, point_to_point_only: bool = True) -> dict:
    """Worker: run a shipped allreduce function (see :func:`launch.job_for`) on each of this
    rank's tensors ``inputs`` (one per call; the other ranks' never reach this process).

    Returns raw data only: ``{"calls": [{"returned": a tensor, None or a type's name,
    "input_after": the tensor passed in, after the call, "returns_input": the call returned
    that very tensor}], "library_modules": course_lib modules it imported}``."""
    init_process_group("gloo", timeout=60)
    mine = [x.clone() for x in inputs]
    loaded_before = set(sys.modules)
    fn = resolve(job, point_to_point_only)
    calls = []
    for x in mine:
        got = fn(x)
        calls.append({"returned": _plain(got), "input_after": x.detach().clone(), "returns_input": got is x})
    library = sorted(m for m in set(sys.modules) - loaded_before if m.split(".")[0] == "course_lib")
    dist.destroy_process_group()
    return {"calls": calls, "library_modules": library}


def _raw_calls(result, rank: int, shapes: list) -> dict:
    """A worker's raw data, checked for kind and shape before anything is computed from it."""
    def refuse(what):
        raise MalformedResult(f"rank {rank} sent back malformed data ({what})")

    if type(result) is not dict or set(result) != {"calls", "library_modules"}:
        refuse("not the dict student_worker returns")
    calls, library = result["calls"], result["library_modules"]
    if type(library) is not list or not all(type(m) is str for m in library):
        refuse("module names")
    if type(calls) is not list or len(calls) != len(shapes):
        refuse("one entry per call")
    for call, shape in zip(calls, shapes):
        if type(call) is not dict or set(call) != {"returned", "input_after", "returns_input"}:
            refuse("a call")
        if type(call["input_after"]) is not torch.Tensor or tuple(call["input_after"].shape) != shape:
            refuse("the input tensor after the call")
        if not (call["returned"] is None or type(call["returned"]) in (torch.Tensor, str)):
            refuse("the returned value")
        if type(call["returns_input"]) is not bool:
            refuse("returns_input")
    return {"calls": calls, "library_modules": library}


def check_allreduce(fn, world_size: int = 3, sizes=(1, 5, 12, 100), timeout: float = 60.0,
                    point_to_point_only: bool = True) -> dict:
    """Run ``fn(tensor)`` (a function from a notebook, or the grader's stand-in for one, shipped
    as source) on ``world_size`` gloo processes, on every size in ``sizes`` (ints or shape
    tuples), and judge what they send back here.

    Returns, over all ranks and sizes: ``error`` (worst difference of the returned value from
    the sum over ranks of their inputs; the input tensor counts when the function returned
    None; inf for a wrong shape), ``in_place_error`` (the same for the tensor passed in, after
    the call), ``returns_input`` (always returned the tensor it was given) and
    ``library_modules`` (``course_lib`` modules the function imported). With
    ``point_to_point_only`` the function may use only send/recv."""
    shapes = [_shape(s) for s in sizes]
    inputs = _inputs(world_size, shapes)
    refuse_unanswered(fn)   # its workers would end with a traceback of their own
    results = launch(student_worker, world_size, job_for(fn), PerRank(inputs),
                     point_to_point_only=point_to_point_only, timeout=timeout)
    raw = [_raw_calls(r, rank, shapes) for rank, r in enumerate(results)]
    sums = [sum(inputs[rank][i] for rank in range(world_size)) for i in range(len(shapes))]
    errors, in_place = [], []
    for r in raw:
        for call, total in zip(r["calls"], sums):
            got = call["input_after"] if call["returned"] is None else call["returned"]
            errors.append(difference(got, total))
            in_place.append(difference(call["input_after"], total))
    return {"error": worst(errors), "in_place_error": worst(in_place),
            "returns_input": all(call["returns_input"] for r in raw for call in r["calls"]),
            "library_modules": sorted({m for r in raw for m in r["library_modules"]})}
