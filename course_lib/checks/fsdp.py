"""The check behind lesson 13's graded FSDP container: run the student's
``FSDP(module, compute_dtype=None)`` on gloo processes and judge what they send back here.

:func:`fsdp_worker` (in each worker, which runs the student's code) builds the model from the
starting state (every rank the same), wraps it, builds ``torch.optim.SGD`` (momentum 0.9) on
what the container's ``parameters()`` yields (this rank's flat shards), trains a few steps on
this rank's share of each batch (``finish_gradient_synchronization()`` after each backward),
and sends back raw data only: the shapes and dtypes of the shards, the full parameters
``gather_full_params()`` returns at the end, every collective issued during each step's forward
and backward (:class:`course_lib.parallel.fsdp.CollectiveLog`), and the parameter bytes held
(:class:`course_lib.parallel.fsdp.ParameterBytes`): the largest sample while a step runs (at
each unit's forward, at the end of the forward, at each unit's output gradient and each shard's
gradient in backward) and the largest between steps. torch's FSDP (``torch.distributed.fsdp``:
``fully_shard``, ``FullyShardedDataParallel``) is switched off there.

:func:`check_fsdp` (in the caller, the grader's checker when grading) draws the model and data
from a fresh secret seed, trains one process on the whole batches (in ``compute_dtype`` when one
is given: each unit's parameters and floating inputs cast to it, fp32 master weights; PyTorch's
autocast-free mixed precision as FSDP2's ``MixedPrecisionPolicy`` does it), and computes every
difference, the bytes lecture 13's formula expects (:func:`course_lib.parallel.fsdp.traffic_per_step`)
and the memory budgets. The collective log and the bytes are observed inside the worker, so they
are as trustworthy as the worker; the parameters cannot be misreported that way.
"""
from __future__ import annotations

import secrets
import sys
import types

import torch
import torch.nn.functional as F
from torch import nn

from ..parallel import fsdp
from ..parallel.launch import PerRank, init_process_group, job_for, launch
from ..parallel.worker import resolve
from .shipped import once_per_submission, shippable
from .unanswered import refuse_unanswered
from .worker_results import MalformedResult, difference, worst

STEPS, LR, MOMENTUM = 3, 0.1, 0.9
DTYPES = {None: None, "float16": torch.float16, "bfloat16": torch.bfloat16}


def switch_off_torch_fsdp() -> None:
    """Make ``torch.distributed.fsdp`` (``fully_shard``, ``FullyShardedDataParallel`` and every
    submodule) unusable in this worker without importing it: a stand-in module answers."""
    def refused(*args, **kwargs):
        raise RuntimeError("torch's FSDP is switched off in this check: write the container yourself "
                           "from torch.distributed's collectives")

    stub = types.ModuleType("torch.distributed.fsdp")
    stub.fully_shard = stub.FullyShardedDataParallel = stub.MixedPrecisionPolicy = refused
    sys.modules["torch.distributed.fsdp"] = stub


def _sampling_hooks(memory, container, unit_modules, shards) -> list:
    """Samples of ``memory`` at each unit's forward (its tensor attributes recorded), at each
    unit's output gradient and at each shard's gradient; returns the handles."""
    def in_backward(*_):
        memory.sample(container)   # returns None: the gradient is left as it is

    def at_unit(module, args, output=None):
        memory.sample(container, dict(vars(module)))
        if torch.is_tensor(output) and output.requires_grad:
            output.register_hook(in_backward)

    handles = []
    for m in unit_modules:
        handles += [m.register_forward_pre_hook(at_unit), m.register_forward_hook(at_unit)]
    for p in shards:
        if isinstance(p, torch.Tensor) and p.requires_grad:
            handles.append(p.register_post_accumulate_grad_hook(in_backward))
    return handles


