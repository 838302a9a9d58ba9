"""The grading round trip with nbgrader.

* Every lesson's release (nbgrader ``generate_assignment``, all lessons in one scratch course):
  no solutions, no hidden tests, no outputs, and the max score nbgrader records equals the
  points of the lesson's graded cells.
* The whole round trip with plain nbgrader, as ``course build`` runs it for every lesson
  (release, ``autograde`` of the reference solution and of the blank release, scores read back
  from nbgrader's gradebook), for Numba kernels in the simulator with access budgets (03); plain
  functions (00) make that round trip in tests/tools/test_build.py's ``course build``, which
  asserts the same scores. Lessons whose checks start ``torch.distributed``
  processes are graded end to end by ``course grade`` in tests/grading/test_grading_parallel_attacks.py
  (11) and tests/lib/test_parallel_zero.py (13).

That the reference earns every point and the blank none is tested for every lesson, cell by
cell as nbgrader judges a test cell, by tests/grading/test_wrong_answers.py; ``course build`` runs this
round trip for every lesson.
"""
import json
import shutil

import nbformat
import pytest
from nbgrader.api import Gradebook

from course_tools.grading.nbgrader_course import CourseDir
from course_tools.grading.round_trip import round_trip
from course_tools.paths import GRADED_NOTEBOOK, lesson_dirs

LESSONS = lesson_dirs()
ROUND_TRIP = [p for p in LESSONS if p.name[:2] == "03"]   # 00: tests/tools/test_build.py


def _points(lesson) -> float:
    nb = nbformat.read(str(lesson / f"{GRADED_NOTEBOOK}.ipynb"), as_version=4)
    return float(sum(c.metadata.get("nbgrader", {}).get("points", 0) for c in nb.cells
                     if c.metadata.get("nbgrader", {}).get("grade")))


def test_every_release_has_no_solutions_no_hidden_tests_and_its_points(tmp_path):
    source = tmp_path / "source"
    for lesson in LESSONS:
        shutil.copytree(lesson, source / lesson.name, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    course = CourseDir(tmp_path, source)
    done = course.nbgrader("generate_assignment", "*", "--force")   # every lesson, in one nbgrader process
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    for lesson in LESSONS:
        released = (tmp_path / "release" / lesson.name / f"{GRADED_NOTEBOOK}.ipynb").read_text()
        assert "BEGIN HIDDEN TESTS" not in released and "BEGIN SOLUTION" not in released, lesson.name
        assert all(not cell.get("outputs") for cell in json.loads(released)["cells"]), lesson.name
        with Gradebook(course.db_url) as gb:
            recorded = float(gb.find_assignment(lesson.name).max_score)
        assert recorded == _points(lesson) > 0, f"{lesson.name}: nbgrader records {recorded} points"


@pytest.mark.parametrize("lesson", ROUND_TRIP, ids=lambda p: p.name)
def test_reference_scores_max_and_blank_scores_zero(lesson, tmp_path):
    result = round_trip(lesson, tmp_path / lesson.name)
    assert result["max_score"] == _points(lesson) > 0
    assert result["reference_score"] == result["max_score"], result["log"]
    assert result["blank_score"] == 0, result["log"]
