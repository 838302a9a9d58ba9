"""Unit tests of the grader's trust boundaries (issue 16): what a submission may contain
(``submission``) and what data may cross from the student's kernel to the checker (``wire``);
and (issue 39) a class folder as people and tools leave it, taken in by ``intake`` and graded by
the real ``grade_lesson``: tool litter ignored, near-matches of exercises.ipynb named, an archive
called one, a folder name that is no student id given one."""
import json
import os
import socket

import numpy as np
import pytest
import torch

from course_tools.grading import intake, sandbox, submission, wire
from course_tools.grading.intake import SubmissionProblem
from course_tools.grading.sandbox import Limits

LIMITS = Limits(memory_bytes=2**30, processes=64, cell_seconds=60, notebook_seconds=300)


def test_read_submission_reasons(tmp_path):
    with pytest.raises(SubmissionProblem, match="missing file"):
        submission.read_submission(tmp_path / "exercises.ipynb")
    (tmp_path / "a.ipynb").write_text("{oops")
    with pytest.raises(SubmissionProblem, match="not valid JSON"):
        submission.read_submission(tmp_path / "a.ipynb")
    (tmp_path / "b.ipynb").write_text(json.dumps({"hello": 1}))
    with pytest.raises(SubmissionProblem, match="no list of cells"):
        submission.read_submission(tmp_path / "b.ipynb")
    os.symlink("/etc/passwd", tmp_path / "c.ipynb")
    with pytest.raises(SubmissionProblem, match="refused"):
        submission.read_submission(tmp_path / "c.ipynb")


@pytest.mark.parametrize("make, words", [
    (lambda d: os.symlink("/etc/passwd", d / "notes.txt"), "symbolic link"),
    (lambda d: os.symlink("/dev/zero", d / "zero"), "symbolic link"),
    (lambda d: os.mkfifo(d / "fifo"), "named pipe"),
    (lambda d: socket.socket(socket.AF_UNIX).bind(str(d / "sock")), "socket"),
    (lambda d: (d / "bad\nname.txt").write_text("x"), "not plain"),
    (lambda d: (d / "..hidden").write_text("x"), "not plain"),
    (lambda d: (d / "big.bin").write_bytes(b"x" * (intake.MAX_FILE_BYTES + 1)), "MiB"),
    (lambda d: [(d / f"f{i}.txt").write_text("x") for i in range(intake.MAX_FILES + 1)], "more than"),
    (lambda d: (d / "sub").mkdir() or os.symlink("/etc", d / "sub" / "etc"), "sub/etc"),
])
def test_intake_refuses_anything_but_plain_regular_files(tmp_path, make, words):
    folder = tmp_path / "student"
    folder.mkdir()
    (folder / "exercises.ipynb").write_text("{}")
    make(folder)
    with pytest.raises(SubmissionProblem, match=words):
        intake.inspect_folder(folder)


def test_intake_lists_and_copies_regular_files_only(tmp_path):
    folder = tmp_path / "student"
    (folder / "data").mkdir(parents=True)
    (folder / "exercises.ipynb").write_text("{}")
    (folder / "data" / "x.csv").write_text("1,2\n")
    files = intake.inspect_folder(folder)
    assert files == [("data/x.csv", 4), ("exercises.ipynb", 2)]
    target = intake.copy_files(folder, tmp_path / "copy", files)
    assert (target / "data" / "x.csv").read_text() == "1,2\n"
    os.symlink("/etc/passwd", tmp_path / "link")  # a file swapped for a link after inspection
    (folder / "exercises.ipynb").unlink()
    os.symlink(tmp_path / "link", folder / "exercises.ipynb")
    with pytest.raises(SubmissionProblem):
        intake.copy_files(folder, tmp_path / "copy2", files)


def test_timestamp_that_is_not_a_date_is_ignored_with_a_note(tmp_path):
    (tmp_path / "timestamp.txt").write_text("2026-11-20 10:00:00.000000 UTC")
    assert intake.read_timestamp(tmp_path)[0].year == 2026
    (tmp_path / "timestamp.txt").write_text("soon-ish \x00")
    assert intake.read_timestamp(tmp_path) == (None, "timestamp.txt is not a date and was ignored")


