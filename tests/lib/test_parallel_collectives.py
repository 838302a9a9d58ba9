"""Allreduce schedules against dist.all_reduce, the ring schedule, and the cost model."""
import math

import pytest
import torch
import torch.distributed as dist

from course_lib.checks.collectives import check_allreduce
from course_lib.parallel import collectives as c
from course_lib.parallel.launch import WorkerFailed

SIZES = [0, 1, 2, 5, 7, 13, 64, 1001]  # includes sizes not divisible by 2, 3 or 4


@pytest.mark.parametrize("world", [2, 3, 4])
def test_every_allreduce_equals_dist_all_reduce(world):
    errors = c.check_against_builtin(world, SIZES, timeout=90)
    assert set(errors) == {"naive", "tree", "ring"}
    for name, error in errors.items():
        assert error < 1e-12, (name, world, error)


def test_ring_schedule_shape_and_neighbours():
    for n in range(2, 7):
        steps = c.ring_schedule(n)
        assert len(steps) == 2 * (n - 1)
        for number, step in enumerate(steps):
            assert sorted(src for src, _, _ in step) == list(range(n))
            assert all(dst == (src + 1) % n for src, dst, _ in step)
            assert sorted(chunk for _, _, chunk in step) == list(range(n))
            assert all(chunk == c.ring_chunk(src, number, n) for src, _, chunk in step)
    assert c.ring_schedule(2) == [[(0, 1, 0), (1, 0, 1)], [(0, 1, 1), (1, 0, 0)]]


@pytest.mark.parametrize("n,size", [(2, 5), (3, 7), (4, 4), (4, 3), (5, 12)])
def test_simulated_ring_sums_and_keeps_inputs(n, size):
    gen = torch.Generator().manual_seed(n)
    xs = [torch.randn(size, generator=gen, dtype=torch.float64) for _ in range(n)]
    before = [x.clone() for x in xs]
    out = c.simulate_ring_allreduce(xs)
    total = sum(before)
    for o in out:
        assert torch.allclose(o, total)
    for x, b in zip(xs, before):
        assert torch.equal(x, b)
    # after reduce-scatter, rank r holds the finished chunk r + 1
    half = c.simulate_ring_allreduce(xs, steps=n - 1)
    for r in range(n):
        finished = (r + 1) % n
        assert torch.allclose(torch.tensor_split(half[r], n)[finished],
                              torch.tensor_split(total, n)[finished])


def test_simulate_runs_another_schedule():
    n = 3
    backwards = [[(r, (r - 1) % n, (r + s) % n) for r in range(n)] for s in range(n - 1)]
    backwards += [[(r, (r - 1) % n, (r + s - 1) % n) for r in range(n)] for s in range(n - 1)]
    xs = [torch.randn(6, dtype=torch.float64) for _ in range(n)]
    for o in c.simulate_ring_allreduce(xs, schedule=backwards):
        assert torch.allclose(o, sum(xs))


def test_cited_worked_numbers():
    # Dive into Deep Learning, 12.7.1: 160 MB of gradients, 4 GPUs behind a 16 GB/s PCIe switch
    assert math.isclose(c.aggregate_on_one_gpu_seconds(160e6, 4, 16e9), 0.060)
    assert math.isclose(c.aggregate_on_cpu_seconds(160e6, 4, 16e9), 0.080)
    assert math.isclose(c.split_aggregate_seconds(160e6, 4, 16e9), 0.015)


def test_nvlink_ring_on_8_v100s():
    # lesson 11's slide: NVLink 2.0 moves 25 GB/s per link and direction (NVIDIA's V100
    # whitepaper, 2017); the rings give each GPU 3 links to its neighbour, 75 GB/s.
    # 2 (p-1)/p * bytes / bandwidth = 2 * 7/8 * 160 MB / 75 GB/s = 3.73 ms; the limit 2 S / B = 4.27 ms
    exact = c.ring_allreduce_seconds(160e6, 8, 3 * 25e9)
    assert math.isclose(exact, 2 * 7 / 8 * 160e6 / 75e9)
    assert round(exact * 1e3, 2) == 3.73
    assert round(c.ring_allreduce_limit_seconds(160e6, 3 * 25e9) * 1e3, 2) == 4.27


def test_transfer_and_latency_terms():
    assert c.transfer_seconds(1e9, 1e9) == 1.0
    assert c.transfer_seconds(0, 1e9, latency=2e-6) == 2e-6
    assert c.ring_allreduce_seconds(1e6, 1, 1e9) == 0.0
    assert c.tree_allreduce_seconds(1e6, 1, 1e9) == 0.0
    assert math.isclose(c.tree_allreduce_seconds(1e6, 5, 1e9), 2 * 3 * 1e-3)
    assert math.isclose(c.naive_allreduce_seconds(1e6, 4, 1e9, 1e-3), 6 * 2e-3)
    # the ring's time hardly grows with n; the naive one grows linearly
    ring = [c.ring_allreduce_seconds(1e8, n, 1e10) for n in (2, 4, 8, 16)]
    assert ring == sorted(ring) and ring[-1] < 2 * ring[0]
    assert c.naive_allreduce_seconds(1e8, 16, 1e10) > 7 * c.naive_allreduce_seconds(1e8, 2, 1e10)


