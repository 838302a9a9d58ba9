"""Lesson 17 on gloo processes: the expert-parallel layer equals one process and sends exactly
the analytic bytes (2 and 4 ranks), ring attention equals SDPA with both layouts, causal and
not; zig-zag balances the causal work; the two graded checks judge the reference and refuse
wrong answers (tiny tensors, few launches)."""
import inspect
import textwrap

import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F

from course_lib.checks.expert_dispatch import check_expert_dispatch
from course_lib.checks.ring_attention import check_ring_attention
from course_lib.parallel import expert_parallel as ep
from course_lib.parallel import ring_attention as ra
from course_lib.parallel.bytes_sent import BytesSent
from course_lib.parallel.launch import launch


@pytest.mark.parametrize("world", [2, 4])
def test_expert_parallel_equals_one_process_and_bytes_match(world):
    xs, logits, weights = ep.demo_problem(world, tokens=10, d=4, experts_per_rank=2, k=2, capacity_factor=1.0)
    results = launch(ep.demo_worker, world, xs, logits, weights, 2, 1.0, timeout=60)
    assert max(r["max_error"] for r in results) < 1e-6
    assert [r["bytes_measured"] for r in results] == [r["bytes_analytic"] for r in results]
    assert all(r["count_bytes"] == (world - 1) * 2 * 8 for r in results)   # E/W int64 counts to each other rank


def test_analytic_bytes_count_out_and_back():
    from course_lib.moe import Routing
    # rank 0: two kept assignments to expert 1 (rank 1), one to its own expert 0; rank 1: one to expert 0
    r0 = Routing(torch.tensor([[1], [1], [0]]), torch.ones(3, 1), torch.ones(3, 1, dtype=torch.bool), None, 3)
    r1 = Routing(torch.tensor([[0], [1]]), torch.ones(2, 1), torch.tensor([[True], [True]]), None, 3)
    assert ep.all_to_all_bytes([r0, r1], 1, d=5, element_bytes=4) == [(2 + 1) * 20, (1 + 2) * 20]


def _meter_worker():
    import torch
    import torch.distributed as dist

    from course_lib.parallel.bytes_sent import BytesSent  # noqa: F811 - the worker imports what it uses
    from course_lib.parallel.launch import init_process_group
    rank, world, _ = init_process_group("gloo", timeout=20)
    with BytesSent() as meter:
        dist.all_gather([torch.empty(3) for _ in range(world)], torch.ones(3))
        out = torch.empty(2 if rank == 0 else 4)
        dist.all_to_all_single(out, torch.ones(3), [1, 1] if rank == 0 else [2, 2], [1, 2])
        dist.all_reduce(torch.ones(4, dtype=torch.float64))
    return [(name, n) for name, n, _ in meter.calls]


def test_bytes_sent_models_each_collective():
    calls = launch(_meter_worker, 2, timeout=60)
    assert calls[0] == [("all_gather", 12), ("all_to_all_single", 8), ("all_reduce", 32)]
    assert calls[1] == [("all_gather", 12), ("all_to_all_single", 4), ("all_reduce", 32)]
    before = dist.all_to_all_single
    with BytesSent():
        assert dist.all_to_all_single is not before
    assert dist.all_to_all_single is before


@pytest.mark.parametrize("world", [2, 4])
def test_ring_attention_equals_sdpa(world):
    gen = torch.Generator().manual_seed(world)
    q, k, v = (torch.randn(2, 4 * world, 3, generator=gen, dtype=torch.float64) for _ in range(3))
    for layout in (ra.contiguous_chunks(world), ra.zigzag_chunks(world)):
        for causal in (False, True):
            results = launch(ra.demo_worker, world, q, k, v, layout, causal, timeout=60)
            out = torch.empty_like(q)
            for r in results:
                out[:, r["positions"]] = r["out"]
            assert torch.allclose(out, F.scaled_dot_product_attention(q, k, v, is_causal=causal), atol=1e-12)


def test_merge_is_exact_and_order_free():
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(5, 6, 3, generator=gen, dtype=torch.float64) for _ in range(3))
    whole = ra.block_state(q, k, v, 0.5)
    a, b = ra.block_state(q, k[:, :2], v[:, :2], 0.5), ra.block_state(q, k[:, 2:], v[:, 2:], 0.5)
    for merged in (ra.merge(a, b), ra.merge(b, a), ra.merge(None, whole)):
        assert all(torch.allclose(x, y) for x, y in zip(merged, whole))


