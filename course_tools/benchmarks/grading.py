"""Grading throughput: seconds per submission with and without the sandbox, and the speedup
of ``--workers 2`` on 20 submissions (lesson 00's reference solution, in a scratch course).

Each figure covers the whole of ``course grade`` for those submissions (sandboxed kernels and
nbgrader's scoring; HTML feedback off). Target: the sandbox costs little next to running the
notebook (ratio near 1), and two workers grade faster than one wherever two cores are free.
"""
from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

LESSON = "00_setup"


def _course(root: Path, students: int):
    from ..grading import CourseDir, release
    from ..paths import NOTEBOOKS

    source = root / "source"
    shutil.copytree(NOTEBOOKS / LESSON, source / LESSON)
    course = CourseDir(root, source)
    release(course, LESSON)
    for n in range(students):
        folder = root / "submitted" / f"student{n:02d}" / LESSON
        folder.mkdir(parents=True)
        shutil.copy2(source / LESSON / "exercises.ipynb", folder / "exercises.ipynb")
    return course


def _seconds(students: int, workers: int, sandbox: bool) -> float:
    from ..grading import grade_lesson

    root = Path(tempfile.mkdtemp(prefix="course-bench-grading-"))
    try:
        course = _course(root, students)
        start = time.perf_counter()
        outcomes = grade_lesson(course.source / LESSON, course=course, workers=workers, sandbox=sandbox,
                                progress=False, feedback=False)
        seconds = time.perf_counter() - start
        if any(o.score != o.max_score for o in outcomes):
            raise RuntimeError(f"the reference did not score full marks: {[o.reason for o in outcomes]}")
        return seconds
    finally:
        shutil.rmtree(root, ignore_errors=True)


def run() -> dict:
    from ..grading import bubblewrap

    figures = {"cpu_cores": os.cpu_count()}
    _seconds(1, 1, sandbox=bool(bubblewrap()))  # warm-up: file caches, nbgrader's first start
    small = 3
    plain = _seconds(small, 1, sandbox=False) / small
    figures["seconds_per_submission_no_sandbox"] = round(plain, 2)
    if not bubblewrap():
        figures["sandbox"] = "bubblewrap unavailable: sandboxed figures not measured"
        return figures
    boxed = _seconds(small, 1, sandbox=True) / small
    figures["seconds_per_submission_sandbox"] = round(boxed, 2)
    figures["sandbox_cost_ratio (target <= 1.2)"] = round(boxed / plain, 3)
    one = _seconds(20, 1, sandbox=True)
    two = _seconds(20, 2, sandbox=True)
    figures["seconds_20_submissions_workers1"] = round(one, 1)
    figures["seconds_20_submissions_workers2"] = round(two, 1)
    figures["workers2_speedup (target >= 1.5 with 2 free cores)"] = round(one / two, 3)
    return figures
