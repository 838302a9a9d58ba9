"""Every test cell of every lesson is judged by the trusted checker, never in the student's
kernel (issue 16, issue 23: one judge): ``course grade`` grades a lesson's reference solution in
the sandbox with the checker judging every test cell, and refuses the lesson if the reference
misses a point there (see ``course_tools.grading.plan``).

Lessons 00, 01, 03, 04, 11, 13 and 14 are asserted by their own grading tests (tests/grading/test_sandbox.py,
test_grading_attacks.py, test_grading_kernels.py, test_grading_attacks_kernels.py, test_grading_parallel_attacks.py,
test_parallel_zero.py, test_triton_grading.py), which grade student notebooks, attacks included; this file covers the
others, grading only the reference (an empty class).
"""
import nbformat
import pytest
from scratch_course import kernel_judged, scratch_course

from course_tools.grading import sandbox
from course_tools.grading.nbgrader_course import GradingError
from course_tools.grading.grade import grade_lesson
from course_tools.paths import lesson_dirs

COVERED_ELSEWHERE = ("00", "01", "03", "04", "11", "13", "14")
LESSONS = [p.name for p in lesson_dirs() if p.name[:2] not in COVERED_ELSEWHERE]


@pytest.mark.skipif(not sandbox.bubblewrap(), reason="no sandbox: " + sandbox.why_no_sandbox())
@pytest.mark.timeout(600)
@pytest.mark.parametrize("lesson", LESSONS)
def test_the_reference_passes_every_test_cell_in_the_checker(lesson, tmp_path):
    course, source = scratch_course(tmp_path, lesson)
    (tmp_path / "incoming").mkdir()
    assert grade_lesson(source / lesson, course=course, submissions=tmp_path / "incoming", workers=1,
                        progress=False, feedback=False) == []
    assert kernel_judged(course, lesson) == []


@pytest.mark.skipif(not sandbox.bubblewrap(), reason="no sandbox: " + sandbox.why_no_sandbox())
@pytest.mark.timeout(300)
def test_a_lesson_whose_reference_misses_a_point_in_the_checker_is_refused(tmp_path):
    """One judge: there is no fallback to the student's kernel. A reference that fails a test cell
    in the checker (here its first solution emptied) stops grading before any student, in one
    line naming the cells; every student's row says the grader refused, none gets a score."""
    lesson = "01_hardware_foundations"
    course, source = scratch_course(tmp_path, lesson)
    path = source / lesson / "exercises.ipynb"
    nb = nbformat.read(str(path), as_version=4)
    first = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution"))
    first.source = "pass\n"
    nbformat.write(nb, str(path))
    incoming = tmp_path / "incoming" / "alice"
    incoming.mkdir(parents=True)
    nbformat.write(nb, str(incoming / "exercises.ipynb"))
    with pytest.raises(GradingError) as refused:
        grade_lesson(source / lesson, course=course, submissions=tmp_path / "incoming", workers=1, progress=False,
                     feedback=False)
    message = str(refused.value)
    assert "\n" not in message and "fails test cell(s) ex1_visible" in message, message
    rows = (course.root / "build" / f"grades_{lesson}.csv").read_text()
    assert "alice" in rows and "grader error" in rows
