"""One judge (issue 16, issue 23): ``course grade`` first grades the lesson's reference solution
in the sandbox with the trusted checker judging every test cell (``course_tools.grading.plan``),
and refuses the lesson, before any student, if the reference misses a point there: there is no
other judge to fall back to.

That every lesson's reference passes every test cell in the checker in the sandbox is shown for
each lesson by tests/grading/test_wrong_answers.py (its sandboxed trial notebook starts with the
reference) and, with a class's limits, by ``course build``'s round trip; lessons 00, 01, 03, 04,
11, 13 and 14 are also graded as classes, attacks included, by their own grading tests.
"""
import nbformat
import pytest
from scratch_course import scratch_course

from course_tools.grading import sandbox
from course_tools.grading.grade import grade_lesson
from course_tools.grading.nbgrader_course import GradingError


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
