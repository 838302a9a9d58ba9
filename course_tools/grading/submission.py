"""Step 1 of grading, the notebook: read a submitted notebook, refuse what is not one, keep of
its metadata only what is well formed and used (``sanitise_notebook``: a malformed nbgrader entry
is dropped with a note for that student, never passed on to the merge), refuse another lesson's
notebook, and restore the test cells from the source (hidden tests included), the solution cells'
stubs and the grade cells' metadata from the grader's own student version (generated from the
source under ``build/``, never the ``release/`` copy students work in: ``nbgrader_course.student_version``).
The folder it came in is taken in by ``intake``.
"""
from __future__ import annotations

import copy
import json
import math
import os
import re
from pathlib import Path

import nbformat

from .cells import grade_id, is_locked, is_solution, is_test_cell, nbgrader_meta
from .intake import MAX_FILE_BYTES, SubmissionProblem, read_regular

GRADE_ID = re.compile(r"[A-Za-z0-9_-]{1,100}")   # what nbgrader itself accepts as a grade_id
NBGRADER_FLAGS = ("grade", "solution", "locked", "task")
NBGRADER_TEXT = ("checksum", "cell_type")
CELL_FLAGS = ("deletable", "editable")           # other cell metadata kept: plain booleans and text
CELL_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")     # nbformat 4.5's cell id


def nbgrader_problem(meta) -> str | None:
    """Why a cell's nbgrader metadata is malformed (in plain words), or None when it is well
    formed: a mapping whose flags are booleans, whose ``grade_id`` is a plain id (required by a
    grade, solution or task cell), whose ``points`` are a finite number >= 0 (required by a grade
    cell) and whose other known entries are numbers or short text."""
    if not isinstance(meta, dict):
        return f"it is {type(meta).__name__}, not a mapping"
    for key in NBGRADER_FLAGS:
        if key in meta and not isinstance(meta[key], bool):
            return f"{key} is not true or false"
    gid = meta.get("grade_id")
    if "grade_id" in meta and not (isinstance(gid, str) and GRADE_ID.fullmatch(gid)):
        return "grade_id is not a plain id" if isinstance(gid, str) else f"grade_id is a {type(gid).__name__}, not text"
    if gid is None and any(meta.get(k) for k in ("grade", "solution", "task")):
        return "a graded, solution or task cell without a grade_id"
    points = meta.get("points")
    if "points" in meta and (isinstance(points, bool) or not isinstance(points, (int, float))
                             or not math.isfinite(points) or points < 0):
        return "points is not a number >= 0"
    if meta.get("grade") and "points" not in meta:
        return "a graded cell without points"
    version = meta.get("schema_version")
    if "schema_version" in meta and (isinstance(version, bool) or not isinstance(version, int)):
        return "schema_version is not a whole number"
    for key in NBGRADER_TEXT:
        if key in meta and not (isinstance(meta[key], str) and len(meta[key]) <= 200):
            return f"{key} is not short text"
    return None


def _kept_notebook_metadata(meta) -> dict:
    """Of the notebook's metadata: ``kernelspec`` and ``language_info``, as short text only."""
    meta = meta if isinstance(meta, dict) else {}
    kept_meta = {}
    for key, fields in (("kernelspec", ("name", "display_name", "language")), ("language_info", ("name", "version"))):
        if isinstance(meta.get(key), dict):
            kept = {f: meta[key][f] for f in fields if isinstance(meta[key].get(f), str) and len(meta[key][f]) <= 200}
            if all(f in kept for f in fields[:2 if key == "kernelspec" else 1]):  # what nbformat requires
                kept_meta[key] = kept
    return kept_meta


def _kept_cell_metadata(cmeta, number: int, malformed: list[str]) -> dict:
    """Of one cell's metadata: a well-formed ``nbgrader`` entry (known keys; a malformed one is
    named in ``malformed``), ``slideshow.slide_type``, ``tags`` and the editing flags."""
    cmeta = cmeta if isinstance(cmeta, dict) else {}
    kept: dict = {}
    if "nbgrader" in cmeta:
        why = nbgrader_problem(cmeta["nbgrader"])
        if why:
            malformed.append(f"cell {number} ({why})")
        else:
            kept["nbgrader"] = {k: v for k, v in cmeta["nbgrader"].items()
                                if k in (*NBGRADER_FLAGS, *NBGRADER_TEXT, "grade_id", "points", "schema_version")}
    slide = cmeta.get("slideshow")
    if isinstance(slide, dict) and isinstance(slide.get("slide_type"), str) and len(slide["slide_type"]) <= 20:
        kept["slideshow"] = {"slide_type": slide["slide_type"]}
    tags = cmeta.get("tags")
    if isinstance(tags, list) and len(tags) <= 50 and all(isinstance(t, str) and len(t) <= 100 for t in tags):
        kept["tags"] = list(tags)
    kept.update({k: cmeta[k] for k in CELL_FLAGS if isinstance(cmeta.get(k), bool)})
    return kept