def test_plain_data_crosses_and_comes_back_as_builtins():
    value = {"a": (1, 2.5, None, True, "s"), 3: [float("inf"), 2**80], "arr": np.arange(6.0).reshape(2, 3),
             "t": torch.tensor([1.0, 2.0], dtype=torch.float16), "d": torch.device("cpu"), "np": np.float32}
    back = wire.decode(wire.encode(value))
    assert back["a"] == (1, 2.5, None, True, "s") and back[3] == [float("inf"), 2**80]
    assert np.array_equal(back["arr"], value["arr"]) and back["t"].dtype == torch.float16
    assert back["d"] == torch.device("cpu") and back["np"] is np.float32


class AlwaysEqual(float):
    def __eq__(self, other):
        return True


@pytest.mark.parametrize("value", [AlwaysEqual(1.0), object(), lambda: 1, np.array([object()]),
                                   type("X", (), {})()])
def test_anything_else_is_refused(value):
    with pytest.raises(wire.NotPlain):
        wire.encode(value)


@pytest.mark.parametrize("text", ['{"$": "ndarray", "v": "AAAA"}', '{"$": "nptype", "v": "ndarray"}',
                                  '{"$": "weird"}', '[' * 5000 + ']' * 5000, '{"x": 1}'])
def test_malformed_data_is_rejected(text):
    with pytest.raises((ValueError, RecursionError)):
        wire.decode(text)


def _nb_json(meta, extra_cell_meta=None):
    nb = {"nbformat": 4, "nbformat_minor": 5,
          "metadata": {"widgets": {"x": 1}, "kernelspec": {"name": "python3", "display_name": "Python 3"}},
          "cells": [{"id": "a1", "cell_type": "markdown", "metadata": {"nbgrader": meta}, "source": ["hi"]},
                    {"id": "a2", "cell_type": "code", "metadata": extra_cell_meta or {}, "source": "x = 1",
                     "outputs": [{"output_type": "stream", "name": "stdout", "text": "1"}], "execution_count": 3}]}
    return nb


@pytest.mark.parametrize("meta, words", [
    ({"grade": True, "points": 1}, "without a grade_id"),
    ({"grade": True, "grade_id": ["ex1_visible"], "points": 1}, "grade_id is a list"),
    ("yes", "it is str, not a mapping"),
    ({"grade_id": "ok", "grade": "yes"}, "grade is not true or false"),
    ({"grade_id": "ok", "grade": True, "points": float("nan")}, "points is not a number"),
])
def test_malformed_nbgrader_metadata_is_dropped_with_a_plain_note(tmp_path, meta, words):
    path = tmp_path / "exercises.ipynb"
    path.write_text(json.dumps(_nb_json(meta)))
    nb, notes = submission.read_submission(path)
    assert len(notes) == 1 and "cell 1" in notes[0] and words in notes[0] and "\n" not in notes[0]
    assert "nbgrader" not in nb.cells[0].metadata
    assert list(nb.metadata) == ["kernelspec"]                      # widget state never kept
    assert nb.cells[1].outputs == [] and nb.cells[1].execution_count is None


