"""Step 1 of grading: intake. Read a student's submission, refuse what is not a notebook,
restore the test cells from the source (hidden tests included) and the grade cells'
metadata from the release, and make the scratch copy of the student's folder that the
sandbox sees.
"""
from __future__ import annotations

import copy
import json
import os
import shutil
import tempfile
from pathlib import Path

import nbformat

from .nbgrader_course import CourseDir


class SubmissionProblem(Exception):
    """The submission cannot be run at all; the message says why, in plain words."""



def _nb_meta(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {}) or {}


def is_test_cell(cell) -> bool:
    meta = _nb_meta(cell)
    return cell.get("cell_type") == "code" and bool(meta.get("grade")) and not meta.get("solution")


def read_submission(path: Path):
    """The student's notebook as an nbformat node; SubmissionProblem if it is not one."""
    if not path.exists():
        raise SubmissionProblem(f"missing file {path.name}")
    raw = path.read_bytes()
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise SubmissionProblem(f"not a notebook: {path.name} is not valid JSON ({str(exc)[:80]})") from None
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        raise SubmissionProblem(f"not a notebook: {path.name} has no list of cells")
    try:
        nb = nbformat.reads(raw.decode("utf-8"), as_version=4)
    except Exception as exc:  # noqa: BLE001 - any parse failure is the submission's
        raise SubmissionProblem(f"not a notebook: {str(exc)[:120]}") from None
    for cell in nb.cells:
        if cell.get("cell_type") not in ("code", "markdown", "raw") or not isinstance(cell.get("source", ""), str):
            raise SubmissionProblem("not a notebook: a cell has an unknown type or no text")
    return nb


def restore_test_cells(student_nb, source_nb, release_nb):
    """The student's notebook with every test cell exactly as in the source (hidden tests
    included) and every grade cell's metadata from the release; returns (nb, notes)."""
    source_cells = [c for c in source_nb.cells if _nb_meta(c).get("grade_id")]
    source_by_id = {_nb_meta(c)["grade_id"]: c for c in source_cells}
    release_by_id = {_nb_meta(c).get("grade_id"): c for c in release_nb.cells if _nb_meta(c).get("grade_id")}
    nb = copy.deepcopy(student_nb)
    edited, seen, kept = [], set(), []
    for cell in nb.cells:
        gid = _nb_meta(cell).get("grade_id")
        if gid is None:
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
        ref = release_by_id.get(gid, src)
        solution = bool(_nb_meta(src).get("solution"))
        locked = is_test_cell(src) or (_nb_meta(src).get("locked") and not solution)
        if locked or cell.cell_type != src.cell_type:
            if cell.source != ref.source and cell.source != src.source or cell.cell_type != src.cell_type:
                edited.append(f"{gid} (edited)")
            if solution and gid not in release_by_id:
                continue  # never hand a student the reference solution
            cell = copy.deepcopy(ref if solution else src)  # a solution goes back to the blank stub
            cell.metadata["nbgrader"] = copy.deepcopy(ref.metadata.get("nbgrader", _nb_meta(src)))
            if cell.cell_type == "code":
                cell.outputs, cell.execution_count = [], None
        else:
            cell.metadata["nbgrader"] = copy.deepcopy(ref.metadata.get("nbgrader", _nb_meta(src)))
        kept.append(cell)
    # put back deleted grade cells after the grade cell that precedes them in the source
    for i, src in enumerate(source_cells):
        gid = _nb_meta(src)["grade_id"]
        if gid in seen:
            continue
        if not is_test_cell(src) and gid not in release_by_id:
            continue  # never hand a student the reference solution
        cell = copy.deepcopy(release_by_id[gid] if not is_test_cell(src) else src)
        cell.metadata["nbgrader"] = copy.deepcopy(release_by_id.get(gid, src).metadata.get("nbgrader", _nb_meta(src)))
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
        edited.append(f"{gid} (deleted)")
        at = 0
        for prev in reversed(source_cells[:i]):
            idx = [j for j, c in enumerate(kept) if _nb_meta(c).get("grade_id") == _nb_meta(prev)["grade_id"]]
            if idx:
                at = idx[0] + 1
                break
        kept.insert(at, cell)
        seen.add(gid)
    nb.cells = kept
    notes = [f"test cells tampered with and restored: {', '.join(edited)}"] if edited else []
    return nb, notes



def copy_for_sandbox(folder: Path, uid: int | None) -> Path:
    """A scratch copy of one student's folder (only that folder), owned by the sandbox user."""
    scratch = Path(tempfile.mkdtemp(prefix="course-submission-"))
    work = scratch / "submission"
    shutil.copytree(folder, work, symlinks=False, ignore_dangling_symlinks=True,
                    ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    if uid is not None:
        for path in [work, *work.rglob("*")]:
            os.chown(path, uid, uid, follow_symlinks=False)
    os.chmod(work, 0o700)
    return work



def import_submissions(course: CourseDir, lesson: str, submissions: Path) -> list[str]:
    """Copy ``DIR/<student>/...`` (or ``DIR/<student>/<lesson>/...``) into submitted/."""
    students = []
    for student_dir in sorted(Path(submissions).iterdir()):
        if not student_dir.is_dir() or student_dir.name.startswith("."):
            continue
        src = student_dir / lesson if (student_dir / lesson).is_dir() else student_dir
        target = course.root / "submitted" / student_dir.name / lesson
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(src, target, symlinks=True)
        students.append(student_dir.name)
    return students

