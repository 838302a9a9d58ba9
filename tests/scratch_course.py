"""A scratch nbgrader course holding one lesson, for tests that grade submissions."""
import shutil
from pathlib import Path

from course_tools.grading import CourseDir, release
from course_tools.paths import NOTEBOOKS


def scratch_course(root: Path, lesson: str) -> tuple[CourseDir, Path]:
    """(the course at ``root``, its source folder): ``lesson`` copied in and released."""
    source = root / "source"
    shutil.copytree(NOTEBOOKS / lesson, source / lesson)
    course = CourseDir(root, source)
    release(course, lesson)
    return course, source