def fsdp_worker(job, model_name: str, state: dict, shares: list, compute_dtype: str | None) -> dict:
    """Worker: the model from ``state`` wrapped in the shipped ``FSDP``, SGD with momentum on its
    ``parameters()``, one step per ``(X, y)`` of ``shares``. Returns ``{"shards": [(elements,
    dtype)], "final": gather_full_params(), "calls": collectives per step, "peak": parameter bytes,
    largest while a step runs, "between": largest between steps}``."""
    init_process_group("gloo", timeout=60)
    switch_off_torch_fsdp()
    model = fsdp.make_model(model_name, 0)
    model.load_state_dict(state)
    unit_modules = fsdp.units(model)
    memory = fsdp.ParameterBytes([p.shape for p in model.parameters()])
    [memory.add(p) for p in model.parameters()]   # the originals (no loop variable keeps one alive)
    log = fsdp.CollectiveLog(on_output=memory.add)
    try:
        container = resolve(job)(model, compute_dtype=DTYPES[compute_dtype])
        shards = list(container.parameters())
        handles = _sampling_hooks(memory, container, unit_modules, shards)
        between = before = memory.sample(container)
        optimizer = torch.optim.SGD(shards, lr=LR, momentum=MOMENTUM)
        for X, y in shares:
            optimizer.zero_grad()
            log.step()
            with memory.saving():
                out = container(X)
            memory.sample(container)
            F.cross_entropy(out.float(), y).backward()
            container.finish_gradient_synchronization()
            log.stop()
            del out
            optimizer.step()
            between = max(between, memory.sample(container, settle_to=before))
        peak = memory.peak
        for h in handles:
            h.remove()
        final = container.gather_full_params()
    finally:
        log.remove()
    return {"shards": [(int(p.numel()), str(p.dtype).replace("torch.", "")) for p in shards],
            "final": {str(k): v.detach().clone() for k, v in dict(final).items()},
            "calls": log.steps, "peak": int(peak), "between": int(between)}


def reference_training(model_name: str, state: dict, batches: list, compute_dtype: str | None) -> dict:
    """One process on the whole batches, SGD with momentum on fp32 parameters; with a
    ``compute_dtype`` every unit runs with its parameters and floating inputs cast to it.
    Returns the parameters at the end by name."""
    model = fsdp.make_model(model_name, 0)
    model.load_state_dict(state)
    dtype = DTYPES[compute_dtype]
    if dtype is not None:
        for m in fsdp.units(model):
            m.register_forward_pre_hook(lambda m, args: tuple(
                a.to(dtype) if torch.is_tensor(a) and a.is_floating_point() else a for a in args))
    optimizer = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    for X, y in batches:
        optimizer.zero_grad()
        params = {k: (p if dtype is None else p.to(dtype)) for k, p in model.named_parameters()}
        out = torch.func.functional_call(model, params, (X,))
        F.cross_entropy(out.float(), y).backward()
        optimizer.step()
    return {k: p.detach().clone() for k, p in model.named_parameters()}


def _raw(result, rank: int, steps: int) -> dict:
    """A worker's raw data, checked for kind before anything is computed from it."""
    def refuse(what):
        raise MalformedResult(f"rank {rank} sent back malformed data ({what})")

    if type(result) is not dict or set(result) != {"shards", "final", "calls", "peak", "between"}:
        refuse("not the dict fsdp_worker returns")
    if type(result["shards"]) is not list or not all(
            type(s) is tuple and len(s) == 2 and type(s[0]) is int and type(s[1]) is str for s in result["shards"]):
        refuse("shards")
    final = result["final"]
    if type(final) is not dict or not all(type(k) is str and type(v) in (torch.Tensor, nn.Parameter)
                                          for k, v in final.items()):
        refuse("full parameters")
    calls = result["calls"]
    if type(calls) is not list or len(calls) != steps or not all(
            type(step) is list and all(type(c) is list and len(c) == 3 and type(c[0]) is str and type(c[1]) is int
                                       and type(c[2]) is str for c in step) for step in calls):
        refuse("collective log")
    if type(result["peak"]) is not int or type(result["between"]) is not int:
        refuse("parameter bytes")
    return result


