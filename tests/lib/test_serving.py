"""Lesson 16's modules: kv_cache, tiny_lm, inference_cost, paged_kv, serving_sim, speculative."""
import math

import pytest
import torch

from course_lib import inference_cost as ic
from course_lib import kv_cache, paged_kv, serving_sim, speculative, tiny_lm


def test_kv_bytes_per_token_of_published_shapes():
    s = kv_cache.MODEL_SHAPES["Llama 3 8B (GQA)"]
    assert kv_cache.kv_bytes_per_token(s["layers"], s["kv_heads"], s["head_dim"], 2) == 131072   # 128 KiB
    s = kv_cache.MODEL_SHAPES["Llama 3 70B (GQA)"]
    assert kv_cache.kv_bytes_per_token(s["layers"], s["kv_heads"], s["head_dim"], 2) == 327680
    assert all("config.json" in s["source"] for s in kv_cache.MODEL_SHAPES.values())


@pytest.mark.parametrize("kv_heads", [4, 2, 1])
def test_cached_generation_equals_uncached(kv_heads):
    torch.set_num_threads(1)
    model = tiny_lm.make_lm(3, vocab=32, d_model=32, heads=4, kv_heads=kv_heads, layers=2, max_len=40)
    prompt = torch.randint(0, 32, (2, 5), generator=torch.Generator().manual_seed(0))
    cached, plain = tiny_lm.generate(model, prompt, 12, cache=True), tiny_lm.generate(model, prompt, 12, cache=False)
    assert torch.equal(cached, plain)
    g1, g2 = torch.Generator().manual_seed(7), torch.Generator().manual_seed(7)
    sampled = tiny_lm.generate(model, prompt, 8, True, 1.0, g1)
    assert torch.equal(sampled, tiny_lm.generate(model, prompt, 8, False, 1.0, g2))


def test_cache_holds_the_keys_of_a_full_forward():
    model = tiny_lm.make_lm(1, vocab=16, d_model=16, heads=2, kv_heads=1, layers=2, max_len=16)
    tokens = torch.randint(0, 16, (1, 9))
    k, v = model.keys_values(tokens)
    cache = model.new_cache(1, 9)
    with torch.no_grad():
        model(tokens[:, :4], cache)
        for t in range(4, 9):
            model(tokens[:, t:t + 1], cache, t)
    assert torch.allclose(cache.k, k, atol=1e-6) and torch.allclose(cache.v, v, atol=1e-6)
    assert cache.nbytes() == 2 * 2 * 1 * 1 * 9 * 8 * 4


def test_seconds_per_token_counts_every_step():
    model = tiny_lm.make_lm(0, vocab=16, d_model=16, heads=2, kv_heads=2, layers=1, max_len=32)
    times = tiny_lm.seconds_per_token(model, torch.zeros(1, 3, dtype=torch.long), 6, cache=True)
    assert len(times) == 6 and all(t > 0 for t in times)


def test_decode_is_memory_bound_and_prefill_compute_bound_on_an_h100():
    shape = ic.published("Llama 3 8B (GQA)")
    peak, bandwidth = ic.gpu_roof("H100")
    ridge = peak / bandwidth
    assert ic.intensity(shape, 1, 1, 1000) < 2 < ridge < ic.intensity(shape, 1, 1000, 0)
    assert math.isinf(ic.critical_batch(shape, 4096, peak, bandwidth))
    b = ic.critical_batch(shape, 0, peak, bandwidth)
    flops_time = ic.step_flops(shape, round(b), 1, 0) / peak
    assert flops_time == pytest.approx(ic.step_bytes(shape, round(b), 1, 0) / bandwidth, rel=0.01)
    assert ic.step_flops(shape, 2, 3, 4) == 2 * (2 * shape.params * 3 + 4 * 32 * 32 * 128 * (12 + 6))


def test_paged_allocator_shares_full_blocks_and_copies_the_partial_one():
    cache = paged_kv.PagedKVCache(8, 4)
    cache.add("a", 6)
    assert cache.tables["a"] == [0, 1] and cache.slot("a", 5) == (1, 1)
    cache.fork("a", "b")
    assert cache.tables["b"] == [0, 2] and cache.refcount[:3] == [2, 1, 1] and cache.copies == 1
    cache.release("a")
    assert sorted(cache.free_blocks) == [1, 3, 4, 5, 6, 7] and cache.used_blocks() == 2
    with pytest.raises(MemoryError):
        cache.extend("b", 100)


def test_reserved_slots_paged_wastes_less_than_a_block_per_request():
    trace = [(0, 5, 10), (2, 30, 4), (3, 1, 20)]
    r = paged_kv.reserved_slots(trace, max_len=64, block_size=8)
    for step, used in enumerate(r["used"]):
        live = sum(a <= step < a + o for a, _, o in trace)
        assert used <= r["paged"][step] < used + 8 * live or live == 0
        assert r["contiguous_max"][step] == 64 * live
    assert r["used"][0] == 6


