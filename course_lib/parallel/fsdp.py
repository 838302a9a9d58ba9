"""Fully sharded data parallelism, measured: what FSDP sends per step and the parameter bytes a
rank holds while it runs (lesson 13).

FSDP cuts the model into **units** (here: every module that owns parameters of its own, such as
each ``Linear``). Each rank keeps a flat shard of every unit: the unit's parameters concatenated,
padded with zeros to ``N * ceil(n / N)`` elements (``n`` the unit's elements, ``N`` the ranks),
rank ``r`` owning elements ``r s ... (r + 1) s - 1`` with ``s = ceil(n / N)``. Per training step
each unit's full weights are all-gathered twice (before its forward and again for its backward)
and its gradient is reduce-scattered once, so per rank and step (:func:`traffic_per_step`):

- all-gathered: ``2 * sum_u N s_u * c`` bytes (the gathered buffers' size; ``c`` the bytes per
  element of the compute dtype the weights are gathered in: 4 for fp32, 2 for bf16/fp16);
- reduce-scattered: ``sum_u N s_u * g`` bytes (``g`` the bytes of the reduce dtype: 4 for fp32);
- sent over a ring: ``(N - 1) / N`` of each (lesson 11), three times a DDP-like ``(N - 1) / N`` of
  the parameters' bytes when ``c = g``: the ZeRO paper's 1.5 times the traffic of an all-reduce
  (Rajbhandari et al. 2020, section 7).

This module has the formula, :class:`CollectiveLog` (every collective one rank issues: its kind,
bytes and dtype, per step; installed on ``torch.distributed``'s functions, which is what the
notebooks' ``dist`` and FSDP2 call), :class:`ParameterBytes` (the bytes of the tensors holding
parameter values that a rank keeps alive, sampled while a step runs), the small models the
lesson trains, and :func:`measure_fsdp2`: torch's FSDP2 (``fully_shard`` on every ``Linear``)
on ``k`` gloo processes with its collectives counted. The check behind exercise 6 (a student's
``FSDP`` container) is :mod:`course_lib.checks.fsdp`.

All sizes are bytes.
"""
from __future__ import annotations

import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from .launch import init_process_group, launch

#: the collectives :class:`CollectiveLog` records: (position, keyword) of the argument whose bytes
#: it counts, and whether that argument receives parameter values (an all-gather's or broadcast's)
LOGGED = {"all_gather_into_tensor": (0, "output_tensor", True), "all_gather_single": (0, "output_tensor", True),
          "all_gather": (0, "tensor_list", True), "reduce_scatter_tensor": (1, "input", False),
          "reduce_scatter_single": (1, "input", False), "reduce_scatter": (1, "input_list", False),
          "all_reduce": (0, "tensor", False), "broadcast": (0, "tensor", True)}
#: the kind each logged collective counts as in :func:`totals`
KINDS = {"all_gather_into_tensor": "all_gather", "all_gather_single": "all_gather", "all_gather": "all_gather",
         "reduce_scatter_tensor": "reduce_scatter", "reduce_scatter_single": "reduce_scatter",
         "reduce_scatter": "reduce_scatter", "all_reduce": "all_reduce", "broadcast": "broadcast"}
#: widths of the models' Linear layers (tanh between them)
LAYERS = {"mlp": (8, 12, 12, 12, 12, 4), "deep": (5, 10, 10, 9, 10, 10, 3), "lecture": (64, 128, 128, 128, 10)}


def make_model(name: str, seed: int) -> nn.Sequential:
    """A float32 MLP of :data:`LAYERS` ``name`` with tanh between its layers (the random state
    is left as it was)."""
    widths = LAYERS[name]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        layers = []
        for n_in, n_out in zip(widths[:-1], widths[1:]):
            layers += [nn.Linear(n_in, n_out), nn.Tanh()]
        return nn.Sequential(*layers[:-1])


def units(module: nn.Module) -> list[nn.Module]:
    """FSDP's units: every submodule (``module`` included) that owns parameters of its own."""
    return [m for m in module.modules() if any(True for _ in m.parameters(recurse=False))]


