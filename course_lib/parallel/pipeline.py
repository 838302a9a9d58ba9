"""Pipeline parallelism: consecutive layers on consecutive ranks, micro-batches in flight
(lesson 13).

A model cut into ``p`` stages runs a batch cut into ``m`` micro-batches. Stage ``s`` runs
the forward pass ``F i`` of micro-batch ``i`` after stage ``s-1`` has sent it the
activations, and the backward pass ``B i`` after stage ``s+1`` has sent the gradient.
A *schedule* is the order in which each stage runs its ``2 m`` operations:

- GPipe (Huang et al. 2019): every forward first, then every backward
  (:func:`gpipe_order`); a stage holds the activations of all ``m`` micro-batches;
- 1F1B (PipeDream-Flush, Narayanan et al. 2021): a few forwards, then alternate one
  forward and one backward; it keeps at most ``p - s`` micro-batches in flight on stage
  ``s``. Writing its order is part of the lesson, so it is not in this module: every
  function here takes *any* order.

:func:`simulate` places the operations in time (forward ``t_f`` and backward ``t_b``
seconds) and returns a :class:`course_lib.schedule.Schedule`, drawn by :func:`gantt`
(lesson 07's Gantt chart) and checked by :func:`course_lib.schedule.validate` through
:func:`as_tasks`; :func:`idle_fraction` measures the bubble, :func:`peak_in_flight` the
activation memory. :func:`run` executes a given order for real on ``p`` processes with
``isend``/``recv`` (:func:`pipeline_worker`; :func:`run_orders` several orders in one
start), and :func:`torch_worker` runs PyTorch's own ``torch.distributed.pipelining``
schedules (``ScheduleGPipe``, ``Schedule1F1B``) on the same model and records the order
they ran; both are compared with one process training the unsplit model.
"""
from __future__ import annotations

import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from ..schedule import Schedule, Slot, Task
from ..schedule import gantt as _gantt
from .launch import init_process_group, launch

Op = tuple  # ("F" or "B", micro-batch index)


def gpipe_order(p: int, m: int) -> list[list[Op]]:
    """GPipe: on every stage all ``m`` forwards, then all ``m`` backwards."""
    return [[("F", i) for i in range(m)] + [("B", i) for i in range(m)] for _ in range(p)]


def _deps(kind: str, i: int, s: int, p: int) -> list[tuple]:
    """The operations (kind, micro-batch, stage) that must finish before ``kind i`` on ``s``."""
    if kind == "F":
        return [("F", i, s - 1)] if s > 0 else []
    return [("B", i, s + 1)] if s < p - 1 else [("F", i, s)]


def _name(kind: str, i: int, s: int) -> str:
    return f"{kind}{i}@{s}"


def simulate(order: list[list[Op]], t_f: float = 1.0, t_b: float = 2.0) -> Schedule:
    """Place every operation as early as its stage (one operation at a time, in ``order``)
    and its dependencies allow. Durations in seconds: ``t_f`` forward, ``t_b`` backward, per
    micro-batch and stage. Slots are named ``"F3@1"`` (forward of micro-batch 3 on stage 1)
    and run on devices ``"stage 0"``, ``"stage 1"``, ... Raises ``ValueError`` when the order
    deadlocks (a stage waits for an operation that waits for it) or misses an operation."""
    p = len(order)
    m = max((i for ops in order for _, i in ops), default=-1) + 1
    for s, ops in enumerate(order):
        if sorted(ops) != sorted([("F", i) for i in range(m)] + [("B", i) for i in range(m)]):
            raise ValueError(f"stage {s} must run F0..F{m - 1} and B0..B{m - 1} once each, got {ops}")
    end: dict[tuple, float] = {}
    free = [0.0] * p
    nxt = [0] * p
    slots = []
    while any(nxt[s] < len(order[s]) for s in range(p)):
        progress = False
        for s in range(p):
            while nxt[s] < len(order[s]):
                kind, i = order[s][nxt[s]]
                deps = _deps(kind, i, s, p)
                if any(d not in end for d in deps):
                    break
                start = max([free[s]] + [end[d] for d in deps])
                finish = start + (t_f if kind == "F" else t_b)
                end[(kind, i, s)] = free[s] = finish
                slots.append(Slot(_name(kind, i, s), f"stage {s}", start, finish))
                nxt[s] += 1
                progress = True
        if not progress:
            stuck = {s: order[s][nxt[s]] for s in range(p) if nxt[s] < len(order[s])}
            raise ValueError(f"the order deadlocks: each stage waits, next operations {stuck}")
    return Schedule(sorted(slots, key=lambda sl: (sl.start, sl.device)))


