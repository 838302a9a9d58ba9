"""The launcher: results by rank, source shipping, and bounded failure (dead or hung worker)."""
import os
import time

import psutil
import pytest

from course_lib.parallel.launch import WorkerFailed, WorkerTimeout, free_port, job_for, launch


def report_rank(offset):
    import os
    return int(os.environ["RANK"]) + offset


def die_on_rank_one():
    import os
    import sys
    import time
    if os.environ["RANK"] == "1":
        print("rank 1 gives up", flush=True)
        sys.exit(3)
    time.sleep(60)


def hang_in_collective():
    import torch
    import torch.distributed as dist
    from course_lib.parallel.launch import init_process_group
    rank, _, _ = init_process_group("gloo", timeout=120)
    if rank == 0:
        dist.recv(torch.zeros(1), src=1)  # rank 1 never sends
    else:
        import time
        time.sleep(120)


def _children(before=()):
    """Live child processes of this test process that were not there ``before`` (pids): other
    tests in the same worker may leave helpers of their own (e.g. torch.compile's worker pool)."""
    return [p for p in psutil.Process().children(recursive=True) if p.is_running()
            and p.status() != psutil.STATUS_ZOMBIE and p.pid not in before]


def _pids():
    return {p.pid for p in psutil.Process().children(recursive=True)}


def test_free_port_is_a_port():
    assert 0 < free_port() < 65536


def test_job_for_ships_source_of_local_functions_and_names_library_ones():
    from course_lib.parallel.collectives import check_worker
    assert job_for(check_worker).target == "course_lib.parallel.collectives:check_worker"
    job = job_for(report_rank)
    assert job.target is None and "def report_rank" in job.source


def test_results_come_back_by_rank():
    assert launch(report_rank, 2, 10, timeout=60) == [10, 11]


def test_dead_worker_is_reported_quickly_and_nothing_is_left():
    before = _pids()
    start = time.monotonic()
    with pytest.raises(WorkerFailed, match="rank 1 .*code 3(.|\n)*rank 1 gives up"):
        launch(die_on_rank_one, 2, timeout=60)
    assert time.monotonic() - start < 30
    assert _children(before) == []


def test_hung_worker_times_out_and_is_killed():
    before = _pids()
    start = time.monotonic()
    with pytest.raises(WorkerTimeout, match="still running after 8 s"):
        launch(hang_in_collective, 2, timeout=8)
    assert time.monotonic() - start < 20
    assert _children(before) == []
