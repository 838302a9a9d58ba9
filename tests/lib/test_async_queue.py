"""Tests of the frontend/backend queue model (no wall-clock performance assertions)."""
import threading

import pytest

from course_lib import async_queue as aq


def test_a_bound_on_in_flight_work_caps_the_backlog():
    assert aq.predicted_peak_in_flight(100, 1.0, 4.0) > 50          # grows with N: about N (1 - t1/t2) = 75
    assert aq.predicted_peak_in_flight(100, 1.0, 4.0, max_in_flight=2) == 2
    assert aq.predicted_peak_in_flight(100, 4.0, 1.0) == 1   # fast backend: no backlog
    assert aq.predicted_peak_in_flight(0, 1.0, 1.0) == 0


def test_backend_runs_tasks_in_order_and_values_block_until_ready():
    gate = threading.Event()
    order = []
    with aq.AsyncBackend() as backend:
        first = backend.submit(lambda: gate.wait() and order.append(1) or 1)
        second = backend.submit(lambda: order.append(2) or 2)
        assert not first.ready() and not second.ready()
        assert backend.in_flight == 2
        gate.set()
        assert second.item() == 2
        assert first.ready()
        assert order == [1, 2]
        assert backend.sync_points == 1
        assert repr(first) == "LazyValue(1)" and first.cpu() == 1
        backend.synchronize()
        assert backend.in_flight == 0 and backend.executed == 2


def test_task_errors_reach_the_reader():
    with aq.AsyncBackend() as backend:
        value = backend.submit(lambda: 1 / 0)
        with pytest.raises(ZeroDivisionError):
            value.item()


def test_bounded_backend_never_has_more_than_the_bound_in_flight():
    with aq.AsyncBackend(max_in_flight=3) as backend:
        for _ in range(20):
            backend.submit(aq.sleep_task(0.0005), nbytes=10)
        backend.synchronize()
    assert backend.peak_in_flight <= 3
    assert backend.peak_bytes <= 30
    assert backend.executed == 20
    with pytest.raises(ValueError):
        aq.AsyncBackend(max_in_flight=0)


def test_run_tasks_sync_keeps_one_task_in_flight_async_lets_them_pile_up():
    sync = aq.run_tasks(8, 0.0, 0.003, 0.0, mode="sync", bytes_per_task=100)
    asyn = aq.run_tasks(8, 0.0, 0.003, 0.0, mode="async", bytes_per_task=100)
    bounded = aq.run_tasks(8, 0.0, 0.003, 0.0, mode="async", max_in_flight=2, bytes_per_task=100)
    assert sync.peak_in_flight == 1 and sync.peak_bytes == 100
    assert asyn.peak_in_flight > 2 and asyn.peak_bytes == 100 * asyn.peak_in_flight
    assert bounded.peak_in_flight <= 2
    assert asyn.frontend_seconds <= asyn.seconds
    with pytest.raises(ValueError):
        aq.run_tasks(1, 0, 0, 0, mode="later")


def test_plot_in_flight_draws_one_line_per_report():
    import matplotlib
    matplotlib.use("Agg")
    reports = [aq.run_tasks(3, 0.0, 0.001, 0.0, mode=m) for m in ("sync", "async")]
    ax = aq.plot_in_flight(reports)
    assert len(ax.get_lines()) == 2


def test_cpu_torch_is_synchronous_so_issue_and_finish_take_the_same_time():
    issued, finished = aq.cuda_enqueue_and_finish(n=2, size=32, device="cpu")
    assert 0 < issued <= finished


def test_cuda_event_seconds_needs_a_gpu():
    import torch
    if torch.cuda.is_available():
        a = torch.randn(64, 64, device="cuda")
        assert aq.cuda_event_seconds(lambda: a @ a, repeat=2) > 0
    else:
        with pytest.raises((RuntimeError, AssertionError)):
            aq.cuda_event_seconds(lambda: None, repeat=1)
