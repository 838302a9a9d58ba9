"""Step 1 of grading: intake. A submission is a folder of regular files with plain names and
bounded sizes; anything else (a symbolic link anywhere, a device, a pipe, a socket, an odd name,
too many or too large files) is refused for that student with the reason, and nothing of it is
copied or read. Then: read the notebook, refuse what is not one, restore the test cells from the
source (hidden tests included) and the grade cells' metadata from the release, and copy the
student's files (regular files only, opened without following links) for the sandbox.
"""
from __future__ import annotations

import copy
import json
import os
import re
import shutil
import stat
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
    if not os.path.lexists(path):
        raise SubmissionProblem(f"missing file {path.name}")
    raw = _read_regular(path, MAX_FILE_BYTES)
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




PLAIN_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+@ -]{0,99}")
STUDENT_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.@-]{0,63}")
MAX_FILES = 200                 # files and folders in one submission
MAX_FILE_BYTES = 20 * 2**20     # one file
MAX_TOTAL_BYTES = 60 * 2**20    # the whole submission
MAX_DEPTH = 6                   # folder nesting


def _kind(mode: int) -> str:
    for test, word in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a named pipe"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device")):
        if test(mode):
            return word
    return "not a regular file"


def inspect_folder(folder: Path) -> list[tuple[str, int]]:
    """(relative path, bytes) of every regular file of a submission; SubmissionProblem saying
    why when it holds anything else or passes a limit. Follows no link, opens nothing."""
    try:
        top = os.lstat(folder)
    except OSError:
        raise SubmissionProblem("no submission folder") from None
    if not stat.S_ISDIR(top.st_mode):
        raise SubmissionProblem(f"refused: the submission folder is {_kind(top.st_mode)}, not a folder")
    files, count, total = [], 0, 0
    todo = [(Path(folder), "", 0)]
    while todo:
        path, rel, depth = todo.pop()
        with os.scandir(path) as entries:
            for entry in entries:
                name = entry.name
                shown = (rel + "/" + name).lstrip("/")
                if not PLAIN_NAME.fullmatch(name) or name.strip() != name:
                    raise SubmissionProblem(f"refused: the file name {shown!r} is not plain (letters, digits, . _ - + @ and spaces)")
                count += 1
                mode = entry.stat(follow_symlinks=False).st_mode
                if stat.S_ISDIR(mode):
                    if depth + 1 > MAX_DEPTH:
                        raise SubmissionProblem(f"refused: folders nested deeper than {MAX_DEPTH} ({shown})")
                    todo.append((Path(entry.path), shown, depth + 1))
                elif stat.S_ISREG(mode):
                    size = entry.stat(follow_symlinks=False).st_size
                    total += size
                    if size > MAX_FILE_BYTES:
                        raise SubmissionProblem(f"refused: {shown} is {size / 2**20:.1f} MiB (limit {MAX_FILE_BYTES / 2**20:g} MiB per file)")
                    files.append((shown, size))
                else:
                    raise SubmissionProblem(f"refused: {shown} is {_kind(mode)}; a submission holds regular files only")
                if count > MAX_FILES or total > MAX_TOTAL_BYTES:
                    raise SubmissionProblem(f"refused: more than {MAX_FILES} files or {MAX_TOTAL_BYTES / 2**20:g} MiB")
    return sorted(files)


def _read_regular(path: Path, limit: int) -> bytes:
    """The bytes of a regular file, opened without following a link, at most ``limit``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        raise SubmissionProblem(f"refused: {path.name} cannot be opened as a regular file ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise SubmissionProblem(f"refused: {path.name} is {_kind(os.fstat(fd).st_mode)}")
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise SubmissionProblem(f"refused: {path.name} is larger than {limit / 2**20:g} MiB")
    return data


def copy_files(folder: Path, target: Path, files, uid: int | None = None) -> Path:
    """Copy the listed regular files of ``folder`` into ``target`` (created), owned by ``uid``."""
    target.mkdir(parents=True, exist_ok=True)
    for rel, size in files:
        dest = target / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(_read_regular(folder / rel, max(size, 0) + 1))
    if uid is not None:
        for path in [target, *target.rglob("*")]:
            os.chown(path, uid, uid, follow_symlinks=False)
    os.chmod(target, 0o700)
    return target


def read_timestamp(folder: Path) -> tuple[object, str]:
    """(submission time or None, a note when timestamp.txt is present but unusable)."""
    path = folder / "timestamp.txt"
    if not os.path.lexists(path):
        return None, ""
    from nbgrader.utils import parse_utc

    try:
        return parse_utc(_read_regular(path, 200).decode("utf-8").strip()), ""
    except (SubmissionProblem, ValueError, TypeError, OverflowError, UnicodeDecodeError):
        return None, "timestamp.txt is not a date and was ignored"


def import_submissions(course: CourseDir, lesson: str, submissions: Path) -> dict[str, str]:
    """Copy ``DIR/<student>/...`` (or ``DIR/<student>/<lesson>/...``) into submitted/ after
    inspecting it; {student: reason} for every folder refused (nothing of it is copied, and an
    earlier copy of that student's lesson is removed so it is not graded as new)."""
    refused = {}
    for student_dir in sorted(Path(submissions).iterdir()):
        name = student_dir.name
        if name.startswith("."):
            continue
        if not STUDENT_NAME.fullmatch(name):
            refused[repr(name)[1:-1]] = "refused: the folder name is not a plain student id (letters, digits, . _ - @)"
            continue
        top = os.lstat(student_dir)
        if not stat.S_ISDIR(top.st_mode):
            refused[name] = f"refused: the student's entry is {_kind(top.st_mode)}, not a folder"
            _remove(course, name, lesson)
            continue
        src = student_dir / lesson if os.path.lexists(student_dir / lesson) else student_dir
        target = course.root / "submitted" / name / lesson
        _remove(course, name, lesson)
        try:
            copy_files(src, target, inspect_folder(src))
        except SubmissionProblem as exc:
            _remove(course, name, lesson)
            refused[name] = str(exc)
    return refused


def _remove(course: CourseDir, student: str, lesson: str) -> None:
    target = course.root / "submitted" / student / lesson
    if os.path.lexists(target):
        if os.path.islink(target) or not target.is_dir():
            target.unlink()
        else:
            shutil.rmtree(target)