def as_tasks(order: list[list[Op]], t_f: float = 1.0, t_b: float = 2.0) -> list[Task]:
    """The operations as :class:`course_lib.schedule.Task` s with their data dependencies and
    stage, for :func:`course_lib.schedule.validate`."""
    p = len(order)
    return [Task(_name(k, i, s), t_f if k == "F" else t_b,
                 tuple(_name(*d) for d in _deps(k, i, s, p)), device=f"stage {s}")
            for s, ops in enumerate(order) for k, i in ops]


def idle_fraction(schedule: Schedule) -> float:
    """Fraction of stage-time spent waiting: ``1 - busy / (stages * makespan)`` (the bubble)."""
    devices = {sl.device for sl in schedule.slots}
    busy = sum(schedule.busy_seconds(d) for d in devices)
    return 1.0 - busy / (len(devices) * schedule.makespan)


def peak_in_flight(order: list[list[Op]]) -> list[int]:
    """Per stage, the most micro-batches whose forward has run but whose backward has not:
    how many micro-batches' activations the stage must hold at once."""
    peaks = []
    for ops in order:
        live = peak = 0
        for kind, _ in ops:
            live += 1 if kind == "F" else -1
            peak = max(peak, live)
        peaks.append(peak)
    return peaks


def gantt(schedule: Schedule, ax=None, title: str = ""):
    """Lesson 07's Gantt chart of a pipeline schedule, bars labelled ``F3``/``B3`` (the stage is
    the row); forward bars light, backward bars dark."""
    import matplotlib.pyplot as plt  # lazy: 0.35 s of every worker process, which never draws
    short = Schedule([Slot(sl.task.split("@")[0], sl.device, sl.start, sl.end) for sl in schedule.slots])
    rows = sorted({sl.device for sl in short.slots})
    if ax is None:
        _, ax = plt.subplots(figsize=(9, 0.6 + 0.5 * len(rows)))
    ax = _gantt(short, ax=ax, title=title or f"makespan {schedule.makespan:g}, "
                                              f"idle {idle_fraction(schedule):.0%}")
    for bars, sl in zip(ax.collections, sorted(short.slots, key=lambda x: (rows.index(x.device), x.start))):
        bars.set_facecolor("#9ecae1" if sl.task.startswith("F") else "#6baed6")
    ax.invert_yaxis()  # stage 0 on top
    return ax


# ------------------------------------------------------------ the real thing, p processes
def make_model(width: int = 32, depth: int = 4, classes: int = 10, seed: int = 0) -> nn.Sequential:
    """``depth`` blocks Linear(width, width)-ReLU, then Linear(width, classes)."""
    torch.manual_seed(seed)
    layers: list[nn.Module] = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.ReLU()]
    return nn.Sequential(*layers, nn.Linear(width, classes))


def split_stages(model: nn.Sequential, p: int) -> list[nn.Sequential]:
    """Cut ``model`` into ``p`` consecutive stages of nearly equal numbers of modules."""
    bounds = torch.tensor_split(torch.arange(len(model)), p)
    return [model[int(b[0]):int(b[-1]) + 1] for b in bounds]


def make_data(batch: int = 32, width: int = 32, classes: int = 10, seed: int = 1):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(batch, width, generator=gen), torch.randint(0, classes, (batch,), generator=gen)


def reference(width: int = 32, depth: int = 4, batch: int = 32, seed: int = 0) -> tuple[float, list]:
    """Loss and per-stage-order parameter gradients of the unsplit model on the whole batch."""
    model = make_model(width, depth, seed=seed)
    X, y = make_data(batch, width)
    loss = F.cross_entropy(model(X), y)
    loss.backward()
    return float(loss.detach()), [p.grad for p in model.parameters()]


