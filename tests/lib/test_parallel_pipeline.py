"""Pipeline schedules: simulated makespan and bubble, validity, real runs on 2 processes."""
import pytest

from course_lib import schedule
from course_lib.parallel import pipeline as pp


def one_f_one_b(p, m):  # the lesson builds this in the notebook; the tests need one too
    order = []
    for s in range(p):
        warm = min(p - 1 - s, m)
        ops = [("F", i) for i in range(warm)]
        for i in range(warm, m):
            ops += [("F", i), ("B", i - warm)]
        ops += [("B", i) for i in range(m - warm, m)]
        order.append(ops)
    return order


@pytest.mark.parametrize("p,m", [(2, 1), (2, 4), (4, 8), (3, 2), (4, 16)])
def test_gpipe_and_1f1b_have_the_same_bubble_but_not_the_same_memory(p, m):
    for order in (pp.gpipe_order(p, m), one_f_one_b(p, m)):
        sched = pp.simulate(order, t_f=1.0, t_b=2.0)
        assert schedule.validate(sched, pp.as_tasks(order, 1.0, 2.0)) == []
        assert sched.makespan == pytest.approx((m + p - 1) * 3.0)
        assert pp.idle_fraction(sched) == pytest.approx((p - 1) / (m + p - 1))
    assert pp.peak_in_flight(pp.gpipe_order(p, m)) == [m] * p
    assert pp.peak_in_flight(one_f_one_b(p, m)) == [min(p - s, m) for s in range(p)]


def test_simulate_rejects_deadlocks_and_missing_operations():
    backwards_first = [[("B", 0), ("F", 0)], [("F", 0), ("B", 0)]]
    with pytest.raises(ValueError, match="deadlock"):
        pp.simulate(backwards_first)
    with pytest.raises(ValueError, match="once each"):
        pp.simulate([[("F", 0)], [("F", 0), ("B", 0)]])


def test_split_stages_covers_the_model():
    model = pp.make_model(depth=3)
    stages = pp.split_stages(model, 3)
    assert sum(len(s) for s in stages) == len(model)


def test_gantt_draws_one_bar_per_operation():
    import matplotlib
    matplotlib.use("Agg")
    sched = pp.simulate(pp.gpipe_order(2, 3))
    ax = pp.gantt(sched)
    assert len(ax.collections) == 12


def test_two_stage_pipeline_by_hand_and_with_torch_pipelining_equal_one_process():
    loss, _ = pp.reference()
    orders = {"gpipe": pp.gpipe_order(2, 4), "1f1b": one_f_one_b(2, 4)}
    runs = pp.run_orders(orders, 4, timeout=120)
    runs["alone"] = pp.run(orders["1f1b"], 4, warmup=False, timeout=120)
    for name, results in runs.items():
        order = orders.get(name, orders["1f1b"])
        assert results[1]["loss"] == pytest.approx(loss, abs=1e-5)
        assert all(r["grad_error"] < 1e-6 for r in results)
        assert [name for name, _, _ in results[0]["events"]] == [f"{k}{i}" for k, i in order[0]]
    results = pp.run_torch("1f1b", 2, micro_batches=4, timeout=120)
    assert results[1]["loss"] == pytest.approx(loss, abs=1e-5)
    assert all(r["grad_error"] < 1e-6 for r in results)
    assert [r["order"] for r in results] == one_f_one_b(2, 4)  # torch's Schedule1F1B runs 1F1B
