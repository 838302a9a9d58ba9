"""The check behind lesson 13's graded sharded optimizer (ZeRO stage 1 for any torch
optimizer): run the student's ``ShardedOptimizer(params, optimizer_cls, **kwargs)`` on gloo
processes and judge what they send back here.

:func:`optimizer_worker` (in each worker, which runs the student's code) builds the model from
the starting state, gives the optimizer two parameter groups (the biases with their own
options), trains a few steps on this rank's share of each batch (the worker averages the
gradients over the ranks itself, as DDP would), and sends back raw data only: the parameters at
the end, which parameters have optimizer state on this rank, and the bytes of that state. The
state is what the instances of torch optimizers reachable from the student's object hold in
their ``.state`` (the optimizer's own bookkeeping, not parameters or gradients). torch's
``ZeroRedundancyOptimizer`` is switched off there.

:func:`check_sharded_optimizer` (in the caller, the grader's checker when grading) draws the
model and data from a fresh secret seed, trains one process with the unsharded torch optimizer
on the whole batches, measures that optimizer's state bytes the same way, and computes every
difference and the balance budget (:func:`greedy_loads`).
"""
from __future__ import annotations

import secrets

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from ..parallel.launch import PerRank, init_process_group, job_for, launch
from ..parallel.worker import resolve
from .shipped import once_per_submission, shippable, switch_off_unimported
from .unanswered import refuse_unanswered
from .worker_results import MalformedResult, difference, worst

STEPS = 3
LAYERS = {"mlp": (6, 16, 16, 4), "deep": (5, 12, 12, 12, 3)}   # widths of the models' layers
# per optimizer: the class, its options, and the options of the bias group
OPTIMIZERS = {"sgd": (torch.optim.SGD, {"lr": 0.1, "momentum": 0.9}, {"lr": 0.05}),
              "adamw": (torch.optim.AdamW, {"lr": 0.01, "weight_decay": 0.1}, {"lr": 0.005, "weight_decay": 0.0})}


def make_model(name: str, seed: int) -> nn.Sequential:
    """A float64 MLP of :data:`LAYERS` ``name`` with tanh between its layers."""
    widths = LAYERS[name]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        layers = []
        for n_in, n_out in zip(widths[:-1], widths[1:]):
            layers += [nn.Linear(n_in, n_out), nn.Tanh()]
        return nn.Sequential(*layers[:-1]).double()


def param_groups(model: nn.Module, bias_options: dict) -> list[dict]:
    """Two groups: the weights, and the biases with ``bias_options``."""
    params = list(model.parameters())
    return [{"params": [p for p in params if p.dim() > 1]},
            {"params": [p for p in params if p.dim() == 1], **bias_options}]


def _optimizers(root, depth: int = 4) -> list:
    """Every ``torch.optim.Optimizer`` reachable from ``root`` through attributes, dicts, lists
    and tuples (``depth`` levels), ``root`` included."""
    found, seen, level = [], set(), [root]
    for _ in range(depth + 1):
        nxt = []
        for obj in level:
            if id(obj) in seen or torch.is_tensor(obj) or isinstance(obj, (nn.Module, type)):
                continue
            seen.add(id(obj))
            if isinstance(obj, torch.optim.Optimizer):
                found.append(obj)
            if isinstance(obj, dict):
                nxt += list(obj.values())
            elif isinstance(obj, (list, tuple)):
                nxt += list(obj)
            elif hasattr(obj, "__dict__") and not callable(obj):
                nxt += list(vars(obj).values())
        level = nxt
    return found


def state_of(optimizer, params: list) -> tuple[list[int], int]:
    """(indices into ``params`` of the parameters that hold optimizer state, bytes of that state)
    over every torch optimizer reachable from ``optimizer``; each storage counted once."""
    index = {id(p): i for i, p in enumerate(params)}
    owned, storages = set(), {}
    for opt in _optimizers(optimizer):
        for key, values in list(opt.state.items()):
            if id(key) in index and values:
                owned.add(index[id(key)])
            for value in (values.values() if isinstance(values, dict) else ()):
                if torch.is_tensor(value):
                    storage = value.untyped_storage()
                    storages[storage.data_ptr(), storage.nbytes()] = storage.nbytes()
    return sorted(owned), sum(storages.values())


def optimizer_worker(job, model_name: str, state: dict, shares: list, optimizer: str) -> dict:
    """Worker: the model from ``state``, the shipped ``ShardedOptimizer`` over its two groups,
    one step per ``(X, y)`` of ``shares`` (gradients averaged over the ranks here). Returns
    ``{"params": at the end, "owned": indices of parameters with state here, "state_bytes"}``."""
    _, world, _ = init_process_group("gloo", timeout=60)
    switch_off_unimported("torch.distributed.optim.zero_redundancy_optimizer", "ZeroRedundancyOptimizer")
    model = make_model(model_name, 0)
    model.load_state_dict(state)
    cls, options, bias_options = OPTIMIZERS[optimizer]
    sharded = resolve(job)(param_groups(model, bias_options), cls, **options)
    params = list(model.parameters())
    for X, y in shares:
        for p in params:
            p.grad = None
        F.cross_entropy(model(X), y).backward()
        for p in params:
            dist.all_reduce(p.grad)
            p.grad /= world
        sharded.step()
    owned, nbytes = state_of(sharded, params)
    return {"params": [p.detach().clone() for p in params], "owned": owned, "state_bytes": nbytes}