def _stage_gradient_error(stage: nn.Module, rank: int, p: int, width: int, depth: int, batch: int,
                          seed: int) -> float:
    full = make_model(width, depth, seed=seed)
    _, grads = reference(width, depth, batch, seed)
    by_name = dict(zip([n for n, _ in full.named_parameters()], grads))
    mine = split_stages(full, p)[rank]
    expected = [by_name[n] for n, q in full.named_parameters() if any(q is r for r in mine.parameters())]
    return max(float((a.grad - b).abs().max()) for a, b in zip(stage.parameters(), expected))


def _sync(device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _run_stage(stage, ops, rank, p, xs, ys, width, device) -> tuple[list, float]:
    """Run one step of ``ops`` on this stage; returns the measured events and the loss."""
    m = len(xs)
    inputs, outputs, sends, events, loss = {}, {}, [], [], 0.0
    dist.barrier()
    origin = time.perf_counter()
    for kind, i in ops:
        start = time.perf_counter() - origin
        if kind == "F":
            if rank == 0:
                h = xs[i].to(device)
            else:
                h = torch.empty(xs[i].shape[0], width, device=device)
                dist.recv(h, src=rank - 1)
                h.requires_grad_()
                start = time.perf_counter() - origin  # waiting for the message is idle time
            inputs[i] = h
            out = stage(h)
            if rank == p - 1:
                out = F.cross_entropy(out, ys[i].to(device)) / m
                loss += float(out.detach())
            else:
                sends.append(dist.isend(out.detach().contiguous(), dst=rank + 1))
            outputs[i] = out
        else:
            if rank == p - 1:
                outputs.pop(i).backward()
            else:
                grad = torch.empty_like(outputs[i])
                dist.recv(grad, src=rank + 1)
                start = time.perf_counter() - origin
                outputs.pop(i).backward(grad)
            h = inputs.pop(i)
            if rank > 0:
                sends.append(dist.isend(h.grad.contiguous(), dst=rank - 1))
        _sync(device)
        events.append((f"{kind}{i}", start, time.perf_counter() - origin))
    for work in sends:
        work.wait()
    return events, loss


def pipeline_worker(order: list[list[Op]], micro_batches: int, width: int = 32, depth: int = 4,
                    batch: int = 32, seed: int = 0, warmup: bool = True,
                    backend: str | None = None) -> dict:
    """Worker: run stage ``rank`` of the model through ``order[rank]`` with point-to-point
    messages. ``F i`` receives micro-batch ``i``'s activations from the previous stage (stage
    0 reads the data), runs the stage and sends the result on (the last stage computes the
    loss, divided by ``m`` so the gradients add up to the full batch's). ``B i`` receives the
    gradient of the output, runs backward and sends the input's gradient back. Sends are
    ``isend`` (a stage never blocks on a send), so any order without a cycle runs.
    With ``warmup`` one untimed step runs first (the first backward of a process is slow).

    Returns the loss (last stage), the largest difference of this stage's gradients from
    the unsplit model's, and the measured ``(operation, start, end)`` seconds of every
    operation (from the end of its incoming message to the end of its compute).
    """
    rank, p, device = init_process_group(backend)
    result = _execute(order, micro_batches, width, depth, batch, seed, warmup, rank, p, device)
    dist.destroy_process_group()
    return result


def _execute(order, micro_batches, width, depth, batch, seed, warmup, rank, p, device) -> dict:
    stage = split_stages(make_model(width, depth, seed=seed), p)[rank].to(device)
    X, y = make_data(batch, width)
    xs, ys = X.chunk(micro_batches), y.chunk(micro_batches)
    if warmup:
        _run_stage(stage, order[rank], rank, p, xs, ys, width, device)
        stage.zero_grad(set_to_none=True)
    events, loss = _run_stage(stage, order[rank], rank, p, xs, ys, width, device)
    error = _stage_gradient_error(stage.cpu(), rank, p, width, depth, batch, seed)
    return {"rank": rank, "loss": loss if rank == p - 1 else None, "grad_error": error,
            "events": events, "device": str(device)}


def orders_worker(orders: dict, micro_batches: int, width: int = 32, depth: int = 4, batch: int = 32,
                  seed: int = 0, warmup: bool = True, backend: str | None = None) -> dict:
    """Worker: :func:`pipeline_worker` for every ``{name: order}`` in one process group."""
    rank, p, device = init_process_group(backend)
    results = {name: _execute(order, micro_batches, width, depth, batch, seed, warmup, rank, p, device)
               for name, order in orders.items()}
    dist.destroy_process_group()
    return results


def torch_worker(kind: str = "1f1b", micro_batches: int = 4, width: int = 32, depth: int = 4,
                 batch: int = 32, seed: int = 0, backend: str | None = None) -> dict:
    """Worker: the same model and batch through ``torch.distributed.pipelining``'s
    ``PipelineStage`` and ``ScheduleGPipe`` (``kind="gpipe"``) or ``Schedule1F1B``.
    Returns the loss (mean of the micro-batch losses, last stage), the gradient error and
    the order in which the stage ran its forward and backward passes (recorded by wrapping
    the stage's ``forward_one_chunk``/``backward_one_chunk``: the schedule's own order)."""
    from torch.distributed import pipelining  # lazy: 1.5 s to import; the graded exercises skip it

    rank, p, device = init_process_group(backend)
    stage_module = split_stages(make_model(width, depth, seed=seed), p)[rank].to(device)
    stage = pipelining.PipelineStage(stage_module, rank, p, device)
    order: list[Op] = []  # what the schedule really ran, in the order it ran it
    forward, backward = stage.forward_one_chunk, stage.backward_one_chunk

    def forward_recorded(chunk, *args, **kwargs):
        order.append(("F", chunk))
        return forward(chunk, *args, **kwargs)

    def backward_recorded(chunk, *args, **kwargs):
        order.append(("B", chunk))
        return backward(chunk, *args, **kwargs)

    stage.forward_one_chunk, stage.backward_one_chunk = forward_recorded, backward_recorded
    cls = {"gpipe": pipelining.ScheduleGPipe, "1f1b": pipelining.Schedule1F1B}[kind]
    schedule = cls(stage, n_microbatches=micro_batches, loss_fn=F.cross_entropy)
    X, y = make_data(batch, width)
    losses: list = []
    if rank == 0:
        schedule.step(X.to(device))
    elif rank == p - 1:
        schedule.step(target=y.to(device), losses=losses)
    else:
        schedule.step()
    error = _stage_gradient_error(stage_module.cpu(), rank, p, width, depth, batch, seed)
    dist.destroy_process_group()
    loss = float(torch.stack([micro_loss.detach().cpu() for micro_loss in losses]).mean()) if losses else None
    return {"rank": rank, "loss": loss, "grad_error": error, "order": order, "device": str(device)}


def run(order: list[list[Op]], micro_batches: int, timeout: float = 120.0, **options) -> list[dict]:
    """Run :func:`pipeline_worker` with ``order`` on ``len(order)`` processes; results by rank."""
    return launch(pipeline_worker, len(order), order, micro_batches, timeout=timeout, **options)


def run_orders(orders: dict, micro_batches: int, timeout: float = 120.0, **options) -> dict:
    """Run several ``{name: order}`` on the same processes (one start-up); returns
    ``{name: results by rank}`` as :func:`run` would."""
    p = len(next(iter(orders.values())))
    by_rank = launch(orders_worker, p, orders, micro_batches, timeout=timeout, **options)
    return {name: [r[name] for r in by_rank] for name in orders}


def run_torch(kind: str = "1f1b", p: int = 2, timeout: float = 120.0, **options) -> list[dict]:
    """Run :func:`torch_worker` on ``p`` processes; results by rank."""
    return launch(torch_worker, p, kind, timeout=timeout, **options)


def measured_schedule(results: list[dict]) -> Schedule:
    """The measured events of :func:`run` as a :class:`Schedule` (seconds since the barrier)."""
    return Schedule([Slot(f"{name}@{r['rank']}", f"stage {r['rank']}", start, end)
                     for r in results for name, start, end in r["events"]])
