"""Tests of the dependency-graph scheduler."""
import itertools

import pytest
import torch

from course_lib import schedule as sch
from course_lib.schedule import Task

DIAMOND = [Task("a", 1), Task("b", 2, ("a",)), Task("c", 3, ("a",)), Task("d", 1, ("b", "c"))]


def test_topological_order_and_unknown_dependencies():
    order = sch.topological_order(DIAMOND)
    assert order.index("a") < order.index("b") < order.index("d")
    with pytest.raises(ValueError):
        sch.as_graph([Task("x", 1, ("missing",))])


def test_task_durations_per_device_and_pinning():
    t = Task("mm", {"cpu": 4.0, "gpu": 1.0})
    assert t.seconds_on("gpu") == 1.0 and t.can_run_on("cpu") and not t.can_run_on("tpu")
    pinned = Task("copy", 2.0, device="pcie")
    assert pinned.can_run_on("pcie") and not pinned.can_run_on("gpu")
    with pytest.raises(KeyError):
        pinned.seconds_on("gpu")


def test_critical_path_is_a_lower_bound_and_list_schedule_reaches_it_on_a_diamond():
    length, path = sch.critical_path(DIAMOND, ["d0", "d1"])
    assert length == 5 and path == ["a", "c", "d"]
    two = sch.list_schedule(DIAMOND, ["d0", "d1"])
    one = sch.list_schedule(DIAMOND, ["d0"])
    assert sch.validate(two, DIAMOND) == [] and sch.validate(one, DIAMOND) == []
    assert two.makespan == 5 and one.makespan == 7
    assert two.busy_seconds("d0") + two.busy_seconds("d1") == 7


def test_list_schedule_uses_the_faster_device():
    tasks = [Task("x", {"cpu": 10.0, "gpu": 1.0}), Task("y", {"cpu": 10.0, "gpu": 1.0}, ("x",))]
    s = sch.list_schedule(tasks, ["cpu", "gpu"])
    assert s.assignment() == {"x": "gpu", "y": "gpu"} and s.makespan == 2


def exhaustive_best(tasks, devices):
    """The shortest schedule over every assignment (the check of lesson 07's exercise 3)."""
    names = [t.name for t in tasks]
    return min((sch.schedule_assignment(tasks, dict(zip(names, combo)), devices)
                for combo in itertools.product(devices, repeat=len(names))), key=lambda s: s.makespan)


def test_list_scheduling_is_a_heuristic_no_better_than_the_optimum():
    tasks = [Task("a", 3), Task("b", 3), Task("c", 2), Task("d", 2), Task("e", 2)]
    best = exhaustive_best(tasks, ["d0", "d1"])
    assert best.makespan == 6          # {3,3} vs {2,2,2}
    assert best.makespan <= sch.list_schedule(tasks, ["d0", "d1"]).makespan
    assert sch.validate(best, tasks) == []


def test_schedule_assignment_follows_the_choice_and_reports_missing_tasks():
    s = sch.schedule_assignment(DIAMOND, {"a": "d0", "b": "d0", "c": "d0", "d": "d1"})
    assert s.slot("d").device == "d1" and s.makespan == 7
    with pytest.raises(ValueError):
        sch.schedule_assignment(DIAMOND, {"a": "d0"})


def test_validate_finds_each_kind_of_problem():
    bad = sch.Schedule([sch.Slot("a", "d0", 0, 1), sch.Slot("b", "d0", 0.5, 2.5),
                        sch.Slot("c", "d1", 0.5, 2.0), sch.Slot("c", "d1", 3, 5)])
    problems = " | ".join(sch.validate(bad, DIAMOND))
    assert "'d' is not scheduled" in problems
    assert "more than once" in problems
    assert "overlap" in problems
    assert "before its dependency" in problems
    assert "lasts" in problems


@pytest.mark.parametrize("n,c,k", [(1, 2, 1), (4, 2, 1), (4, 1, 3), (6, 1, 1)])
def test_copy_compute_pipeline_matches_the_closed_form(n, c, k):
    for overlap in (False, True):
        tasks = sch.copy_compute_tasks(n, c, k, overlap=overlap)
        s = sch.list_schedule(tasks, ["gpu", "copy"])
        assert sch.validate(s, tasks) == []
        assert s.makespan == pytest.approx(sch.pipeline_seconds(n, c, k, overlap))
    assert sch.pipeline_seconds(0, 1, 1) == 0.0


def test_run_parallel_respects_dependencies_and_returns_results():
    results, measured = sch.run_parallel({"a": lambda: 1, "b": lambda: 2, "c": lambda: 3},
                                         {"c": ("a", "b")}, workers=2)
    assert results == {"a": 1, "b": 2, "c": 3}
    c = measured.slot("c")
    assert c.start >= measured.slot("a").end and c.start >= measured.slot("b").end
    assert {s.device for s in measured.slots} <= {"thread 0", "thread 1"}


def test_gantt_draws_one_bar_per_task():
    import matplotlib
    matplotlib.use("Agg")
    ax = sch.gantt(sch.list_schedule(DIAMOND, ["d0", "d1"]), unit="ms")
    assert len(ax.collections) == 4 and "makespan 5e+03 ms" in ax.get_title()


def test_forked_and_sequential_chains_compute_the_same_thing():
    x = torch.randn(8, 8) / 8
    expected = sch.matmul_chain(x, 3) * 2
    for forked in (False, True):
        assert torch.allclose(sch.two_chains(forked)(x, 3), expected, atol=1e-6)


def test_earliest_start_uses_gaps_and_list_scheduling_fills_them():
    assert sch.earliest_start([(0, 2), (5, 6)], 1.0, 2.0) == 2.0
    assert sch.earliest_start([(0, 2), (5, 6)], 1.0, 4.0) == 6.0
    assert sch.earliest_start([], 3.0, 1.0) == 3.0
    # copy g1 outranks copy g2 (a long sum follows it) but is ready later: copy g2 takes the gap
    tasks = [Task("bwd2", 2, device="gpu"), Task("bwd1", 4, ("bwd2",), device="gpu"),
             Task("copy g2", 1, ("bwd2",), device="link"), Task("copy g1", 2, ("bwd1",), device="link"),
             Task("sum g1", 5, ("copy g1",), device="cpu")]
    s = sch.list_schedule(tasks, ["gpu", "link", "cpu"])
    assert sch.validate(s, tasks) == []
    assert s.slot("copy g2").start == 2 and s.slot("copy g1").start == 6