def check_fsdp(fsdp_class, world: int = 2, model: str = "mlp", compute_dtype: str | None = None,
               batch: int = 2, timeout: float = 60.0) -> dict:
    """Run a notebook's ``FSDP`` class on ``world`` gloo processes (3 SGD steps with momentum,
    ``batch`` examples per rank, ``compute_dtype`` ``None``, ``"float16"`` or ``"bfloat16"``)
    and judge what comes back. Returns ``{"max_error": largest difference of any rank's gathered
    parameters from one process training on the whole batches, "missing": parameter names not
    gathered, "rank_difference", "shards": [(elements, dtype)] of rank 0, "expected_shards",
    "gathered": [[bytes all-gathered per step] per rank], "scattered": reduce-scattered,
    "all_reduced", "dtypes": {kind: dtypes seen}, "expected": the formula's bytes
    (:func:`course_lib.parallel.fsdp.traffic_per_step`), "peak": [largest parameter bytes during a step
    per rank], "between": [between steps per rank], "shard_bytes": this rank's shards' bytes,
    "peak_budget": the shards plus the two largest units gathered, "full_bytes": the whole
    model's fp32 parameters}``. In the grader's checker, a second call with the same class text and
    arguments returns the first's result (:func:`.shipped.once_per_submission`)."""
    shipped = shippable(fsdp_class)
    refuse_unanswered(shipped)   # its workers would end with a traceback of their own
    return once_per_submission(shipped, (world, model, compute_dtype, batch),
                               lambda: _run(shipped, world, model, compute_dtype, batch, timeout))


def _run(shipped, world: int, model: str, compute_dtype: str | None, batch: int, timeout: float) -> dict:
    """:func:`check_fsdp`'s run: fresh data, the workers, the reference and the judgement."""
    seed = secrets.randbits(31)
    start = fsdp.make_model(model, seed)
    state = {k: v.detach().clone() for k, v in start.state_dict().items()}
    gen = torch.Generator().manual_seed(seed)
    widths = fsdp.LAYERS[model]
    batches = [(torch.randn(batch * world, widths[0], generator=gen),
                torch.randint(0, widths[-1], (batch * world,), generator=gen)) for _ in range(STEPS)]
    shares = PerRank([[(X[r * batch:(r + 1) * batch], y[r * batch:(r + 1) * batch]) for X, y in batches]
                      for r in range(world)])
    results = launch(fsdp_worker, world, job_for(shipped), model, state, shares, compute_dtype, timeout=timeout)
    expected = reference_training(model, state, batches, compute_dtype)
    raw = [_raw(r, rank, STEPS) for rank, r in enumerate(results)]
    numels = [sum(p.numel() for p in m.parameters(recurse=False)) for m in fsdp.units(start)]
    size = 4 if compute_dtype is None else 2
    padded = [fsdp.shard_elements(n, world) * world for n in numels]
    by_kind = [[fsdp.totals(step) for step in r["calls"]] for r in raw]
    dtypes = {}
    for r in raw:
        for step in r["calls"]:
            for name, _, dtype in step:
                dtypes.setdefault(fsdp.KINDS.get(name, name), set()).add(dtype)
    return {"max_error": worst(difference(r["final"].get(k), v) for r in raw for k, v in expected.items()),
            "missing": sorted(set(expected) - set(raw[0]["final"])),
            "rank_difference": worst(difference(r["final"].get(k), v)
                                     for r in raw[1:] for k, v in raw[0]["final"].items()),
            "shards": raw[0]["shards"], "expected_shards": [(n // world, "float32") for n in padded],
            "gathered": [[s["all_gather"] for s in steps] for steps in by_kind],
            "scattered": [[s["reduce_scatter"] for s in steps] for steps in by_kind],
            "all_reduced": [[s["all_reduce"] + s["broadcast"] for s in steps] for steps in by_kind],
            "dtypes": {k: sorted(v) for k, v in dtypes.items()},
            "expected": fsdp.traffic_per_step(numels, world, compute_bytes=size),
            "peak": [r["peak"] for r in raw], "between": [r["between"] for r in raw],
            "shard_bytes": sum(padded) // world * 4,
            "peak_budget": sum(padded) // world * 4 + sum(sorted(padded)[-2:]) * size,
            "full_bytes": sum(numels) * 4}