def _paged(running, waiting, budget):
    while running and sum(t + 1 for _, t in running) > budget:
        waiting.insert(0, running.pop())
    need = sum(t + 1 for _, t in running)
    while waiting and need + waiting[0][1] + 1 <= budget:
        need += waiting[0][1] + 1
        running.append(waiting.pop(0))
    return running, waiting


def test_continuous_batching_beats_static_within_budget():
    shape, (peak, bandwidth) = ic.published("Llama 2 7B (MHA)"), ic.gpu_roof("H100")
    trace = serving_sim.make_trace(16, 100, (4, 24), (4, 24), seed=3)
    runs = {name: serving_sim.simulate(trace, s, 160, shape, peak, bandwidth)
            for name, s in (("static", serving_sim.static_scheduler(4, 48)),
                            ("reserve", serving_sim.reserving_scheduler(48)), ("paged", _paged))}
    assert all(r["finished"] == 16 and r["over_budget"] <= 0 for r in runs.values())
    assert runs["static"]["throughput"] < runs["reserve"]["throughput"] < runs["paged"]["throughput"]
    assert runs["paged"]["evictions"] > 0 and runs["static"]["ttft_p50"] > runs["paged"]["ttft_p50"]
    with pytest.raises(RuntimeError):
        serving_sim.simulate(trace, lambda r, w, b: ([], w), 160, shape, peak, bandwidth)


def test_speculative_greedy_equals_target_and_formula():
    assert speculative.expected_tokens_per_step(0.0, 4) == 1
    assert speculative.expected_tokens_per_step(1.0, 4) == 5
    assert speculative.expected_tokens_per_step(0.5, 2) == pytest.approx(1.75)
    assert speculative.acceptance_rate([4, 0, 1], 4) == pytest.approx(5 / 7)
    target = tiny_lm.make_lm(0, vocab=32, d_model=32, heads=4, kv_heads=2, layers=4, max_len=64)
    draft = tiny_lm.draft_of(target, 1)
    prompt = torch.randint(0, 32, (1, 4), generator=torch.Generator().manual_seed(2))
    out = speculative.speculative_greedy(target, draft, prompt, 20, 3)
    assert out["tokens"] == tiny_lm.generate(target, prompt, 20)[0].tolist()
    assert sum(a + 1 for a in out["accepted"]) >= 20 and out["rounds"] == len(out["accepted"])


def test_allocator_check_accepts_the_rules_and_names_a_broken_one():
    from course_lib.checks import CheckFailed
    from course_lib.checks.paged_allocator import check_run, random_ops

    def snap(result, tables, lengths, refcount, free):
        return {"result": result, "tables": tables, "lengths": lengths, "refcount": refcount, "free": free}

    ops = [["allocate", 0], ["append", 0], ["fork", 0, 1], ["append", 1], ["free", 0]]
    good = [snap(None, {0: []}, {0: 0}, [0, 0, 0], [0, 1, 2]),
            snap([0, 0, None], {0: [0]}, {0: 1}, [1, 0, 0], [1, 2]),
            snap(None, {0: [0], 1: [0]}, {0: 1, 1: 1}, [2, 0, 0], [1, 2]),
            snap([1, 1, 0], {0: [0], 1: [1]}, {0: 1, 1: 2}, [1, 1, 0], [2]),
            snap(None, {1: [1]}, {1: 2}, [0, 1, 0], [0, 2])]
    assert check_run(ops, good, 3, 2) == 5
    leaked = good[:4] + [snap(None, {1: [1]}, {1: 2}, [0, 0, 0], [0, 1, 2])]
    with pytest.raises(CheckFailed, match="operation 4"):
        check_run(ops, leaked, 3, 2)
    in_place = good[:3] + [snap([0, 1, None], {0: [0], 1: [0]}, {0: 1, 1: 2}, [2, 0, 0], [1, 2])]
    with pytest.raises(CheckFailed, match="copy-on-write"):
        check_run(ops[:4], in_place, 3, 2)
    assert all(op[0] in ("allocate", "append", "fork", "free") for op in random_ops(0, 50))


def test_decode_throughput_and_cost_shape():
    model = tiny_lm.make_lm(0, vocab=16, d_model=16, heads=4, kv_heads=2, layers=2, max_len=64)
    shape = tiny_lm.cost_shape(model)
    assert shape.params == sum(p.numel() for p in model.parameters()) and shape.bytes_per_value == 4
    assert shape.kv_bytes_per_token == 2 * 2 * 2 * 4 * 4
    assert tiny_lm.decode_tokens_per_second(model, batch=2, context=8, steps=3) > 0