def shard_elements(n: int, world: int) -> int:
    """Elements of one rank's flat shard of a unit of ``n`` elements: ``ceil(n / world)``."""
    return -(-n // world)


def traffic_per_step(unit_numels, world: int, compute_bytes: int = 4, reduce_bytes: int = 4) -> dict[str, float]:
    """Bytes one rank's collectives move per FSDP training step: ``"all_gather"`` (the gathered
    buffers, each unit twice: forward and backward, ``compute_bytes`` per element),
    ``"reduce_scatter"`` (each unit's padded gradient once, ``reduce_bytes`` per element), and
    what a ring sends of each (``"ring_sent"``: ``(world - 1) / world`` of both together)."""
    padded = sum(shard_elements(n, world) * world for n in unit_numels)
    gathered, scattered = 2 * padded * compute_bytes, padded * reduce_bytes
    return {"all_gather": gathered, "reduce_scatter": scattered,
            "ring_sent": (gathered + scattered) * (world - 1) / world}


class CollectiveLog:
    """Every collective of :data:`LOGGED` this rank issues, per step, as ``[kind, bytes, dtype]``
    (bytes of the gathered output, of the reduce-scatter's input, of the all-reduced or broadcast
    tensor), until :meth:`remove`. ``on_output(tensor)`` is called with what an all-gather or a
    broadcast wrote (for :class:`ParameterBytes`). Calls outside a step (:meth:`step`) are not kept."""

    def __init__(self, on_output=None):
        self.steps, self.recording, self.on_output = [], False, on_output
        # torch 2.11 has no all_gather_single / reduce_scatter_single: log what this torch has
        self.originals = {name: getattr(dist, name) for name in LOGGED if hasattr(dist, name)}
        for name in self.originals:
            setattr(dist, name, self._logged(name))

    def _logged(self, name):
        original, (position, keyword, receives) = self.originals[name], LOGGED[name]

        def logged(*args, **kwargs):
            target = kwargs.get(keyword, args[position] if len(args) > position else None)
            tensors = list(target) if isinstance(target, (list, tuple)) else [target]
            if self.recording and all(torch.is_tensor(t) for t in tensors) and tensors:
                nbytes = sum(t.numel() * t.element_size() for t in tensors)
                self.steps[-1].append([name, int(nbytes), str(tensors[0].dtype).replace("torch.", "")])
            result = original(*args, **kwargs)
            if self.on_output is not None and receives:
                for t in tensors:
                    if torch.is_tensor(t):
                        self.on_output(t)
            return result
        return logged

    def step(self) -> None:
        """Start recording a new step."""
        self.steps.append([])
        self.recording = True

    def stop(self) -> None:
        """Stop recording (the step's communication is over)."""
        self.recording = False

    def remove(self) -> None:
        for name, original in self.originals.items():
            setattr(dist, name, original)


def _tensors_under(root, depth: int = 6):
    """Tensors reachable from ``root`` through attributes, modules' parameters and buffers,
    dicts, lists and tuples (``depth`` levels); not through a tensor's ``.grad``."""
    seen, level = set(), [root]
    for _ in range(depth + 1):
        nxt = []
        for obj in level:
            if id(obj) in seen or isinstance(obj, (type, str, bytes, int, float)) or obj is None:
                continue
            seen.add(id(obj))
            if torch.is_tensor(obj):
                yield obj
            elif isinstance(obj, dict):
                nxt += list(obj.values())
            elif isinstance(obj, (list, tuple, set)):
                nxt += list(obj)
            elif hasattr(obj, "__dict__") and not callable(obj) or isinstance(obj, nn.Module):
                nxt += list(vars(obj).values())
        level = nxt


class ParameterBytes:
    """The bytes of the storages that hold parameter values on this rank, sampled while it trains.

    A storage is counted from the moment it is seen as holding parameter values: a model's
    parameter (:meth:`add`), a tensor reachable from the FSDP object (each :meth:`sample`), an
    all-gather's or a broadcast's output (:class:`CollectiveLog`), a tensor that autograd saves
    for backward with the shape of a parameter (:meth:`saving`) or a unit's tensor attribute while
    it runs. It is counted for as long as something besides this record keeps it, with the bytes
    it has then (``resize_(0)`` frees it: FSDP's own way). :attr:`peak` is the largest sample."""

    def __init__(self, shapes=()):
        self.storages, self.peak = {}, 0
        self.shapes = {tuple(s) for s in shapes} | {tuple(reversed(s)) for s in shapes}

    def add(self, tensor) -> None:
        if torch.is_tensor(tensor) and tensor.is_floating_point():
            storage = tensor.untyped_storage()
            self.storages.setdefault(id(storage), storage)

    def live(self) -> int:
        """Bytes of the recorded storages something else still keeps (each storage once)."""
        alive = {}
        for s in self.storages.values():
            if torch._C._storage_Use_Count(s._cdata) > 1 and s.nbytes():
                alive[s.data_ptr()] = max(alive.get(s.data_ptr(), 0), s.nbytes())
        return sum(alive.values())

    def sample(self, *roots, settle_to: int | None = None) -> int:
        """Record the tensors under ``roots``, then the live bytes; returns them.

        A finished gloo collective's work object may still hold its output for a moment (on a
        loaded machine, long enough to be seen), which no FSDP keeps: so a new peak is counted only
        if it stays about 50 ms, and with ``settle_to`` (bytes: between steps, what was held before
        the first step) the sample waits up to 0.5 s for the bytes to come down to that; a copy
        that something really keeps stays, and is counted."""
        for root in roots:
            for t in _tensors_under(root):
                self.add(t)
        held = self.live()
        if settle_to is not None:
            deadline = time.monotonic() + 0.5
            while held > settle_to and time.monotonic() < deadline:
                time.sleep(0.005)
                held = min(held, self.live())
        for _ in range(25):
            if held <= self.peak:
                break
            time.sleep(0.002)
            held = min(held, self.live())
        self.peak = max(self.peak, held)
        return held

    def saving(self):
        """A ``saved_tensors_hooks`` context that records what autograd saves with a parameter's
        shape (or its transpose's) and saves it unchanged."""
        def pack(t):
            if tuple(t.shape) in self.shapes:
                self.add(t)
            return t
        return torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t)


