"""ZeRO memory model against counted tensors; ZeRO stages and FSDP2 against one process."""
import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F

from course_lib.models import count_parameters
from course_lib.parallel import zero
from course_lib.training_memory import activation_bytes


def test_zero_paper_figure_1():
    # Rajbhandari et al. 2020, Figure 1: 7.5B parameters, 64 GPUs, K = 12
    gb = [zero.memory_per_rank(7.5e9, 64, s)["total"] / 1e9 for s in range(4)]
    assert [round(g, 1) for g in gb] == [120.0, 31.4, 16.6, 1.9]


def test_stages_shard_the_right_categories():
    n, ranks = 1000, 4
    for stage in range(4):
        held = zero.memory_per_rank(n, ranks, stage, "fp32", activation_bytes=123)
        assert held["optimizer"] == (8 * n / ranks if stage >= 1 else 8 * n)
        assert held["grads"] == (4 * n / ranks if stage >= 2 else 4 * n)
        assert held["params"] == (4 * n / ranks if stage == 3 else 4 * n)
        assert held["activations"] == 123
        assert held["total"] == pytest.approx(sum(v for k, v in held.items() if k != "total"))
    with pytest.raises(ValueError):
        zero.memory_per_rank(n, ranks, 4)


def test_mixed_precision_adam_holds_what_the_formula_says():
    sizes = (16, 48, 48, 5)
    trainer = zero.MixedPrecisionAdam(zero.mlp(sizes), lr=1e-2)
    X, y = zero.make_data(1, 8, sizes)
    for _ in range(2):
        trainer.zero_grad()
        loss = F.cross_entropy(trainer.model(X.bfloat16()).float(), y)
        loss.backward()
        trainer.step()
    n = count_parameters(trainer.model)
    measured = zero.measured_bytes(trainer)
    formula = zero.memory_per_rank(n)
    for key in ("params", "grads", "optimizer"):
        assert measured[key] == formula[key], key
    assert measured["counters"] == 4 * len(list(trainer.model.parameters()))
    assert next(trainer.model.parameters()).dtype == torch.bfloat16
    # activations kept for backward: the input of every Linear, 2 bytes each
    assert activation_bytes(trainer.model, (8, 16), device="cpu") == 8 * (16 + 48 + 48) * 2


def test_zero_stages_and_fsdp_match_one_process_and_the_formula():
    steps, sizes = 3, (16, 32, 32, 4)
    results = zero.compare(2, steps=steps, sizes=sizes, batch=4, timeout=120)
    reference = zero.reference_losses(2, steps, sizes, batch=4)
    for key in (0, 1, 2, 3, "fsdp2"):
        mean = [sum(r[key]["losses"][i] for r in results) / 2 for i in range(steps)]
        assert mean == pytest.approx(reference, abs=1e-5), key
        n = results[0][key]["n_params"]
        formula = zero.memory_per_rank(n, 2, 3 if key == "fsdp2" else key, "fp32")
        for r in results:
            for part in ("params", "grads", "optimizer"):
                assert r[key]["bytes"][part] == formula[part], (key, part)
    assert results[0]["fsdp2"]["param_types"] == ["DTensor"]


def sharded_sgd_step(param, grad, momentum, lr, beta):
    rank, world = dist.get_rank(), dist.get_world_size()
    n = param.numel()
    s = -(-n // world)
    padded = torch.zeros(s * world, dtype=grad.dtype)
    padded[:n] = grad
    mine = torch.empty(s, dtype=grad.dtype)
    dist.reduce_scatter_tensor(mine, padded)
    lo, hi = min(rank * s, n), min((rank + 1) * s, n)
    momentum.mul_(beta).add_(mine[:hi - lo] / world)
    update = torch.zeros(s, dtype=grad.dtype)
    update[:hi - lo] = param[lo:hi] - lr * momentum
    gathered = torch.empty(s * world, dtype=grad.dtype)
    dist.all_gather_into_tensor(gathered, update)
    param.copy_(gathered[:n])


def forgets_to_average(param, grad, momentum, lr, beta):
    rank, world = dist.get_rank(), dist.get_world_size()
    n = param.numel()
    s = -(-n // world)
    lo, hi = min(rank * s, n), min((rank + 1) * s, n)
    dist.all_reduce(grad)  # the sum of the gradients, never divided by the number of ranks
    momentum.mul_(beta).add_(grad[lo:hi])
    delta = torch.zeros(n, dtype=grad.dtype)
    delta[lo:hi] = -lr * momentum
    dist.all_reduce(delta)
    param.add_(delta)


def test_sharded_step_check_accepts_a_right_step_and_rejects_a_wrong_one():
    assert zero.check_sharded_step(sharded_sgd_step, 3, numels=(10,)) < 1e-12
    assert zero.check_sharded_step(forgets_to_average, 2, numels=(8,)) > 1e-3


def test_reference_step_is_torch_sgd_with_momentum():
    gen = torch.Generator().manual_seed(3)
    p0 = torch.randn(6, generator=gen, dtype=torch.float64)
    param = torch.nn.Parameter(p0.clone())
    opt = torch.optim.SGD([param], lr=0.1, momentum=0.9)
    mine, m = p0.clone(), torch.zeros(6, dtype=torch.float64)
    for _ in range(3):
        grads = [torch.randn(6, generator=gen, dtype=torch.float64) for _ in range(2)]
        param.grad = torch.stack(grads).mean(0)
        opt.step()
        mine, m = zero.sharded_step_reference(mine, grads, m, 0.1, 0.9)
    assert torch.allclose(param.detach(), mine)