def test_zigzag_balances_causal_work():
    assert ra.chunk_work(ra.contiguous_chunks(4)) == [1, 2, 3, 4]
    assert ra.chunk_work(ra.zigzag_chunks(4)) == [9, 9, 9, 9]
    assert ra.chunk_work(ra.contiguous_chunks(3), causal=False) == [3, 3, 3]
    held = ra.positions(ra.zigzag_chunks(3), 24)
    assert sorted(torch.cat(held).tolist()) == list(range(24))
    assert len({ra.causal_pairs(p) for p in held}) == 1


# --- the graded checks: reference passes, wrong answers are caught ---------------------------
def _shipped(fn):
    fn.__course_source__ = textwrap.dedent(inspect.getsource(fn))
    return fn


def moe_all_gather(x, experts, gates, kept, local_weights):
    """Right output, every token all-gathered: far more bytes than the budget."""
    world, rank = dist.get_world_size(), dist.get_rank()
    per_rank = local_weights.shape[0]
    parts = {}
    for name, t in (("x", x), ("e", experts), ("g", gates), ("k", kept.long())):
        gathered = [torch.empty_like(t) for _ in range(world)]
        dist.all_gather(gathered, t)
        parts[name] = torch.cat(gathered)
    full = torch.zeros_like(parts["x"])
    for local in range(per_rank):
        token, choice = ((parts["e"] == rank * per_rank + local) & (parts["k"] == 1)).nonzero(as_tuple=True)
        gated = parts["g"][token, choice, None] * torch.tanh(parts["x"][token] @ local_weights[local])
        full.index_add_(0, token, gated)
    dist.all_reduce(full)
    return full[rank * x.shape[0]:(rank + 1) * x.shape[0]]


def moe_library(x, experts, gates, kept, local_weights):
    from course_lib.moe import Routing
    from course_lib.parallel.expert_parallel import expert_parallel_forward
    return expert_parallel_forward(x, Routing(experts, gates, kept, None, 0), local_weights)


def test_dispatch_check_sees_all_gather_bytes_and_library_imports():
    gathered = check_expert_dispatch(_shipped(moe_all_gather), world_size=2, cases=((6, 4, 1, 2, 1.0, 0.0),))
    assert gathered["error"] < 1e-5
    assert gathered["bytes_sent"][0][0] > gathered["bytes_expected"][0][0]
    library = check_expert_dispatch(_shipped(moe_library), world_size=2, cases=((6, 4, 1, 2, 1.0, 0.0),))
    assert library["error"] < 1e-5 and library["bytes_sent"] == library["bytes_expected"]
    assert "course_lib.parallel.expert_parallel" in library["library_modules"]


def ring_unrescaled(q, k, v, causal):
    """Gathers the keys by send/recv, merges states without rescaling."""
    rank, world = dist.get_rank(), dist.get_world_size()
    scale = q.shape[-1] ** -0.5
    total, o = torch.zeros(q.shape[:-1], dtype=q.dtype), torch.zeros_like(q)
    kv = torch.stack([k, v])
    for step in range(world):
        source = (rank - step) % world
        if step < world - 1:
            incoming = torch.empty_like(kv)
            requests = [dist.isend(kv, (rank + 1) % world), dist.irecv(incoming, (rank - 1) % world)]
        if not (causal and source > rank):
            s = q @ kv[0].transpose(-2, -1) * scale
            if causal and source == rank:
                s = s.masked_fill(torch.ones(s.shape[-2:], dtype=torch.bool).triu(1), -float("inf"))
            p = torch.exp(s - s.amax(-1, keepdim=True))
            total, o = total + p.sum(-1), o + p @ kv[1]
        if step < world - 1:
            for request in requests:
                request.wait()
            kv = incoming
    return o / total[..., None]


def ring_all_gather(q, k, v, causal):
    kv = [torch.empty_like(k) for _ in range(dist.get_world_size())]
    dist.all_gather(kv, k)     # refused: collectives are switched off in this check
    return q


def test_ring_check_catches_unrescaled_merge_and_collectives():
    result = check_ring_attention(_shipped(ring_unrescaled), world_size=2, sizes=((3, 2, 4),))
    assert result["error"] > 1e-3 and result["causal_error"] > 1e-3
    from course_lib.parallel.launch import WorkerFailed
    with pytest.raises(WorkerFailed, match="not allowed"):
        check_ring_attention(_shipped(ring_all_gather), world_size=2, sizes=((2, 1, 2),))
