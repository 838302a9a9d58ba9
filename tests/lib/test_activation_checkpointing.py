"""course_lib.activation_checkpointing: what a checkpointed block keeps and what it recomputes,
measured against the transformer block's formulas (lesson 08)."""
import torch

from course_lib import activation_checkpointing as ac
from course_lib import transformer_block as tb

SPECS = [(4, 32), (2, 48), (8, 16)]
B, S, D = 2, 8, 16


def test_kept_bytes_and_recomputed_flops_follow_the_formulas():
    stack = ac.BlockStack(D, SPECS)
    x = torch.randn(B, S, D)
    full = [tb.activation_bytes_per_layer(B, S, D, h, f)["total"] for h, f in SPECS]
    plan = [True, False, True]
    assert ac.kept_bytes(stack, x) == sum(full)
    assert ac.kept_bytes(stack, x, plan) == full[1] + 2 * B * S * D * 4   # a checkpointed block keeps its input
    # the recomputation redoes the forward except fc2's product (nobody saved its output)
    redo = [tb.flops_per_token(D, S, f) * B * S - 2 * B * S * f * D for _, f in SPECS]
    assert ac.step_flops(stack, x, plan) - ac.step_flops(stack, x) == redo[0] + redo[2]


def test_checkpointing_leaves_the_gradients_unchanged():
    stack = ac.BlockStack(D, SPECS, seed=3)
    x = torch.randn(B, S, D)
    grads = []
    for plan in ([False] * 3, [True] * 3):
        stack.zero_grad()
        stack(x, plan).square().sum().backward()
        grads.append([p.grad.clone() for p in stack.parameters()])
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(*grads))


def test_checkpoint_from_first_fills_in_order():
    costs = [{"activations": 70, "checkpointed": 10, "recompute_flops": 30},
             {"activations": 100, "checkpointed": 10, "recompute_flops": 50}]
    assert ac.checkpoint_from_first(costs, 170) == [False, False]
    assert ac.checkpoint_from_first(costs, 110) == [True, False]
    assert ac.checkpoint_from_first(costs, 20) == [True, True]
    assert ac.checkpoint_from_first(costs, 19) is None
