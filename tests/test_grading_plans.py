"""Every test cell of every lesson is judged by the trusted checker, never in the student's
kernel (issue 16): ``course grade`` grades a lesson's reference solution in the sandbox with
the checker judging every test cell, and only a cell the reference then fails would fall back
to the student's kernel (see ``course_tools.grading.plan``). The reference must pass them all.

Lessons 00, 01, 03, 04, 11, 13 and 14 are asserted by their own grading tests (tests/test_sandbox.py,
test_grading_attacks.py, test_grading_kernels.py, test_grading_attacks_kernels.py, test_grading_parallel_attacks.py,
test_parallel_zero.py, test_triton_grading.py), which grade student notebooks, attacks included; this file covers the
others, grading only the reference (an empty class).
"""
import pytest
from scratch_course import kernel_judged, scratch_course

from course_tools.grading import grade_lesson, sandbox
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
