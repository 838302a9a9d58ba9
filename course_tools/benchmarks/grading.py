"""Grading throughput on lesson 01: seconds per submission for plain ``nbgrader autograde``
(nbgrader's ``Autograde`` converter, run in this process as the command would run it, without
the command's own start-up) and for ``course grade`` (sandboxed: trusted checker + student kernel per submission, HTML
feedback off, since plain autograde writes none) on the same submissions, and their ratio.

The submissions are 20 copies of lesson 01 (10 with the reference solution, 10 blank), in a
scratch course. The two graders run alternately, twice each, one worker (plain nbgrader
grades one notebook at a time); each figure is the mean of its two runs. The lesson's plan
(which test cells the checker judges) is computed once before the timed runs, as a class
would have it from its first grading run. Target: ratio <= 1.3.

With ``COURSE_BENCH_CLASS=N`` in the environment, the group also grades N such submissions
with two workers and reports the seconds (issue 16: 200 in <= 240 s on two cores).
"""
from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

LESSON = "01_hardware_foundations"
SUBMISSIONS = 20
ROUNDS = 2


def _course(root: Path, students: int):
    from ..grading.nbgrader_course import CourseDir, release
    from ..paths import NOTEBOOKS

    source = root / "source"
    shutil.copytree(NOTEBOOKS / LESSON, source / LESSON)
    course = CourseDir(root, source)
    release(course, LESSON)
    for n in range(students):
        folder = root / "submitted" / f"student{n:03d}" / LESSON
        folder.mkdir(parents=True)
        origin = source / LESSON if n % 2 == 0 else root / "release" / LESSON
        shutil.copy2(origin / "exercises.ipynb", folder / "exercises.ipynb")
    return course


def _ours(course, workers: int = 1) -> float:
    from ..grading.grade import grade_lesson

    start = time.perf_counter()
    outcomes = grade_lesson(course.source / LESSON, course=course, workers=workers, progress=False, feedback=False)
    seconds = time.perf_counter() - start
    wrong = [o for o in outcomes if o.score != (o.max_score if int(o.student[-3:]) % 2 == 0 else 0)]
    if wrong:
        raise RuntimeError(f"unexpected scores: {[(o.student, o.score, o.reason) for o in wrong[:3]]}")
    return seconds


def _plain(course) -> float:
    from ..grading.nbgrader_course import autograde, score

    start = time.perf_counter()
    autograde(course, LESSON)  # its exit status says whether any student failed; scores tell more
    seconds = time.perf_counter() - start
    if score(course, LESSON, "student000")[0] != score(course, LESSON, "student000")[1]:
        raise RuntimeError("plain nbgrader did not give the reference full marks")
    return seconds


def run() -> dict:
    from ..grading.sandbox import bubblewrap, limits_in_force

    figures = {"cpu_cores": os.cpu_count(), "submissions": SUBMISSIONS}
    if not bubblewrap():
        figures["sandbox"] = "bubblewrap unavailable: the sandboxed grader cannot be measured"
        return figures
    root = Path(tempfile.mkdtemp(prefix="course-bench-grading-"))
    try:
        course = _course(root, SUBMISSIONS)
        _ours(course)  # computes and caches the lesson's plan; warms file caches
        plain, ours = [], []
        for _ in range(ROUNDS):
            plain.append(_plain(course) / SUBMISSIONS)
            ours.append(_ours(course) / SUBMISSIONS)
        figures["seconds_per_submission_plain_nbgrader"] = round(sum(plain) / ROUNDS, 3)
        figures["seconds_per_submission_course_grade"] = round(sum(ours) / ROUNDS, 3)
        figures["ratio course_grade / plain (target <= 1.3)"] = round(sum(ours) / sum(plain), 3)
        figures["limits"] = limits_in_force()
        big = int(os.environ.get("COURSE_BENCH_CLASS", "0") or 0)
        if big:  # more students in the same course (its plan is cached), two workers
            for n in range(SUBMISSIONS, big):
                folder = root / "submitted" / f"student{n:03d}" / LESSON
                folder.mkdir(parents=True)
                origin = course.source / LESSON if n % 2 == 0 else root / "release" / LESSON
                shutil.copy2(origin / "exercises.ipynb", folder / "exercises.ipynb")
            figures[f"seconds_{big}_submissions_workers2 (target 200 in <= 240)"] = round(_ours(course, workers=2), 1)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return figures
