"""Lesson 10's DDP container and lesson 13's sharded optimizer, as their checks judge them
(course_lib.checks.ddp_container, course_lib.checks.sharded_optimizer): a correct container
passes, wrong ones are caught by the property the exercise names; classes travel to workers as
their source text (launch.source_text); overlap.measure counts torch's DDP's buckets."""
import pytest
import torch
import torch.distributed as dist
from torch import nn

from course_lib.checks.ddp_container import check_ddp
from course_lib.checks.sharded_optimizer import check_sharded_optimizer, greedy_loads
from course_lib.checks.unanswered import NotAnswered, holds_stub
from course_lib.checks.worker_results import MalformedResult
from course_lib.parallel import overlap
from course_lib.parallel.launch import class_source, source_text


class HookedDDP(nn.Module):
    """A correct container: broadcast at construction, one async all-reduce per final gradient."""

    def __init__(self, module):
        super().__init__()
        self.module, self.world, self.pending = module, dist.get_world_size(), []
        with torch.no_grad():
            for tensor in list(module.parameters()) + list(module.buffers()):
                dist.broadcast(tensor, src=0)
        for param in module.parameters():
            if param.requires_grad:
                param.register_post_accumulate_grad_hook(
                    lambda p: self.pending.append((p, dist.all_reduce(p.grad, async_op=True))))

    def forward(self, *inputs, **kwargs):
        return self.module(*inputs, **kwargs)

    def finish_gradient_synchronization(self):
        for param, handle in self.pending:
            handle.wait()
            param.grad /= self.world
        self.pending.clear()


class SummingDDP(HookedDDP):
    """Sums the gradients (no division). Ships with its base class's source (see below)."""

    def finish_gradient_synchronization(self):
        for _, handle in self.pending:
            handle.wait()
        self.pending.clear()


class TwiceTiedDDP(HookedDDP):
    """Hooks every name of a parameter: the tied weight is all-reduced twice."""

    def __init__(self, module):
        super().__init__(module)
        module.head.weight.register_post_accumulate_grad_hook(
            lambda p: self.pending.append((p, dist.all_reduce(torch.zeros(1), async_op=True))))


class LibraryDDP(nn.Module):
    """torch's own DDP inside: switched off in the check's workers."""

    def __init__(self, module):
        super().__init__()
        self.module = nn.parallel.DistributedDataParallel(module)

    def forward(self, *inputs, **kwargs):
        return self.module(*inputs, **kwargs)

    def finish_gradient_synchronization(self):
        pass


class Unanswered(nn.Module):
    def __init__(self, module):
        super().__init__()
        raise NotImplementedError()


def with_base(cls, base=HookedDDP):
    """A stand-in carrying the source of ``base`` and ``cls`` (a subclass), as one cell would hold them."""
    from course_lib.checks.shipped import Shipped
    return Shipped(cls.__name__, source_text(base) + "\n\n" + source_text(cls))


def test_classes_travel_as_source_text_and_stubs_are_found():
    namespace = {}
    exec(compile("class Late:\n    def f(self):\n        return 1\n", "<cell 7>", "exec"), namespace)
    import linecache
    linecache.cache["<cell 7>"] = (0, None, ["class Late:\n", "    def f(self):\n", "        return 1\n"], "<cell 7>")
    assert class_source(namespace["Late"]).startswith("class Late:")
    assert source_text(HookedDDP).startswith("class HookedDDP(nn.Module):")
    assert holds_stub(Unanswered) and not holds_stub(HookedDDP)
    with pytest.raises(NotAnswered, match="Unanswered is not answered yet"):
        check_ddp(Unanswered)


def test_check_ddp_accepts_a_correct_container():
    good = check_ddp(HookedDDP)
    assert good["broadcast_error"] == 0 and good["max_error"] < 1e-5 and good["rank_difference"] == 0
    assert good["allreduces"] == [good["expected_allreduces"]] * 2 == [[5, 3, 5]] * 2   # the tied weight once
    assert good["bytes"] == [good["expected_bytes"]] * 2
    assert good["asynchronous"] and good["first_in_backward"] == [[True] * 3] * 2


def test_check_ddp_catches_sums_extra_calls_and_torchs_ddp():
    assert check_ddp(with_base(SummingDDP))["max_error"] > 1e-3
    twice = check_ddp(with_base(TwiceTiedDDP))
    assert twice["allreduces"][0][0] == twice["expected_allreduces"][0] + 1
    with pytest.raises(Exception, match="DistributedDataParallel is switched off"):
        check_ddp(LibraryDDP)


