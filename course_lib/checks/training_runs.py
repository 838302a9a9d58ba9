"""Lesson 12's exercise 9: the training runs a student's ``verdict`` is judged on.

:func:`lecture_runs` computes ``mixed_precision.compare`` (fp32, fp16 without and with a
GradScaler, bf16; 300 steps, the lecture's own runs) once per process, on the first call;
:func:`course_run` trains one mode on a task of other targets the same way. Both hand out copies.
The test cells call them; in the grader they run in the trusted checker, so the runs are computed
there (about 1.5 CPU-seconds for the lecture's four, on one thread), never in the student's kernel,
and a student's function receives them as plain data.
"""
from __future__ import annotations

import copy
import functools

# torch._dynamo: torch.optim's first step imports it (seconds of CPU); imported here, it comes with the
# lesson's imports, which a grading slot's served checker and kernel have loaded once, before any submission
import torch
import torch._dynamo  # noqa: F401

from course_lib import mixed_precision

STEPS = 300
"""Steps of each of the lecture's runs. Fewer do not separate the runs by their loss: at 150 steps fp32's
loss has fallen to 0.62 of its first value and fp16's, stalled, to 0.71 (measured on a CPU)."""


def _one_thread(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` on one torch thread: the lecture's MLP is 32 wide, and more threads only
    spin (the four runs, 150 steps: 8 CPU-s on 2 threads, 0.6 on 1)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return fn(*args, **kwargs)
    finally:
        torch.set_num_threads(threads)


@functools.lru_cache(maxsize=None)
def _lecture(steps: int) -> dict:
    return _one_thread(mixed_precision.compare, steps=steps)


@functools.lru_cache(maxsize=None)
def _run(mode: str, steps: int, target_size: float) -> dict:
    task = mixed_precision.make_task(target_size=target_size)
    return _one_thread(mixed_precision.train, mode, steps, task=task)


def lecture_runs(steps: int = STEPS) -> dict:
    """``{mode: record}``, the records ``mixed_precision.train`` returns (losses, scales,
    zero_fraction per step, skipped steps) for the lecture's four modes on its task, ``steps``
    steps each; computed on the first call in a process (about 1.5 CPU-seconds for 300 steps),
    a fresh copy each call so that nothing a caller changes reaches the next one."""
    return copy.deepcopy(_lecture(int(steps)))


def course_run(mode: str, steps: int, target_size: float = 1e-3) -> dict:
    """One ``mixed_precision.train`` record: ``mode`` for ``steps`` steps on the lecture's task with
    targets of about ``target_size`` (1e-3: the lecture's); computed once per process (0.05 CPU-s
    for 40 steps), a fresh copy each call."""
    return copy.deepcopy(_run(mode, int(steps), float(target_size)))