def fsdp2_worker(model_name: str = "lecture", steps: int = 2, batch: int = 8, lr: float = 0.05,
                 compute_dtype: str | None = None) -> dict:
    """Worker: FSDP2 (``fully_shard`` on every ``Linear``, then the model; ``MixedPrecisionPolicy``
    with ``param_dtype=compute_dtype`` and fp32 reduction when given) trained ``steps`` SGD steps
    on this rank's batch, every collective logged. Returns ``{"calls": per step, "unit_numels",
    "local_elements": this rank's parameter elements, "losses"}``."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    rank, world, _ = init_process_group("gloo", timeout=60)
    mesh = init_device_mesh("cpu", (world,))
    model = make_model(model_name, 0)
    unit_numels = [sum(p.numel() for p in m.parameters(recurse=False)) for m in units(model)]
    policy = MixedPrecisionPolicy(param_dtype=getattr(torch, compute_dtype) if compute_dtype else None,
                                  reduce_dtype=torch.float32)
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh, mp_policy=policy)
    fully_shard(model, mesh=mesh, mp_policy=policy)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    gen = torch.Generator().manual_seed(1 + rank)
    X = torch.randn(batch, LAYERS[model_name][0], generator=gen)
    y = torch.randint(0, LAYERS[model_name][-1], (batch,), generator=gen)
    log, losses = CollectiveLog(), []
    for _ in range(steps):
        optimizer.zero_grad()
        log.step()
        loss = F.cross_entropy(model(X).float(), y)
        loss.backward()
        log.stop()
        optimizer.step()
        losses.append(float(loss.detach()))
    log.remove()
    local = sum(p.to_local().numel() for p in model.parameters())
    dist.destroy_process_group()
    return {"calls": log.steps, "unit_numels": unit_numels, "local_elements": local, "losses": losses}


def measure_fsdp2(k: int = 2, timeout: float = 120.0, **options) -> list[dict]:
    """:func:`fsdp2_worker` on ``k`` gloo processes; one result per rank."""
    return launch(fsdp2_worker, k, timeout=timeout, **options)


def totals(calls: list) -> dict[str, int]:
    """Bytes per kind of collective (``all_gather``, ``reduce_scatter``, ``all_reduce``,
    ``broadcast``: every variant of a kind together) in one step's log of ``[name, bytes, dtype]``."""
    out = dict.fromkeys(("all_gather", "reduce_scatter", "all_reduce", "broadcast"), 0)
    for name, nbytes, _ in calls:
        out[KINDS.get(name, name)] = out.get(KINDS.get(name, name), 0) + nbytes
    return out