def reference_training(model_name: str, state: dict, batches: list, optimizer: str):
    """One process, the unsharded torch optimizer on the whole batches: (parameters at the end,
    bytes of the optimizer's state per parameter)."""
    model = make_model(model_name, 0)
    model.load_state_dict(state)
    cls, options, bias_options = OPTIMIZERS[optimizer]
    opt = cls(param_groups(model, bias_options), **options)
    params = list(model.parameters())
    for X, y in batches:
        opt.zero_grad()
        F.cross_entropy(model(X), y).backward()
        opt.step()
    per_param = [sum(v.untyped_storage().nbytes() for v in opt.state[p].values() if torch.is_tensor(v))
                 for p in params]
    return [p.detach().clone() for p in params], per_param


def greedy_loads(sizes: list[int], world: int) -> list[int]:
    """Elements per rank when each parameter, largest first (ties: model order), goes to the
    rank holding the fewest elements so far (ties: the lowest rank)."""
    loads = [0] * world
    for i in sorted(range(len(sizes)), key=lambda i: -sizes[i]):
        loads[loads.index(min(loads))] += sizes[i]
    return loads


def _raw(result, rank: int, shapes: list) -> dict:
    def refuse(what):
        raise MalformedResult(f"rank {rank} sent back malformed data ({what})")

    if type(result) is not dict or set(result) != {"params", "owned", "state_bytes"}:
        refuse("not the dict optimizer_worker returns")
    params = result["params"]
    if type(params) is not list or len(params) != len(shapes) or not all(
            type(t) in (torch.Tensor, nn.Parameter) and t.is_floating_point() and tuple(t.shape) == s
            for t, s in zip(params, shapes)):
        refuse("parameters")
    owned = result["owned"]
    if type(owned) is not list or not all(type(i) is int and 0 <= i < len(shapes) for i in owned):
        refuse("owned parameters")
    if type(result["state_bytes"]) is not int:
        refuse("state bytes")
    return result


def check_sharded_optimizer(optimizer_class, world: int = 2, optimizer: str = "sgd", model: str = "mlp",
                            batch: int = 4, timeout: float = 60.0) -> dict:
    """Run a notebook's ``ShardedOptimizer`` class on ``world`` gloo processes (``optimizer``:
    ``"sgd"`` with momentum or ``"adamw"``, 3 steps) and judge what comes back. Returns
    ``{"max_error": largest difference of any rank's parameters from unsharded training,
    "rank_difference", "owners": [number of ranks holding state, per parameter], "state_bytes":
    per rank, "full_state_bytes": the unsharded optimizer's, "elements": parameter elements with
    state per rank, "greedy_max": the largest rank's elements under :func:`greedy_loads`}``. In the
    grader's checker, a second call with the same class text and arguments returns the first's
    result (:func:`.shipped.once_per_submission`)."""
    shipped = shippable(optimizer_class)
    refuse_unanswered(shipped)   # its workers would end with a traceback of their own
    return once_per_submission(shipped, (world, optimizer, model, batch),
                               lambda: _run(shipped, world, optimizer, model, batch, timeout))


def _run(shipped, world: int, optimizer: str, model: str, batch: int, timeout: float) -> dict:
    """:func:`check_sharded_optimizer`'s run: fresh data, the workers, the reference and the judgement."""
    seed = secrets.randbits(31)
    start = make_model(model, seed)
    state = {k: v.detach().clone() for k, v in start.state_dict().items()}
    gen = torch.Generator().manual_seed(seed)
    batches = [(torch.randn(batch * world, LAYERS[model][0], generator=gen, dtype=torch.float64),
                torch.randint(0, LAYERS[model][-1], (batch * world,), generator=gen)) for _ in range(STEPS)]
    shares = PerRank([[(X[r * batch:(r + 1) * batch], y[r * batch:(r + 1) * batch]) for X, y in batches]
                      for r in range(world)])
    results = launch(optimizer_worker, world, job_for(shipped), model, state, shares, optimizer, timeout=timeout)
    expected, per_param = reference_training(model, state, batches, optimizer)
    sizes = [p.numel() for p in start.parameters()]
    raw = [_raw(r, rank, [tuple(p.shape) for p in start.parameters()]) for rank, r in enumerate(results)]
    return {"max_error": worst(difference(a, b) for r in raw for a, b in zip(r["params"], expected)),
            "rank_difference": worst(difference(a, b) for r in raw[1:] for a, b in zip(r["params"], raw[0]["params"])),
            "owners": [sum(i in r["owned"] for r in raw) for i in range(len(sizes))],
            "state_bytes": [r["state_bytes"] for r in raw], "full_state_bytes": sum(per_param),
            "elements": [sum(sizes[i] for i in set(r["owned"])) for r in raw],
            "greedy_max": max(greedy_loads(sizes, world))}
