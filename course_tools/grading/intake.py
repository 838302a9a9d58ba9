"""Step 1 of grading, the folder: a submission is a folder of regular files with plain names and
bounded sizes; anything else (a symbolic link anywhere, a device, a pipe, a socket, an odd name,
too many or too large files) is refused for that student with the reason (``SubmissionProblem``),
and nothing of it is copied or read. What tools leave beside the work (``TOOL_LITTER``: Jupyter's
checkpoints, ...) is ignored, wherever it lies. The student's files are copied for the sandbox
(regular files only, opened without following links: ``read_regular``); the notebook among them
(``exercises.ipynb``, chosen over a near-duplicate such as ``exercises (1).ipynb``, or named as the
near match when it is missing: ``notebook_notes``) is read by ``submission``, through
``read_regular`` too. Refusals say how to fix what they refuse: a folder name that is no student
id gets one suggested, an archive is called one.

The submission time is the grader's: ``import_submissions`` writes ``timestamp.txt`` with the
time it took the files in (a ``timestamp.txt`` of the student's own is never copied), and keeps
the earlier time when the files are the same as last time. A folder that ``nbgrader collect``
brought into ``submitted/`` keeps the ``timestamp.txt`` nbgrader's exchange recorded.
"""
from __future__ import annotations

import os
import re
import shutil
import stat
from datetime import datetime, timezone
from pathlib import Path

from ..paths import GRADED_NOTEBOOK
from .nbgrader_course import CourseDir


class SubmissionProblem(Exception):
    """The submission cannot be run at all; the message says why, in plain words."""


PLAIN_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+@ ()-]{0,99}")   # ( ): a browser's "exercises (1).ipynb"
STUDENT_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.@-]{0,63}")
MAX_FILES = 200                 # files and folders in one submission
MAX_FILE_BYTES = 20 * 2**20     # one file of a submission (bytes)
MAX_TOTAL_BYTES = 60 * 2**20    # the whole submission
MAX_DEPTH = 6                   # folder nesting
# What tools leave beside a student's work, ignored by name wherever it lies (in a submission or
# a class folder): never listed, read, copied or counted, whatever it is (a link included), so
# it can neither refuse a submission nor reach the sandbox. Jupyter's autosaved copies
# (.ipynb_checkpoints/, made as soon as a notebook is saved), Python's compiled modules
# (__pycache__/, made when a notebook imports a module of its folder), macOS's Finder file
# (.DS_Store) and its zip tool's resource forks (__MACOSX/), Windows Explorer's Thumbs.db.
TOOL_LITTER = frozenset({".ipynb_checkpoints", "__pycache__", ".DS_Store", "__MACOSX", "Thumbs.db"})
ARCHIVES = (((".zip",), "a zip archive"), ((".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tar.xz"), "a tar archive"),
            ((".7z", ".rar"), "an archive"))


def file_kind(mode: int) -> str:
    """What a file that is not a regular one is, in words ("a symbolic link", "a named pipe", ...)."""
    for test, word in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a named pipe"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device")):
        if test(mode):
            return word
    return "not a regular file"


