"""A scratch nbgrader course holding one lesson, for tests that grade submissions."""
import json
import shutil
from pathlib import Path

from course_tools.grading.nbgrader_course import CourseDir, release
from course_tools.paths import NOTEBOOKS


def scratch_course(root: Path, lesson: str) -> tuple[CourseDir, Path]:
    """(the course at ``root``, its source folder): ``lesson`` copied in and released."""
    source = root / "source"
    shutil.copytree(NOTEBOOKS / lesson, source / lesson)
    course = CourseDir(root, source)
    release(course, lesson)
    return course, source


def kernel_judged(course: CourseDir, lesson: str) -> list[str]:
    """The test cells that the last ``grade_lesson`` of ``lesson`` in ``course`` judged in the
    students' kernels instead of the trusted checker (its cached plan); [] when none."""
    plan = json.loads((course.root / "build" / "grading" / lesson / "plan.json").read_text())
    return sorted(gid for gid, where in plan["plan"].items() if where != "checker")
