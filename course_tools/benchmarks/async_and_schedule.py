"""Lessons 06 and 07: how closely the measured queue model follows its formulas (lesson 06's
N (t1 + t2 + t3) and max(t1 + N t2, N t1 + t2) + t3), and the
measured speedup of two independent operator chains on two threads."""
from __future__ import annotations


def run() -> dict:
    import torch

    from course_lib.async_queue import run_tasks
    from course_lib.hardware import describe_device
    from course_lib.schedule import matmul_chain, run_parallel

    n, t1, t2, t3 = 40, 0.002, 0.005, 0.002
    sync = run_tasks(n, t1, t2, t3, mode="sync")
    asyn = run_tasks(n, t1, t2, t3, mode="async")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        x = torch.randn(256, 256) / 16
        chains = {"a": lambda: matmul_chain(x, 30), "b": lambda: matmul_chain(x, 30)}
        _, one = run_parallel(chains, workers=1)
        _, two = run_parallel(chains, workers=2)
    finally:
        torch.set_num_threads(threads)
    return {
        "device": describe_device("cpu", threads=threads) + "; the chains: 1 torch thread each",
        "async_model_sync_measured_over_predicted": sync.seconds / (n * (t1 + t2 + t3)),
        "async_model_async_measured_over_predicted": asyn.seconds / (max(t1 + n * t2, n * t1 + t2) + t3),
        "async_model_ratio_target": "close to 1 and at most 1.25: sleep overshoot and a loaded machine only add time",
        "two_thread_chain_speedup": one.makespan / two.makespan,
        "two_thread_chain_speedup_target": "close to min(2, cores) on an idle machine",
    }