def read_regular(path: Path, limit: int) -> bytes:
    """The bytes of a regular file, opened without following a link, at most ``limit`` bytes;
    SubmissionProblem saying why for anything else or anything larger."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        raise SubmissionProblem(f"refused: {path.name} cannot be opened as a regular file ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise SubmissionProblem(f"refused: {path.name} is {file_kind(os.fstat(fd).st_mode)}")
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise SubmissionProblem(f"refused: {path.name} is larger than {limit / 2**20:g} MiB")
    return data


def inspect_folder(folder: Path) -> list[tuple[str, int]]:
    """(relative path, bytes) of every regular file of a submission; SubmissionProblem saying
    why when it holds anything else or passes a limit. Follows no link, opens nothing."""
    try:
        top = os.lstat(folder)
    except OSError:
        raise SubmissionProblem("no submission folder") from None
    if not stat.S_ISDIR(top.st_mode):
        raise SubmissionProblem(f"refused: the submission folder is {file_kind(top.st_mode)}, not a folder")
    files, count, total = [], 0, 0
    todo = [(Path(folder), "", 0)]
    while todo:
        path, rel, depth = todo.pop()
        with os.scandir(path) as entries:
            for entry in entries:
                name = entry.name
                if name in TOOL_LITTER:
                    continue
                shown = (rel + "/" + name).lstrip("/")
                if not PLAIN_NAME.fullmatch(name) or name.strip() != name:
                    raise SubmissionProblem(f"refused: the file name {shown!r} is not plain "
                                            "(letters, digits, . _ - + @ ( ) and spaces)")
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
                        raise SubmissionProblem(f"refused: {shown} is {size / 2**20:.1f} MiB "
                                                f"(limit {MAX_FILE_BYTES / 2**20:g} MiB per file)")
                    files.append((shown, size))
                else:
                    raise SubmissionProblem(f"refused: {shown} is {file_kind(mode)}; "
                                            "a submission holds regular files only")
                if count > MAX_FILES or total > MAX_TOTAL_BYTES:
                    raise SubmissionProblem(f"refused: more than {MAX_FILES} files or {MAX_TOTAL_BYTES / 2**20:g} MiB")
    return sorted(files)


def archive_kind(name: str) -> str | None:
    """"a zip archive" (or "a tar archive", "an archive") when the file name says it is one."""
    lower = name.lower()
    return next((kind for suffixes, kind in ARCHIVES if lower.endswith(suffixes)), None)


def notebook_notes(files) -> list[str]:
    """Notes for the row about which notebook of ``files`` (``inspect_folder``'s list) is graded:
    ``exercises.ipynb``, naming the near-duplicates beside it that are not (``exercises (1).ipynb``,
    ``exercises-Copy1.ipynb``, ``Exercises.ipynb``); SubmissionProblem when it is missing, naming
    what it may be (a notebook of another name, an archive) and how to make it the one graded."""
    wanted = f"{GRADED_NOTEBOOK}.ipynb"
    names = [rel for rel, _ in files]
    like = [rel for rel in names if rel != wanted and _looks_like_the_notebook(rel)]
    if wanted in names:
        return [f"graded {wanted}; {_and(like)} beside it {'was' if len(like) == 1 else 'were'} not graded"] \
            if like else []
    notebooks = like + [rel for rel in names if rel not in like and ".ipynb" in rel.rsplit("/", 1)[-1].lower()]
    archives = [rel for rel in names if archive_kind(rel)]
    if notebooks:
        fix = ("rename it to" if "/" not in notebooks[0] else "move it to the top of the folder as") \
            if len(notebooks) == 1 else "rename the one to grade to"
        raise SubmissionProblem(f"missing file {wanted}; found {_and(notebooks)}: {fix} {wanted}")
    if archives:
        raise SubmissionProblem(f"missing file {wanted}; found {archives[0]}, {archive_kind(archives[0])}: "
                                f"unpack it into the student's folder, {wanted} at its top")
    raise SubmissionProblem(f"missing file {wanted}")


def _looks_like_the_notebook(rel: str) -> bool:
    """Whether a file's name is the graded notebook's, give or take its case, a copy's suffix or an
    extension: ``Exercises.ipynb``, ``exercises (1).ipynb``, ``exercises-Copy1.ipynb``, ``exercises.ipynb.txt``."""
    base = rel.rsplit("/", 1)[-1].lower()
    return base.startswith(GRADED_NOTEBOOK) and ".ipynb" in base


def _and(names: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and 2 more``."""
    if len(names) <= 2:
        return " and ".join(names)
    return f"{', '.join(names[:2])} and {len(names) - 2} more"


def copy_files(folder: Path, target: Path, files, uid: int | None = None) -> Path:
    """Copy the listed regular files of ``folder`` into ``target`` (created), owned by ``uid``."""
    target.mkdir(parents=True, exist_ok=True)
    for rel, size in files:
        dest = target / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(read_regular(folder / rel, max(size, 0) + 1))
    if uid is not None:
        for path in [target, *target.rglob("*")]:
            os.chown(path, uid, uid, follow_symlinks=False)
    os.chmod(target, 0o700)
    return target


def read_timestamp(folder: Path) -> tuple[object, str]:
    """(submission time or None, a note when timestamp.txt is present but unusable), from the
    ``timestamp.txt`` in ``submitted/<student>/<lesson>/``: written there by the grader when it
    took the files in, or by ``nbgrader collect`` from the exchange."""
    path = folder / "timestamp.txt"
    if not os.path.lexists(path):
        return None, ""
    from nbgrader.utils import parse_utc

    try:
        return parse_utc(read_regular(path, 200).decode("utf-8").strip()), ""
    except (SubmissionProblem, ValueError, TypeError, OverflowError, UnicodeDecodeError):
        return None, "timestamp.txt is not a date and was ignored"


TIMESTAMP = "timestamp.txt"


def _same_files(src: Path, files, target: Path) -> bool:
    """Whether ``target`` (an earlier copy in submitted/) holds exactly ``files`` of ``src``,
    byte for byte, besides the grader's timestamp.txt."""
    try:
        had = [(rel, size) for rel, size in inspect_folder(target) if rel != TIMESTAMP]
    except SubmissionProblem:
        return False
    return had == list(files) and all(
        read_regular(src / rel, size + 1) == read_regular(target / rel, size + 1) for rel, size in files)


def class_rows(submissions: Path) -> list[tuple[str, Path]]:
    """(the name of its row, entry) for each entry of a class folder that intake takes, in the
    order of those names (the order shards are cut in): a plain student id as it is, any other
    name escaped as Python writes it (``'Jane Doe'`` -> ``Jane Doe``, a control character as ``\\x07``)."""
    entries = [p for p in Path(submissions).iterdir() if not p.name.startswith(".") and p.name not in TOOL_LITTER]
    return sorted((repr(p.name)[1:-1], p) for p in entries)


def import_submissions(course: CourseDir, lesson: str, submissions: Path, entries: list[tuple[str, Path]] | None = None
                       ) -> tuple[dict[str, str], dict[str, list[str]], list[str]]:
    """Copy ``DIR/<student>/...`` (or ``DIR/<student>/<lesson>/...``) into submitted/ after
    inspecting it, with a ``timestamp.txt`` of the grader's: now, or the time of the earlier
    copy when the files have not changed since (a student's own timestamp.txt is not copied).
    Returns ({student: reason} for every folder refused (nothing of it is copied, and an
    earlier copy of that student's lesson is removed so it is not graded as new),
    {student: [notes]} for the students whose timestamp.txt was ignored, [the students copied]).
    A file at the top of the class folder (a notebook uploaded without its folder) is one refused
    entry, named by the file, and the class is graded. SubmissionProblem when ``submissions`` is
    not a folder of student folders (a notebook, or one student's folder: ``folder_problem``).
    ``entries``: those of ``class_rows`` to take in (default: all; a shard takes in only its own,
    so shards running at once never write the same folder of submitted/)."""
    refused, notes, taken = {}, {}, []
    folder_problem(submissions)
    for row, student_dir in class_rows(submissions) if entries is None else entries:
        name = student_dir.name
        top = os.lstat(student_dir)
        if not stat.S_ISDIR(top.st_mode):  # a stray file: its own refused row, the class goes on
            refused[row] = _stray_entry(name, top.st_mode)
            if STUDENT_NAME.fullmatch(name):
                _remove(course, name, lesson)
            continue
        if not STUDENT_NAME.fullmatch(name):
            refused[row] = odd_folder_name(name)
            continue
        src = student_dir / lesson if os.path.lexists(student_dir / lesson) else student_dir
        target = course.root / "submitted" / name / lesson
        try:
            files = inspect_folder(src)
            own = [f for f in files if f[0] == TIMESTAMP or f[0].startswith(TIMESTAMP + "/")]
            files = [f for f in files if f not in own]
            stamp = None
            if os.path.lexists(target) and _same_files(src, files, target):
                stamp, _ = read_timestamp(target)
            _remove(course, name, lesson)
            copy_files(src, target, files)
            when = stamp or datetime.now(timezone.utc).replace(tzinfo=None)   # UTC, as parse_utc gives
            (target / TIMESTAMP).write_text(when.strftime("%Y-%m-%d %H:%M:%S.%f UTC"))  # nbgrader's format
            if own:
                claimed = read_timestamp(src)[0] if any(rel == TIMESTAMP for rel, _ in own) else None
                notes[name] = [f"the submission's own timestamp.txt ({claimed:%Y-%m-%d %H:%M}) was ignored: the "
                               "submission time is when the grader took it in" if claimed else
                               "timestamp.txt is not a date and was ignored"]
            taken.append(name)
        except SubmissionProblem as exc:
            _remove(course, name, lesson)
            refused[name] = str(exc)
    return refused, notes, taken


def odd_folder_name(name: str) -> str:
    """Why a student folder named ``name`` is refused, with the ids it could be renamed to."""
    ids = suggested_ids(name)
    return ("refused: the folder name is not a plain student id (letters, digits, . _ - @)"
            + (f": rename the folder to {' or '.join(ids)}" if ids else ""))


def suggested_ids(name: str) -> list[str]:
    """Plain student ids made of ``name``'s words (accents dropped, lower case), joined by _ and
    by .: ``Jane Doe`` -> [jane_doe, jane.doe]; none when nothing plain is left."""
    import unicodedata

    words = re.findall(r"[a-z0-9]+", unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode().lower())
    ids = dict.fromkeys(sep.join(words) for sep in ("_", "."))
    return [i for i in ids if STUDENT_NAME.fullmatch(i)]


def _stray_entry(name: str, mode: int) -> str:
    """Why a file at the top of a class folder is refused, and where it belongs."""
    shown = repr(name)[1:-1]
    if not stat.S_ISREG(mode):
        return f"refused: the student's entry is {file_kind(mode)}, not a folder"
    if archive_kind(name):
        stem = _archive_stem(name)
        where = (f"unpack it into {stem}/, as {stem}/{GRADED_NOTEBOOK}.ipynb" if STUDENT_NAME.fullmatch(stem)
                 else f"unpack it into its student's folder, <student>/{GRADED_NOTEBOOK}.ipynb")
        return f"refused: {shown} is {archive_kind(name)} at the top of the class folder: {where}"
    if name.endswith(".ipynb"):
        stem = name[:-len(".ipynb")]
        where = (f"put it in {stem}/ as {stem}/{GRADED_NOTEBOOK}.ipynb"
                 if stem != GRADED_NOTEBOOK and STUDENT_NAME.fullmatch(stem)
                 else f"put it in its student's folder, <student>/{GRADED_NOTEBOOK}.ipynb")
        return f"refused: {shown} is a notebook at the top of the class folder, not in a student folder: {where}"
    return f"refused: {shown} is a file at the top of the class folder, not a student's folder"


def _archive_stem(name: str) -> str:
    """An archive's name without its archive suffix: ``jane.tar.gz`` -> ``jane``."""
    lower = name.lower()
    suffix = max((s for suffixes, _ in ARCHIVES for s in suffixes if lower.endswith(s)), key=len)
    return name[:-len(suffix)]


def _holds_notebooks(folder: Path) -> bool:
    """Whether ``folder`` (a real folder, not a link) holds a notebook, itself or one level down
    (a student's folder: DIR/<student>/exercises.ipynb or DIR/<student>/<lesson>/exercises.ipynb)."""
    return folder.is_dir() and not folder.is_symlink() and (
        any(folder.glob("*.ipynb")) or any(folder.glob("*/*.ipynb")))


def folder_problem(submissions: Path) -> None:
    """SubmissionProblem, in plain words, when ``submissions`` is not a folder of student
    folders: missing, a file (a lone notebook), or one student's folder (notebooks directly
    inside it and no folder that holds one). A class folder with a stray notebook at its top
    is a class: that file is refused on its own (``import_submissions``)."""
    path = Path(submissions)
    if not path.exists():
        raise SubmissionProblem(f"--submissions {path}: no such folder (it should hold one folder per student, "
                                "each with exercises.ipynb)")
    if not path.is_dir():
        what = f"{archive_kind(path.name)}: unpack it and give" if archive_kind(path.name) else \
            "a file, not a folder: give"
        raise SubmissionProblem(f"--submissions {path} is {what} the folder that holds one "
                                "folder per student (DIR/<student>/exercises.ipynb)")
    entries = [p for p in path.iterdir() if not p.name.startswith(".") and p.name not in TOOL_LITTER]
    notebooks = sorted(p.name for p in entries if p.name.endswith(".ipynb") and not p.is_dir())
    if notebooks and not any(_holds_notebooks(p) for p in entries):
        raise SubmissionProblem(f"--submissions {path} holds {notebooks[0]} itself, as one student's folder does, "
                                "and no student folders: give the folder above it, with one folder per student "
                                "(DIR/<student>/exercises.ipynb)")


def _remove(course: CourseDir, student: str, lesson: str) -> None:
    target = course.root / "submitted" / student / lesson
    if os.path.lexists(target):
        if os.path.islink(target) or not target.is_dir():
            target.unlink()
        else:
            shutil.rmtree(target)