def test_well_formed_metadata_is_kept_and_deep_json_refused(tmp_path):
    path = tmp_path / "exercises.ipynb"
    good = {"grade": True, "solution": False, "grade_id": "ex1_visible", "points": 1, "schema_version": 3}
    deep = {"slideshow": {"slide_type": "slide"}, "junk": json.loads("[" * 500 + "]" * 500)}
    path.write_text(json.dumps(_nb_json(good, deep)))
    nb, notes = submission.read_submission(path)
    assert notes == [] and nb.cells[0].metadata["nbgrader"] == good
    assert nb.cells[1].metadata == {"slideshow": {"slide_type": "slide"}}   # the deep junk is dropped
    path.write_text('{"cells": [], "metadata": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(SubmissionProblem, match="nested too deeply"):
        submission.read_submission(path)


def test_restore_drops_nbgrader_metadata_of_cells_that_match_no_grade_cell():
    import nbformat

    source = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3"}})
    student = nbformat.v4.new_notebook(metadata={"widgets": {}})
    cell = nbformat.v4.new_markdown_cell("extra")
    cell.metadata["nbgrader"] = {"grade": False, "solution": False, "locked": False}
    student.cells.append(cell)
    nb, _ = submission.restore_test_cells(student, source, source)
    assert "nbgrader" not in nb.cells[0].metadata and dict(nb.metadata) == dict(source.metadata)


@pytest.mark.parametrize("text, shown", [("=1+1", "'=1+1"), ("+1-2", "'+1-2"), ("-2+3", "'-2+3"),
                                         ("@SUM(1)", "'@SUM(1)"), ("\tx", "'\tx"), ("\rx", "'\rx"),
                                         ("alice", "alice"), ("-2", "-2"),
                                         ("14", "14"), ("1.5e+12", "1.5e+12")])
def test_csv_cells_a_spreadsheet_would_run_are_escaped(text, shown):
    from course_tools.grading.results import csv_cell

    assert csv_cell(text) == shown


def test_a_stray_file_in_a_class_folder_is_one_refused_entry_and_the_class_is_taken_in(tmp_path):
    from course_tools.grading.nbgrader_course import CourseDir

    incoming = tmp_path / "incoming"
    for student in ("bob", "carol"):
        (incoming / student).mkdir(parents=True)
        (incoming / student / "exercises.ipynb").write_text("{}")
    (incoming / "alice.ipynb").write_text("{}")       # a notebook uploaded without its folder
    (incoming / "exercises.ipynb").write_text("{}")   # whose folder is not known
    (incoming / "notes.txt").write_text("x")
    course = CourseDir(tmp_path / "course", tmp_path / "source")
    refused, _, taken = intake.import_submissions(course, "00_setup", incoming)
    assert taken == ["bob", "carol"]
    assert refused == {
        "alice.ipynb": "refused: alice.ipynb is a notebook at the top of the class folder, not in a student folder: "
                       "put it in alice/ as alice/exercises.ipynb",
        "exercises.ipynb": "refused: exercises.ipynb is a notebook at the top of the class folder, not in a student "
                           "folder: put it in its student's folder, <student>/exercises.ipynb",
        "notes.txt": "refused: notes.txt is a file at the top of the class folder, not a student's folder"}
    for one_student in (incoming / "bob", tmp_path / "lone"):   # one student's work is no class
        (one_student / "data").mkdir(parents=True)
        (one_student / "exercises.ipynb").write_text("{}")
        with pytest.raises(SubmissionProblem, match="holds exercises.ipynb itself, as one student's folder does"):
            intake.import_submissions(course, "00_setup", one_student)


# ---- a class folder as graders receive one: tool litter, copies, archives, names with spaces ----

def _class_folder(incoming):
    """A class folder with what people and tools leave in it: ``{student: files}`` (``None``: a folder)."""
    layout = {
        "ann/exercises.ipynb": "{}", "ann/.ipynb_checkpoints/exercises-checkpoint.ipynb": "{}",
        "ann/__pycache__/helpers.cpython-313.pyc": "x", "ann/.DS_Store": "x", "ann/exercises (1).ipynb": "{}",
        "ann/data/__pycache__/x.pyc": "x",
        "bob/Exercises.ipynb": "{}",
        "cid/exercises-Copy1.ipynb": "{}", "cid/exercises (2).ipynb": "{}",
        "dee/work.zip": "PK\x03\x04",
        "eve/01_hardware_foundations/exercises.ipynb.txt": "{}",
        "Jane Doe/exercises.ipynb": "{}",
        "José Núñez/exercises.ipynb": "{}",
        "fay.zip": "PK\x03\x04",
        "__MACOSX/ann/._exercises.ipynb": "x", ".DS_Store": "x",
    }
    for rel, text in layout.items():
        (incoming / rel).parent.mkdir(parents=True, exist_ok=True)
        (incoming / rel).write_text(text)
    os.symlink("/etc", incoming / "ann" / "data" / ".ipynb_checkpoints")   # litter is never followed


def test_intake_ignores_tool_litter_names_near_matches_and_suggests_ids(tmp_path):
    from course_tools.grading.nbgrader_course import CourseDir

    incoming = tmp_path / "incoming"
    _class_folder(incoming)
    course = CourseDir(tmp_path / "course", tmp_path / "source")
    refused, _, taken = intake.import_submissions(course, "00_setup", incoming)
    assert taken == ["ann", "bob", "cid", "dee", "eve"]
    assert refused == {
        "Jane Doe": "refused: the folder name is not a plain student id (letters, digits, . _ - @): "
                    "rename the folder to jane_doe or jane.doe",
        "José Núñez": "refused: the folder name is not a plain student id (letters, digits, . _ - @): "
                      "rename the folder to jose_nunez or jose.nunez",
        "fay.zip": "refused: fay.zip is a zip archive at the top of the class folder: "
                   "unpack it into fay/, as fay/exercises.ipynb"}
    submitted = course.root / "submitted"
    ann = intake.inspect_folder(submitted / "ann" / "00_setup")
    assert [rel for rel, _ in ann] == ["exercises (1).ipynb", "exercises.ipynb", "timestamp.txt"]  # no litter copied
    assert intake.notebook_notes(ann) == ["graded exercises.ipynb; exercises (1).ipynb beside it was not graded"]
    why = {}
    for student in ("bob", "cid", "dee", "eve"):
        with pytest.raises(SubmissionProblem) as refusal:
            intake.notebook_notes(intake.inspect_folder(submitted / student / "00_setup"))
        why[student] = str(refusal.value)
    assert why == {
        "bob": "missing file exercises.ipynb; found Exercises.ipynb: rename it to exercises.ipynb",
        "cid": "missing file exercises.ipynb; found exercises (2).ipynb and exercises-Copy1.ipynb: "
               "rename the one to grade to exercises.ipynb",
        "dee": "missing file exercises.ipynb; found work.zip, a zip archive: unpack it into the student's folder, "
               "exercises.ipynb at its top",
        "eve": "missing file exercises.ipynb; found 01_hardware_foundations/exercises.ipynb.txt: "
               "move it to the top of the folder as exercises.ipynb"}
    with pytest.raises(SubmissionProblem, match=r"^missing file exercises.ipynb$"):
        intake.notebook_notes([("notes.txt", 3)])
    (tmp_path / "class.zip").write_text("PK\x03\x04")
    with pytest.raises(SubmissionProblem, match="class.zip is a zip archive: unpack it and give the folder"):
        intake.folder_problem(tmp_path / "class.zip")


@pytest.mark.timeout(600)
@pytest.mark.skipif(not sandbox.bubblewrap(), reason="no sandbox: " + sandbox.why_no_sandbox())
def test_course_grade_takes_a_class_as_people_and_tools_leave_it(tmp_path):
    """Lesson 00 (frozen) graded by the real path: ann's folder holds Jupyter's checkpoints, a
    compiled module and a re-downloaded copy beside her notebook (graded, the row names the copy),
    bob saved his as Exercises.ipynb, Jane's folder is "Jane Doe", cid's work came as a zip: each
    refusal says how to fix it, and the rest of the class is graded."""
    import csv

    import nbformat
    from scratch_course import cell, scratch_course, solutions

    from course_tools.grading.grade import grade_lesson

    lesson = "00_setup"
    course, source = scratch_course(tmp_path, lesson)
    blank = nbformat.read(str(tmp_path / "release" / lesson / "exercises.ipynb"), as_version=4)
    answered = nbformat.from_dict(json.loads(json.dumps(blank)))
    for grade_id, text in solutions(lesson).items():
        cell(answered, grade_id).source = text
    incoming = tmp_path / "incoming"
    for rel, nb in (("ann/exercises.ipynb", answered), ("ann/exercises (1).ipynb", blank),
                    ("ann/.ipynb_checkpoints/exercises-checkpoint.ipynb", blank),
                    ("bob/Exercises.ipynb", answered), ("Jane Doe/exercises.ipynb", answered)):
        (incoming / rel).parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, str(incoming / rel))
    (incoming / "ann" / "__pycache__").mkdir()
    (incoming / "ann" / "__pycache__" / "helpers.cpython-313.pyc").write_bytes(b"\0" * 16)
    (incoming / "cid.zip").write_bytes(b"PK\x03\x04")
    by = {o.student: o for o in grade_lesson(source / lesson, course=course, submissions=incoming, progress=False,
                                             feedback=False, limits=LIMITS)}
    full = by["ann"].max_score
    assert (by["ann"].status, by["ann"].score) == ("graded", full) and full > 0
    assert by["ann"].reason == "graded exercises.ipynb; exercises (1).ipynb beside it was not graded"
    with open(tmp_path / "build" / f"grades_{lesson}.csv", newline="") as fh:
        rows = {row["student"]: row for row in csv.DictReader(fh)}
    assert sorted(rows) == ["Jane Doe", "ann", "bob", "cid.zip"]
    assert rows["ann"]["score"] == f"{full:g}"
    assert {s: (r["score"], r["reason"]) for s, r in rows.items() if s != "ann"} == {
        "bob": ("", "missing file exercises.ipynb; found Exercises.ipynb: rename it to exercises.ipynb"),
        "Jane Doe": ("", ("refused: the folder name is not a plain student id (letters, digits, . _ - @): "
                         "rename the folder to jane_doe or jane.doe")),
        "cid.zip": ("", ("refused: cid.zip is a zip archive at the top of the class folder: "
                        "unpack it into cid/, as cid/exercises.ipynb"))}
