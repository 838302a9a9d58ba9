"""course_lib.parallel.fsdp: the traffic formula, the collective log's totals and the parameter
bytes a rank holds (lesson 13); check_fsdp's reference training."""
import torch
import torch.nn.functional as F

from course_lib.checks import fsdp as fsdp_check
from course_lib.parallel import fsdp


def test_traffic_per_step_counts_two_gathers_and_one_reduce_scatter_per_unit():
    # units of 10 and 7 elements on 4 ranks: shards of 3 and 2, padded to 12 and 8
    got = fsdp.traffic_per_step([10, 7], 4, compute_bytes=2)
    assert got == {"all_gather": 2 * 20 * 2, "reduce_scatter": 20 * 4, "ring_sent": (80 + 80) * 3 / 4}
    assert fsdp.shard_elements(10, 4) == 3 and fsdp.shard_elements(8, 4) == 2


def test_totals_groups_every_variant_of_a_collective():
    calls = [["all_gather_into_tensor", 8, "float32"], ["all_gather_single", 4, "bfloat16"],
             ["reduce_scatter_tensor", 16, "float32"], ["all_reduce", 2, "float32"]]
    assert fsdp.totals(calls) == {"all_gather": 12, "reduce_scatter": 16, "all_reduce": 2, "broadcast": 0}


def test_parameter_bytes_follow_what_keeps_a_storage():
    W = torch.randn(4, 6)
    memory = fsdp.ParameterBytes([W.shape])
    memory.add(W)
    assert memory.live() == 96
    W.untyped_storage().resize_(0)          # FSDP's way of freeing
    assert memory.live() == 0
    gathered = torch.randn(4, 6, requires_grad=True) * 1.0
    x = torch.randn(2, 6, requires_grad=True)
    with memory.saving():
        y = F.linear(x, gathered)          # autograd saves the weight
    del gathered
    assert memory.sample() == 96           # held by the graph alone
    y.sum().backward()
    del y
    assert memory.live() == 0


def test_units_are_modules_with_parameters_of_their_own():
    model = fsdp.make_model("mlp", 0)
    assert [type(m).__name__ for m in fsdp.units(model)] == ["Linear"] * 5


def test_reference_mixed_precision_training_stays_near_fp32():
    model = fsdp.make_model("mlp", 1)
    state = model.state_dict()
    gen = torch.Generator().manual_seed(0)
    batches = [(torch.randn(4, 8, generator=gen), torch.randint(0, 4, (4,), generator=gen)) for _ in range(3)]
    full = fsdp_check.reference_training("mlp", state, batches, None)
    half = fsdp_check.reference_training("mlp", state, batches, "bfloat16")
    gap = max(float((full[k] - half[k]).abs().max()) for k in full)
    assert 0 < gap < 5e-2
    assert set(full) == {k for k, _ in model.named_parameters()}