def test_overlap_measures_torch_ddp_and_after_backward():
    after, torch_ddp = overlap.measure("after_backward", k=2), overlap.measure("torch", k=2)
    assert overlap.summary(after) | {"first_call_s": 0, "backward_end_s": 0} == {
        "calls": 5, "bytes": 928, "in_backward": 0, "first_call_s": 0, "backward_end_s": 0}
    assert overlap.summary(torch_ddp)["in_backward"] == overlap.summary(torch_ddp)["calls"] == 1
    assert overlap.summary(torch_ddp)["bytes"] == 928
    for a, b in zip(after[0]["params"], torch_ddp[0]["params"]):
        assert torch.allclose(a, b, atol=1e-6)


class Sharded(torch.optim.Optimizer):
    """ZeRO stage 1, largest parameter first to the least loaded rank, broadcast from the owner."""

    def __init__(self, params, optimizer_cls, **kwargs):
        super().__init__(params, kwargs)
        rank, world = dist.get_rank(), dist.get_world_size()
        loads, self.owner = [0] * world, {}
        for p in sorted([p for g in self.param_groups for p in g["params"]], key=lambda p: -p.numel()):
            self.owner[p] = loads.index(min(loads))
            loads[self.owner[p]] += p.numel()
        mine = [{**g, "params": [p for p in g["params"] if self.owner[p] == rank]} for g in self.param_groups]
        mine = [g for g in mine if g["params"]]
        self.local = optimizer_cls(mine, **kwargs) if mine else None

    @torch.no_grad()
    def step(self, closure=None):
        if self.local is not None:
            self.local.step()
        for g in self.param_groups:
            for p in g["params"]:
                dist.broadcast(p, src=self.owner[p])


class FullState(torch.optim.Optimizer):
    """Every rank steps a full optimizer: right parameters, the whole state on every rank."""

    def __init__(self, params, optimizer_cls, **kwargs):
        super().__init__(params, kwargs)
        self.local = optimizer_cls(self.param_groups, **kwargs)

    def step(self, closure=None):
        self.local.step()


def test_check_sharded_optimizer_judges_state_and_values():
    good = check_sharded_optimizer(Sharded, optimizer="adamw")
    assert good["max_error"] < 1e-12 and good["rank_difference"] == 0
    assert good["owners"] == [1] * 6 and sum(good["state_bytes"]) == good["full_state_bytes"]
    assert max(good["elements"]) <= good["greedy_max"] == 256
    full = check_sharded_optimizer(FullState, optimizer="sgd")
    assert full["max_error"] < 1e-12 and full["owners"] == [2] * 6
    assert full["state_bytes"] == [full["full_state_bytes"]] * 2


def test_greedy_loads_and_malformed_results():
    assert greedy_loads([96, 16, 256, 16, 64, 4], 2) == [256, 196]
    assert greedy_loads([5], 3) == [5, 0, 0]
    from course_lib.checks.sharded_optimizer import _raw
    with pytest.raises(MalformedResult, match="owned parameters"):
        _raw({"params": [torch.zeros(2)], "owned": [7], "state_bytes": 0}, 0, [(2,)])


def test_torchs_zero_redundancy_optimizer_holds_each_state_once():
    from course_lib.parallel import zero
    results = zero.zero_redundancy(2, steps=2, sizes=(6, 16, 16, 4))
    unsharded = results[0]["unsharded_bytes"]
    assert [sum(r["state_bytes"][i] > 0 for r in results) for i in range(len(unsharded))] == [1] * len(unsharded)
    assert sum(sum(r["state_bytes"]) for r in results) == sum(unsharded)
    assert all(r["max_difference"] < 1e-6 for r in results)


def test_a_check_runs_once_per_shipped_text_and_arguments_in_the_checker():
    from course_lib.checks.shipped import Shipped, once_per_submission
    runs = []

    def run():
        runs.append(1)
        return {"errors": [len(runs)]}

    first = Shipped("Once", "class Once:\n    pass\n")
    got = once_per_submission(first, (2, "mlp"), run)
    got["errors"].append("changed by a test cell")
    assert once_per_submission(first, (2, "mlp"), run) == {"errors": [1]} and len(runs) == 1   # a copy, not run again
    assert once_per_submission(first, (4, "mlp"), run) == {"errors": [2]}                     # other arguments
    assert once_per_submission(Shipped("Once", "class Once:\n    x = 1\n"), (2, "mlp"), run) == {"errors": [3]}
    assert once_per_submission(HookedDDP, (2, "mlp"), run) == {"errors": [4]}                 # not in the checker
    assert once_per_submission(HookedDDP, (2, "mlp"), run) == {"errors": [5]}

    def fails():
        runs.append(1)
        raise RuntimeError("a worker failed")

    for _ in range(2):
        with pytest.raises(RuntimeError):
            once_per_submission(Shipped("Fails", "class Fails:\n    pass\n"), (2,), fails)
    assert len(runs) == 7   # a run that raised is not kept
