"""A scratch nbgrader course holding one lesson, for tests that grade submissions.

The grader's attack tests (``FROZEN``: lessons 00 and 01 as of commit 83ab7bc, lesson 13 as of
2854e7e, before its FSDP exercise) grade a frozen copy of the lesson's exercises,
``tests/grading/lessons/<lesson>/``: they build their
submissions on particular cells (a timing exercise whose probes run in the student's kernel, a
FLOP count to get wrong), and what they test is the grader, which must not break when a lesson's
exercises are reworked. The live lessons are graded by the wrong-answer, plan and build tests.

A scratch course starts with the plan of this test process's latest scratch course of the same
lesson that has one (``build/grading/<lesson>/plan.json``), as a class's second ``course grade``
run finds the plan of its first: the reference is not graded again for every batch of attacks.
``lesson_plan`` uses a plan only when its key (a hash of the notebooks and of the grading code)
matches, so a test that edits the lesson's notebooks gets a plan computed afresh.

``solutions``, ``cell`` and ``edited`` build the submissions of a batch from the lesson's
reference solution cells."""
import json
import shutil
from pathlib import Path

from course_tools.grading.nbgrader_course import CourseDir, release
from course_tools.paths import NOTEBOOKS

FROZEN = Path(__file__).resolve().parent / "grading" / "lessons"
_COURSES: dict[str, list[Path]] = {}   # lesson -> the roots of this process's scratch courses of it


def lesson_folder(lesson: str) -> Path:
    """Where ``lesson``'s exercises come from: the frozen copy when there is one, else notebooks/."""
    return FROZEN / lesson if (FROZEN / lesson).is_dir() else NOTEBOOKS / lesson


def scratch_course(root: Path, lesson: str) -> tuple[CourseDir, Path]:
    """(the course at ``root``, its source folder): ``lesson`` copied in (see ``lesson_folder``)
    and released."""
    source = root / "source"
    shutil.copytree(lesson_folder(lesson), source / lesson)
    course = CourseDir(root, source)
    release(course, lesson)
    plans = [p for earlier in _COURSES.get(lesson, []) for p in [earlier / "build" / "grading" / lesson / "plan.json"]
             if p.is_file()]
    if plans:   # the latest
        (root / "build" / "grading" / lesson).mkdir(parents=True, exist_ok=True)
        shutil.copy2(plans[-1], root / "build" / "grading" / lesson / "plan.json")
    _COURSES.setdefault(lesson, []).append(root)
    return course, source


def not_passed_in_checker(root: Path, lesson: str) -> list[str]:
    """The test cells of ``lesson``'s exercises in the scratch course at ``root`` that the plan of
    its last ``grade_lesson`` (``build/grading/<lesson>/plan.json``) does not record as passed by
    the reference solution in the trusted checker; [] when it records every one."""
    import nbformat

    from course_tools.grading.cells import ids_of_test_cells

    nb = nbformat.read(str(root / "source" / lesson / "exercises.ipynb"), as_version=4)
    plan = json.loads((root / "build" / "grading" / lesson / "plan.json").read_text())
    return sorted(set(ids_of_test_cells(nb)) - set(plan["passed_in_checker"]))


def grade_class(root: Path, lesson: str, submissions, limits, workers: int = 1,
                reference_student: str | None = None) -> dict:
    """A scratch course of ``lesson`` at ``root`` whose students hand in ``submissions(blank)``
    (``{student: notebook}``, built on the released notebook), graded in one batch by the real
    ``grade_lesson`` (sandboxed), in one slot unless ``workers`` says otherwise (each slot starts
    its own kernel and checker templates, about 6 CPU-s; the suite's workers keep both cores busy
    already). ``reference_student`` names a student whose notebook is the reference solution: when
    the plan grades the reference in this run (no earlier scratch course's plan), that run is their
    grade rather than a second run of the same notebook (``grade_lesson``'s option). Returns
    ``{"by": {student: Outcome}, "pages": {student: feedback HTML}, "plan": the plan file's text}``."""
    import nbformat

    from course_tools.grading.grade import grade_lesson

    course, source = scratch_course(root, lesson)
    blank = nbformat.read(str(root / "release" / lesson / "exercises.ipynb"), as_version=4)
    incoming = root / "incoming"
    for student, nb in submissions(blank).items():
        (incoming / student).mkdir(parents=True)
        nbformat.write(nb, str(incoming / student / "exercises.ipynb"))
    outcomes = grade_lesson(source / lesson, course=course, submissions=incoming, workers=workers, limits=limits,
                            progress=False, reference_student=reference_student)
    pages = {p.parent.parent.name: p.read_text() for p in (root / "feedback").glob(f"*/{lesson}/exercises.html")}
    plan = (root / "build" / "grading" / lesson / "plan.json").read_text()
    return {"by": {o.student: o for o in outcomes}, "pages": pages, "plan": plan}


def solutions(lesson: str) -> dict:
    """{grade_id: solution cell of ``lesson``'s exercises (see ``lesson_folder``) as a student
    writes it, its ``### BEGIN/END SOLUTION`` lines removed}."""
    import nbformat

    nb = nbformat.read(str(lesson_folder(lesson) / "exercises.ipynb"), as_version=4)
    return {c.metadata["nbgrader"]["grade_id"]: "\n".join(ln for ln in c.source.splitlines() if "### " not in ln) + "\n"
            for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution")}


def cell(nb, grade_id: str):
    """The cell of notebook ``nb`` whose nbgrader grade_id is ``grade_id``."""
    return next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


def edited(source: str, *edits: tuple[str, str]) -> str:
    """``source`` with each ``(old, new)`` replacement made in order; each ``old`` must occur once."""
    for old, new in edits:
        assert source.count(old) == 1, (old, source)
        source = source.replace(old, new)
    return source


def execute_directly(nb, limits):
    """``nb`` run as ``course grade`` runs one submission (``execute_submission``: the student's
    cells in a sandboxed kernel, the test cells in the trusted checker; unsandboxed where
    bubblewrap cannot run), its lesson facts taken from ``nb`` itself. Returns the Execution."""
    import os
    import tempfile

    from course_tools.grading import sandbox
    from course_tools.grading.execute import execute_submission
    from course_tools.grading.plan import lesson_facts

    sandboxed = bool(sandbox.bubblewrap())
    scratch = Path(tempfile.mkdtemp(prefix="course-run-"))   # short: the kernel's sockets live under it
    try:
        folder = scratch / "submission"
        folder.mkdir()
        if sandboxed:   # the student's folder belongs to the sandbox user, as course grade gives it
            uid = sandbox.sandbox_uid(0)
            os.chown(folder, uid, uid)
        return execute_submission(nb, folder, limits, lesson_facts(nb), slot=0, sandbox=sandboxed, scratch=scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