def _kept_cell(cell, number: int, ids: set[str], malformed: list[str]) -> dict:
    """One cell reduced to its type, text, id (valid and not seen before) and kept metadata;
    SubmissionProblem when it is not a cell."""
    if not isinstance(cell, dict) or cell.get("cell_type") not in ("code", "markdown", "raw"):
        raise SubmissionProblem(f"not a notebook: cell {number} has an unknown type")
    source = cell.get("source", "")
    if isinstance(source, list) and all(isinstance(line, str) for line in source):
        source = "".join(source)
    if not isinstance(source, str):
        raise SubmissionProblem(f"not a notebook: cell {number} has no text")
    new = {"cell_type": cell["cell_type"], "metadata": _kept_cell_metadata(cell.get("metadata"), number, malformed),
           "source": source}
    if isinstance(cell.get("id"), str) and CELL_ID.fullmatch(cell["id"]) and cell["id"] not in ids:
        new["id"] = cell["id"]
        ids.add(cell["id"])
    if cell["cell_type"] == "code":
        new["outputs"], new["execution_count"] = [], None
    return new


def _settle_ids(cells: list[dict], ids: set[str], minor: int) -> None:
    """Format 4.5 wants a unique id on every cell, earlier versions none."""
    for cell in cells:
        while minor >= 5 and "id" not in cell:
            fresh = os.urandom(4).hex()
            if fresh not in ids:
                cell["id"] = fresh
                ids.add(fresh)
        if minor < 5:
            cell.pop("id", None)


def sanitise_notebook(data: dict) -> list[str]:
    """Reduce a parsed notebook (JSON) in place to what grading uses, each part checked; return
    notes for the student. Kept: per cell its type, text and id, and of its metadata a
    well-formed ``nbgrader`` entry (known keys only), ``slideshow.slide_type``, ``tags`` and the
    ``deletable``/``editable`` flags; of the notebook's metadata ``kernelspec`` and
    ``language_info`` as text. Dropped: outputs (the grader makes its own), attachments, widget
    state and everything else. A malformed nbgrader entry is removed and named in the notes.
    SubmissionProblem when the notebook's shape itself is wrong."""
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        raise SubmissionProblem("not a notebook: it has no list of cells")
    for key in ("nbformat", "nbformat_minor"):
        if isinstance(data.get(key), bool) or not isinstance(data.get(key), int):
            raise SubmissionProblem(f"not a notebook: {key} is not a whole number")
    malformed: list[str] = []
    ids: set[str] = set()
    cells = [_kept_cell(cell, number, ids, malformed) for number, cell in enumerate(data["cells"], start=1)]
    minor = min(max(data["nbformat_minor"], 0), 5)
    _settle_ids(cells, ids, minor)
    kept_meta = _kept_notebook_metadata(data.get("metadata"))
    data.clear()
    data.update({"cells": cells, "metadata": kept_meta, "nbformat": 4, "nbformat_minor": minor})
    return [f"malformed nbgrader metadata ignored: {', '.join(malformed[:5])}"
            + (f" and {len(malformed) - 5} more cells" if len(malformed) > 5 else "")] if malformed else []


def read_submission(path: Path):
    """(the student's notebook as an nbformat node, notes for the student): its JSON parsed
    once, checked and reduced by ``sanitise_notebook``; SubmissionProblem if it is not a
    notebook (not JSON, nested too deeply to read, not version 4, a cell without text)."""
    if not os.path.lexists(path):
        raise SubmissionProblem(f"missing file {path.name}")
    raw = read_regular(path, MAX_FILE_BYTES)
    try:
        data = json.loads(raw.decode("utf-8"))
    except RecursionError:
        raise SubmissionProblem(f"not a notebook: {path.name} is JSON nested too deeply to read") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise SubmissionProblem(f"not a notebook: {path.name} is not valid JSON ({str(exc)[:80]})") from None
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        raise SubmissionProblem(f"not a notebook: {path.name} has no list of cells")
    if data.get("nbformat") != 4:
        raise SubmissionProblem(f"not a notebook: {path.name} is not in notebook format 4")
    notes = sanitise_notebook(data)
    try:
        nb = nbformat.from_dict(data)
        nbformat.validate(nb)
    except Exception as exc:  # noqa: BLE001 - any shape the checks above missed is the submission's
        raise SubmissionProblem(f"not a notebook: {str(exc).splitlines()[0][:120]}") from None
    return nb, notes