def test_strategy_seconds_lists_every_strategy():
    times = c.strategy_seconds(160e6, 4, 16e9)
    assert set(times) == set(c.STRATEGIES)
    assert math.isclose(times["split over all GPUs"], 0.015)


def test_fit_latency_bandwidth_recovers_the_model():
    numels = [1e5, 1e6, 4e6]
    n, alpha, bw = 4, 1e-4, 2e9
    seconds = [c.ring_allreduce_seconds(4 * k, n, bw, alpha) for k in numels]
    a, b = c.fit_latency_bandwidth(numels, seconds, n)
    assert math.isclose(a, alpha, rel_tol=1e-6) and math.isclose(b, bw, rel_tol=1e-6)


def test_measure_allreduce_returns_positive_seconds():
    table = c.measure_allreduce(2, [1000], names=("ring", "builtin"), repeat=2, timeout=90)
    assert set(table) == {"ring", "builtin"}
    assert all(table[k][1000] > 0 for k in table)


def student_ring(tensor):
    dist.all_reduce(tensor)
    return tensor


def student_forgets_to_add(tensor):
    return tensor


def student_send_recv(tensor):
    other = 1 - dist.get_rank()
    buffer = torch.empty_like(tensor)
    request = dist.isend(tensor.clone(), dst=other)
    dist.recv(buffer, src=other)
    request.wait()
    tensor += buffer
    return tensor


def student_returns_a_new_tensor(tensor):
    other = 1 - dist.get_rank()
    buffer = torch.empty_like(tensor)
    request = dist.isend(tensor.clone(), dst=other)
    dist.recv(buffer, src=other)
    request.wait()
    return tensor + buffer


def student_calls_the_library(tensor):
    from course_lib.parallel.collectives import ring_allreduce
    return ring_allreduce(tensor)


def student_reimports_the_collective(tensor):
    import torch.distributed as d
    d.all_reduce(tensor)
    return tensor


def student_calls_the_group(tensor):
    import torch.distributed as d
    d.group.WORLD.allreduce([tensor]).wait()
    return tensor


def student_returns_a_list(tensor):
    return tensor.tolist()


def student_rewrites_the_check_in_its_worker(tensor):
    import sys
    for name in ("course_lib.checks.collectives", "course_lib.checks.worker_results"):
        sys.modules[name].worst = lambda values: 0.0
        sys.modules[name].difference = lambda got, expected: 0.0
    module = sys.modules["course_lib.checks.collectives"]
    module.check_allreduce = lambda *a, **k: {"error": 0.0, "in_place_error": 0.0}
    return tensor.mul_(3.0)


def test_collectives_are_refused_however_they_are_reached():
    for fn in (student_reimports_the_collective, student_calls_the_group):
        with pytest.raises(WorkerFailed, match="is not allowed in this exercise"):
            check_allreduce(fn, world_size=2, sizes=(3,))


def test_the_verdict_is_computed_by_the_caller():
    assert check_allreduce(student_returns_a_list, world_size=2, sizes=(3,))["error"] == math.inf
    patched = check_allreduce(student_rewrites_the_check_in_its_worker, world_size=2, sizes=(3, 5))
    assert patched["error"] > 0.1 and patched["in_place_error"] > 0.1


def test_check_allreduce_of_a_shipped_function():
    good = check_allreduce(student_send_recv, world_size=2, sizes=(1, 5, (2, 3)))
    assert good == {"error": 0.0, "in_place_error": 0.0, "returns_input": True, "library_modules": []}
    assert check_allreduce(student_forgets_to_add, world_size=2, sizes=(1, 5))["error"] > 0.0
    assert check_allreduce(student_ring, world_size=2, sizes=(1,), point_to_point_only=False)["error"] == 0
    with pytest.raises(WorkerFailed, match="dist.all_reduce is not allowed"):
        check_allreduce(student_ring, world_size=2, sizes=(1,))


def test_check_allreduce_sees_a_new_tensor_and_the_library():
    fresh = check_allreduce(student_returns_a_new_tensor, world_size=2, sizes=(3, (2, 2)))
    assert fresh["error"] < 1e-12  # the returned value is right ...
    assert fresh["in_place_error"] > 0 and not fresh["returns_input"]  # ... but not in place
    library = check_allreduce(student_calls_the_library, world_size=2, sizes=(4,))
    assert library["error"] < 1e-12 and "course_lib.parallel.collectives" in library["library_modules"]


def test_check_and_measure_in_one_launch():
    out = c.check_and_measure(3, check_sizes=(0, 4), numels=(1000,), names=("tree", "builtin"),
                              repeat=2, timeout=90)
    assert max(out["errors"].values()) < 1e-12
    assert set(out["seconds"]) == {"tree", "builtin"}
