"""What the grader trusts (issue 35, items 1 and 8), graded by the real ``grade_lesson`` on the
frozen lesson 00 in a scratch course that, like ``notebooks/``, holds lesson 01 too.

The grader restores deleted or edited cells from a student version of its own, generated from
the lesson's source under ``build/grading/<lesson>/`` (``nbgrader_course.student_version``),
never from ``release/<lesson>/exercises.ipynb``, the file students (and a grader trying the
course) work in. Here that file holds solved work marked by ``LOCAL``; then:

* a submission with every graded and solution cell deleted scores 0 (its solutions come back
  as the blank stubs), and says which cells it lost;
* lesson 01's notebook handed in for lesson 00 is refused as such, not graded as a tampered 00;
* no feedback page or graded notebook shows a line of the local copy's code;
* a class folder with a stray ``alice.ipynb`` at its top grades everyone else, and the stray
  file's row says where it belongs.

Controls: the honest submission keeps its points, the blank scores 0. Skipped where bubblewrap
cannot run.
"""
import copy
import hashlib
import json
import shutil

import nbformat
import pytest
from scratch_course import lesson_folder, scratch_course

from course_tools.grading import sandbox
from course_tools.grading.grade import grade_lesson
from course_tools.grading.nbgrader_course import CourseDir, GradingError, student_version, trusted_paths
from course_tools.grading.sandbox import Limits

LESSON = "00_setup"
OTHER = "01_hardware_foundations"
SOLVED = ("ex1_nbytes", "ex2_device", "ex3_training")   # 2 + 2 + 3 points; ex4's timer stays blank (timing)
HONEST = 7.0
LOCAL = "# solved_in_my_local_copy_7f3a"
LIMITS = Limits(memory_bytes=2**30, cpu_seconds=120, processes=64, cell_seconds=30, notebook_seconds=240)
needs_bwrap = pytest.mark.skipif(not sandbox.bubblewrap(), reason="no sandbox: " + sandbox.why_no_sandbox())
pytestmark = pytest.mark.timeout(900)


def _nbgrader(cell) -> dict:
    return cell.metadata.get("nbgrader", {})


def _cell(nb, grade_id):
    return next(c for c in nb.cells if _nbgrader(c).get("grade_id") == grade_id)


def _solution(reference, grade_id) -> str:
    """The reference's answer as a student would write it (no nbgrader solution markers)."""
    lines = _cell(reference, grade_id).source.splitlines()
    return "\n".join(line for line in lines if "### BEGIN SOLUTION" not in line and "### END SOLUTION" not in line)


def _solved(blank, reference, marker: str = ""):
    nb = copy.deepcopy(blank)
    for gid in SOLVED:
        _cell(nb, gid).source = marker + ("\n" if marker else "") + _solution(reference, gid)
    return nb


def _submissions(blank, reference, other_lesson) -> dict:
    gutted = copy.deepcopy(blank)   # every graded cell (tests) and solution cell deleted
    gutted.cells = [c for c in gutted.cells if not (_nbgrader(c).get("grade") or _nbgrader(c).get("solution"))]
    return {"honest": _solved(blank, reference), "blank": blank, "gutted": gutted, "wrong_lesson": other_lesson}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    if not sandbox.bubblewrap():
        pytest.skip("no sandbox: " + sandbox.why_no_sandbox())
    root = tmp_path_factory.mktemp("trusted") / "course"
    course, source = scratch_course(root, LESSON)
    shutil.copytree(lesson_folder(OTHER), source / OTHER)   # the course's other lesson, as in notebooks/
    reference = nbformat.read(str(source / LESSON / "exercises.ipynb"), as_version=4)
    released = root / "release" / LESSON / "exercises.ipynb"
    blank = nbformat.read(str(released), as_version=4)
    nbformat.write(_solved(blank, reference, LOCAL), str(released))   # the local copy, solved
    local_copy = hashlib.sha256(released.read_bytes()).hexdigest()
    other_lesson = nbformat.read(str(source / OTHER / "exercises.ipynb"), as_version=4)   # the student's 01 work
    incoming = root / "incoming"
    for student, nb in _submissions(blank, reference, other_lesson).items():
        (incoming / student).mkdir(parents=True)
        nbformat.write(nb, str(incoming / student / "exercises.ipynb"))
    nbformat.write(blank, str(incoming / "alice.ipynb"))   # uploaded without its folder
    outcomes = grade_lesson(source / LESSON, course=course, submissions=incoming, workers=1, limits=LIMITS,
                            progress=False)
    return {"course": course, "by": {o.student: o for o in outcomes}, "local_copy": local_copy}


@needs_bwrap
def test_controls_the_honest_keep_their_points_and_the_blank_scores_zero(graded):
    by = graded["by"]
    assert by["honest"].score == HONEST, by["honest"].reasons
    assert by["blank"].score == 0.0 and by["blank"].status == "graded", by["blank"].reasons


@needs_bwrap
def test_deleted_solution_cells_come_back_blank_not_from_the_local_copy(graded):
    gutted = graded["by"]["gutted"]
    assert gutted.status == "graded" and gutted.score == 0.0, gutted.reasons
    assert "ex1_nbytes (deleted)" in gutted.reason and "ex1_visible (deleted)" in gutted.reason
    restored = nbformat.read(str(graded["course"].root / "autograded" / "gutted" / LESSON / "exercises.ipynb"),
                             as_version=4)
    assert "raise NotImplementedError()" in _cell(restored, "ex1_nbytes").source