def _restored_cell(cell, src, ref, blank_by_id: dict, edited: list[str]):
    """The student's grade cell ``cell`` as grading uses it: a locked cell (a test, or the
    instructor's) or one whose type changed is put back as the student version has it (a
    solution: its blank stub) or the source (a test), noting an edit; an open solution cell is
    kept with the student version's metadata. None for a solution the student version lacks
    (never hand a student the reference solution)."""
    gid = grade_id(src)
    solution = is_solution(src)
    locked = is_test_cell(src) or (is_locked(src) and not solution)
    if locked or cell.cell_type != src.cell_type:
        if cell.source != ref.source and cell.source != src.source or cell.cell_type != src.cell_type:
            edited.append(f"{gid} (edited)")
        if solution and gid not in blank_by_id:
            return None
        cell = copy.deepcopy(ref if solution else src)
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    cell.metadata["nbgrader"] = copy.deepcopy(ref.metadata.get("nbgrader", nbgrader_meta(src)))
    return cell


def _put_back_deleted(kept: list, source_cells: list, blank_by_id: dict, seen: set, edited: list[str]) -> None:
    """Deleted grade cells back, each after the grade cell that precedes it in the source: a test
    as the source has it, any other (a solution: its blank stub) as the student version has it."""
    for i, src in enumerate(source_cells):
        gid = grade_id(src)
        if gid in seen:
            continue
        if not is_test_cell(src) and gid not in blank_by_id:
            continue  # never hand a student the reference solution
        cell = copy.deepcopy(blank_by_id[gid] if not is_test_cell(src) else src)
        cell.metadata["nbgrader"] = copy.deepcopy(blank_by_id.get(gid, src).metadata.get("nbgrader",
                                                                                          nbgrader_meta(src)))
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
        edited.append(f"{gid} (deleted)")
        at = 0
        for prev in reversed(source_cells[:i]):
            idx = [j for j, c in enumerate(kept) if grade_id(c) == grade_id(prev)]
            if idx:
                at = idx[0] + 1
                break
        kept.insert(at, cell)
        seen.add(gid)


def restore_test_cells(student_nb, source_nb, blank_nb):
    """The student's notebook with every test cell exactly as in the source (hidden tests
    included), every other grade cell that was deleted or locked and edited as in ``blank_nb``
    (the grader's trusted student version: a solution comes back as its blank stub, never with
    anyone's code), every grade cell's metadata and the notebook's metadata ``blank_nb``'s; a
    cell that matches no grade cell of the source keeps no nbgrader metadata. Returns (nb, notes)."""
    source_cells = [c for c in source_nb.cells if grade_id(c)]
    source_by_id = {grade_id(c): c for c in source_cells}
    blank_by_id = {grade_id(c): c for c in blank_nb.cells if grade_id(c)}
    nb = copy.deepcopy(student_nb)
    nb.metadata = copy.deepcopy(blank_nb.metadata)
    edited, seen, kept = [], set(), []
    for cell in nb.cells:
        gid = grade_id(cell)
        if gid is None:  # no grade cell of the source: a plain cell
            cell.get("metadata", {}).pop("nbgrader", None)
            kept.append(cell)
            continue
        if gid not in source_by_id or gid in seen:  # invented or duplicated grade cell: plain cell
            cell.metadata.pop("nbgrader", None)
            if is_test_cell(cell) or gid in seen:
                edited.append(f"{gid} (extra copy removed)")
                continue
            kept.append(cell)
            continue
        seen.add(gid)
        src = source_by_id[gid]
        restored = _restored_cell(cell, src, blank_by_id.get(gid, src), blank_by_id, edited)
        if restored is not None:
            kept.append(restored)
    _put_back_deleted(kept, source_cells, blank_by_id, seen, edited)
    nb.cells = kept
    notes = [f"test cells tampered with and restored: {', '.join(edited)}"] if edited else []
    return nb, notes


def lesson_marks(nb) -> set[str]:
    """What marks a notebook (parsed JSON or nbformat node) as one lesson's: the grade ids of its
    nbgrader cells and those cells' ids (random per cell, kept by the release and by Jupyter)."""
    marks = set()
    for cell in nb.get("cells", []) if isinstance(nb, dict) else []:
        gid = grade_id(cell)
        if gid is not None:
            marks.add(f"grade:{gid}")
            if isinstance(cell.get("id"), str):
                marks.add(f"cell:{cell['id']}")
    return marks


def refuse_other_lesson(nb, lesson: str, marks_by_lesson: dict[str, set[str]]) -> None:
    """SubmissionProblem when ``nb`` is the notebook of another lesson of the course: its
    nbgrader cells (grade ids, cell ids) match that lesson's (``marks_by_lesson``, see
    ``lesson_marks``) better than ``lesson``'s. Lessons share test ids such as ``ex1_visible``,
    so such a notebook would otherwise be graded as ``lesson``'s with its cells restored."""
    have = lesson_marks(nb)
    own = len(have & marks_by_lesson.get(lesson, set()))
    matched, other = max(((len(have & marks), name) for name, marks in marks_by_lesson.items() if name != lesson),
                         default=(0, ""))
    if matched > own:
        raise SubmissionProblem(f"refused: this is the notebook of lesson {other}, not of {lesson} (its graded "
                                f"cells are {other}'s): hand in {lesson}'s exercises.ipynb")
