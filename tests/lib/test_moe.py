"""The mixture-of-experts layer on one process (lesson 17): the router's capacity and dropped
tokens against a count by hand, Switch Transformer's balancing loss at its two ends, the layer
against a loop over tokens, and the step roofline's formula."""
import math

import pytest
import torch

from course_lib import moe


def test_capacity_is_the_ceiling_of_the_share():
    assert moe.capacity(12, 4, 2, 1.0) == 6
    assert moe.capacity(6, 4, 2, 0.75) == 3          # ceil(2.25)
    assert moe.capacity(10, 3, 1, 1.0) == 4


def test_router_fills_first_choices_first_in_token_order():
    probs = torch.tensor([[.6, .3, .1], [.7, .2, .1], [.5, .1, .4], [.2, .7, .1]])
    routing = moe.top_k_route(probs.log(), 2, 0.75)      # capacity ceil(0.75 * 2 * 4 / 3) = 2
    assert routing.capacity == 2
    assert routing.experts.tolist() == [[0, 1], [0, 1], [0, 2], [1, 0]]
    # first choices: expert 0 gets tokens 0, 1 (full), token 2 dropped; expert 1 token 3
    # second choices in token order: expert 1 token 0 (full now), token 1 dropped; expert 2 token 2; expert 0 full
    assert routing.kept.tolist() == [[True, True], [True, False], [False, True], [True, False]]
    assert routing.slot.tolist() == [[0, 1], [1, -1], [-1, 0], [0, -1]]
    assert routing.load(3).tolist() == [2, 2, 1]
    assert routing.dropped_fraction() == pytest.approx(3 / 8)
    assert torch.allclose(routing.gates, probs.topk(2).values, atol=1e-6)


def test_large_capacity_drops_nothing_and_kept_never_exceeds_capacity():
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(40, 5, generator=gen) + torch.arange(5.0)
    assert moe.top_k_route(logits, 2, 10.0).dropped_fraction() == 0.0
    routing = moe.top_k_route(logits, 2, 0.5)
    assert int(routing.load(5).max()) <= routing.capacity


def test_switch_loss_is_alpha_when_uniform_and_alpha_e_when_collapsed():
    n_experts = 4
    uniform = torch.eye(n_experts).repeat(3, 1) * 0.0 + torch.arange(n_experts).repeat(3)[:, None].eq(
        torch.arange(n_experts)).float() * 1e-3         # every expert first choice equally often, near-equal probs
    assert float(moe.switch_balancing_loss(uniform, alpha=0.5)) == pytest.approx(0.5, rel=1e-3)
    collapsed = torch.zeros(8, n_experts)
    collapsed[:, 0] = 50.0
    assert float(moe.switch_balancing_loss(collapsed, alpha=0.5)) == pytest.approx(0.5 * n_experts, rel=1e-6)


def test_switch_loss_gradient_lowers_the_overloaded_expert():
    logits = torch.tensor([[2.0, 0.0, 0.0], [1.5, 0.2, 0.0], [0.0, 1.0, 0.0]], requires_grad=True)
    moe.switch_balancing_loss(logits, alpha=1.0).backward()
    assert logits.grad[:, 0].sum() > 0 > logits.grad[:, 2].sum()   # a descent step lowers expert 0's score


def test_layer_equals_a_loop_over_tokens():
    gen = torch.Generator().manual_seed(1)
    x, weights = torch.randn(9, 4, generator=gen), torch.randn(3, 4, 4, generator=gen)
    routing = moe.top_k_route(torch.randn(9, 3, generator=gen), 2, 0.7)
    y = moe.moe_forward(x, routing, weights)
    for t in range(9):
        want = sum(routing.gates[t, c] * moe.expert(x[t:t + 1], weights[routing.experts[t, c]])[0]
                   for c in range(2) if routing.kept[t, c])
        assert torch.allclose(y[t], torch.as_tensor(want, dtype=y.dtype).expand(4), atol=1e-6)


def test_dropped_share_falls_with_the_capacity_factor():
    rows = moe.dropped_vs_capacity(64, 4, 2, [0.5, 1.0, 4.0], skew=2.0, trials=2)
    dropped = [r["dropped"] for r in rows]
    assert dropped[0] >= 0.5 - 1e-9 and dropped[0] > dropped[1] > dropped[2] == 0.0
    assert all(r["max_over_mean"] > 1.0 for r in rows)


def test_step_costs_ratio_is_flops_over_link_over_d_ff():
    costs = moe.step_costs(tokens=1000, d_model=512, d_ff=2048, k=2, world=4, link_bytes_per_s=1e11,
                           flops_per_s=1e15)
    ratio = costs["all_to_all_s"] / costs["compute_s"]
    assert ratio == pytest.approx(3 / 4 * 1e15 / (1e11 * 2048))
    assert costs["bytes"] == pytest.approx(2 * 2000 * 3 / 4 * 512 * 2)
    assert math.isclose(costs["flops"], 4 * 512 * 2048 * 2000)