@needs_bwrap
def test_another_lessons_notebook_is_refused_as_such(graded):
    wrong = graded["by"]["wrong_lesson"]
    assert wrong.status == "refused" and wrong.score != wrong.score, wrong.reasons
    assert f"this is the notebook of lesson {OTHER}, not of {LESSON}" in wrong.reason
    assert "tampered" not in wrong.reason


@needs_bwrap
def test_no_page_or_graded_notebook_shows_the_local_copys_code(graded):
    root = graded["course"].root
    written = [p for folder in ("feedback", "autograded") for p in (root / folder).rglob("*") if p.is_file()]
    assert any(p.suffix == ".html" for p in written)
    assert not [p for p in written if "solved_in_my_local_copy" in p.read_text(errors="replace")]
    released = root / "release" / LESSON / "exercises.ipynb"   # the grader leaves the local copy alone
    assert hashlib.sha256(released.read_bytes()).hexdigest() == graded["local_copy"]


@needs_bwrap
def test_a_stray_notebook_at_the_top_of_the_class_folder_is_one_refused_row(graded):
    by = graded["by"]
    assert set(by) == {"honest", "blank", "gutted", "wrong_lesson", "alice.ipynb"}
    alice = by["alice.ipynb"]
    assert alice.status == "refused" and "not in a student folder: put it in alice/" in alice.reason
    rows = (graded["course"].root / "build" / f"grades_{LESSON}.csv").read_text().splitlines()
    assert any(row.startswith("alice.ipynb,") and "put it in alice/" in row for row in rows), rows


def _course(tmp_path, lesson=LESSON):
    source = tmp_path / "source"
    shutil.copytree(lesson_folder(lesson), source / lesson)
    return CourseDir(tmp_path, source)


def _solution_sources(nb) -> str:
    return "".join(c.source for c in nb.cells if _nbgrader(c).get("solution"))


def test_the_student_version_comes_from_the_source_whatever_the_gradebook_knows(tmp_path):
    """A course whose gradebook never heard of the lesson and one whose gradebook knows it get the
    same trusted version, with release/ holding solved work in both: it is never read."""
    reference = nbformat.read(str(lesson_folder(LESSON) / "exercises.ipynb"), as_version=4)
    for fresh in (True, False):
        course = _course(tmp_path / f"fresh-{fresh}")
        if not fresh:
            student_version(course, LESSON)   # the gradebook knows the lesson now
        released = course.root / "release" / LESSON / "exercises.ipynb"
        released.parent.mkdir(parents=True)
        nbformat.write(reference, str(released))
        blank = student_version(course, LESSON)
        blank_solutions = _solution_sources(blank)
        assert "raise NotImplementedError()" in blank_solutions and "BEGIN SOLUTION" not in blank_solutions
        assert nbformat.read(str(released), as_version=4) == reference


def test_a_changed_student_version_or_source_is_generated_again(tmp_path):
    course = _course(tmp_path)
    student_version(course, LESSON)
    notebook, record = trusted_paths(course.root, LESSON)
    reference = nbformat.read(str(course.source / LESSON / "exercises.ipynb"), as_version=4)
    nbformat.write(reference, str(notebook))   # someone put solutions into the grader's copy
    assert "BEGIN SOLUTION" not in _solution_sources(student_version(course, LESSON))
    source = course.source / LESSON / "exercises.ipynb"
    edited = copy.deepcopy(reference)
    _cell(edited, "ex1_nbytes").source = _cell(edited, "ex1_nbytes").source.replace("### BEGIN SOLUTION",
                                                                                    "# a new hint\n### BEGIN SOLUTION")
    nbformat.write(edited, str(source))
    assert "# a new hint" in _cell(student_version(course, LESSON), "ex1_nbytes").source
    assert json.loads(record.read_text())["sha256"] == hashlib.sha256(notebook.read_bytes()).hexdigest()


def test_grading_refuses_to_run_without_a_student_version_it_can_make(tmp_path):
    course = _course(tmp_path)
    (course.source / LESSON / "exercises.ipynb").write_text('{"cells": [ not json')
    with pytest.raises(GradingError) as error:
        student_version(course, LESSON)
    assert "generate_assignment 00_setup failed" in str(error.value) and "\n" not in str(error.value)
    assert not trusted_paths(course.root, LESSON)[0].exists()


@needs_bwrap
def test_course_grade_without_a_student_version_it_can_make_is_one_line_and_exit_1(tmp_path, monkeypatch, capsys):
    from course_tools import cli, grade_command, paths
    from course_tools.grading import grade

    lesson = tmp_path / "notebooks" / LESSON
    shutil.copytree(lesson_folder(LESSON), lesson)
    (lesson / "exercises.ipynb").write_text('{"cells": [ not json')
    for module, name, value in ((paths, "NOTEBOOKS", lesson.parent), (grade, "NOTEBOOKS", lesson.parent),
                                (grade, "REPO", tmp_path), (grade_command, "REPO", tmp_path), (cli, "REPO", tmp_path)):
        monkeypatch.setattr(module, name, value)
    monkeypatch.chdir(tmp_path)
    rc = cli.main(["grade", "00"])
    err = capsys.readouterr().err
    assert rc == 1 and "Traceback" not in err, err
    assert err.strip().splitlines()[-1].startswith("course grade: nbgrader generate_assignment 00_setup failed"), err
    assert not (tmp_path / "submitted").exists() and not (tmp_path / "build" / f"grades_{LESSON}.csv").exists()
