"""Step 0 of grading: an nbgrader course directory and the nbgrader commands run on it.

nbgrader runs on a course directory (its release and autograde converters in this process,
other commands as ``nbgrader`` subprocesses), either the real one (the repository root, as
configured in ``nbgrader_config.py``) or a scratch one (``round_trip``, for ``course build``).
nbgrader generates the student version (once, as the grader's trusted copy under ``build/``,
which ``release`` copies into ``release/`` for students), scores and keeps the gradebook; it
never judges a test cell (the trusted checker does, ``execute``). ``autograde`` remains for the
benchmark that compares the course's grader with plain nbgrader.
"""
from __future__ import annotations

import io
import logging
import os
import re
import shutil
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from nbgrader.api import Gradebook, MissingEntry

from ..paths import BUILD, GRADED_NOTEBOOK


class GradingError(RuntimeError):
    """nbgrader itself failed (not a student's notebook)."""


@dataclass
class CourseDir:
    """An nbgrader course directory: ``root`` holds source/, release/, submitted/, ...;
    ``gradebook`` is the gradebook file nbgrader writes (``root/gradebook.db`` unless set: the
    merge writes a copy, then renames it in place)."""

    root: Path
    source: Path
    gradebook: Path | None = None

    @property
    def db_url(self) -> str:
        return f"sqlite:///{self.gradebook or self.root / 'gradebook.db'}"

    def settings(self) -> dict:
        """The ``CourseDirectory`` settings nbgrader gets for this course, in or out of process.
        A course without a gradebook gets a copy of an empty one first (``empty_gradebook``)."""
        if not (self.root / "gradebook.db").exists():
            self.root.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(empty_gradebook(), self.root / "gradebook.db")
        source = self.source.relative_to(self.root) if self.source.is_relative_to(self.root) else self.source
        return {"root": str(self.root), "source_directory": str(source),
                "notebook_id": GRADED_NOTEBOOK, "db_url": self.db_url}

    def nbgrader(self, *args: str, timeout: int = 300, cell_timeout: int = 120) -> subprocess.CompletedProcess:
        """Run ``nbgrader ARGS`` on this course directory; return the finished process."""
        cmd = [sys.executable, "-m", "nbgrader", *args,
               *(f"--CourseDirectory.{key}={value}" for key, value in self.settings().items()),
               f"--Execute.timeout={cell_timeout}"]  # Execute goes on after errors (not configurable)
        try:
            return subprocess.run(cmd, cwd=self.root, capture_output=True, text=True,
                                  timeout=timeout, env=_nbgrader_env())
        except subprocess.TimeoutExpired as exc:
            raise GradingError(f"nbgrader {args[0]} took longer than {timeout} s") from exc



def _nbgrader_env() -> dict:
    env = dict(os.environ)  # nbgrader calls `alembic`, which lives beside this Python
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


def empty_gradebook() -> Path:
    """An empty nbgrader gradebook (its tables and alembic version), made once per nbgrader
    version under build/cache/ and copied into each new course: making one asks ``alembic
    heads`` in a subprocess, about 5 s of CPU on this course's 2-core machine, which every
    scratch course of a build or a test run paid again."""
    import nbgrader

    template = BUILD / "cache" / f"empty-gradebook-nbgrader-{nbgrader.__version__}.db"
    if not template.exists():
        template.parent.mkdir(parents=True, exist_ok=True)
        tmp = template.with_name(f"{template.name}.{os.getpid()}.{os.urandom(3).hex()}.tmp")
        subprocess.run([sys.executable, "-c", "import sys; from nbgrader.api import Gradebook; "
                        "Gradebook('sqlite:///' + sys.argv[1]).close()", str(tmp)],
                       check=True, capture_output=True, env=_nbgrader_env(), timeout=300)
        tmp.replace(template)   # atomic: parallel builds may make it at the same moment
    return template


class ReleaseKept(GradingError):
    """``release/LESSON/exercises.ipynb`` holds someone's work: it was kept, nothing written."""


def kept_folder(root: Path, lesson: str) -> Path:
    """Where ``release --force`` keeps the work it replaced: ``build/kept/<lesson>/``, outside
    ``release/`` (``nbgrader release_assignment`` sends every file of ``release/<lesson>/`` to
    every student, who would submit it back)."""
    return root / "build" / "kept" / lesson


def release(course: CourseDir, lesson: str, force: bool = False, on_kept=None) -> Path:
    """Generate the student version of ``lesson`` (solutions and hidden tests removed) into
    ``release/LESSON/``, never over a student's work: an ``exercises.ipynb`` already there is
    replaced only when its cells are those of a student version this course generated (the
    last one recorded, or the one it would generate now; outputs aside), else ``ReleaseKept``
    is raised and the file is untouched. With ``force`` the new version is written and the old
    file moved to ``build/kept/LESSON/exercises.yours-YYYYmmdd-HHMMSS.ipynb`` (``kept_folder``),
    as is any ``exercises.yours-*.ipynb`` an earlier release left in ``release/LESSON/``: that
    folder then holds only what nbgrader generates. ``on_kept(old, new)`` is told of each move.

    The version is generated once, as the grader's trusted copy (``student_version``), and
    copied from there into ``release/``: students work in that copy, the grader never reads it."""
    folder = course.root / "release" / lesson
    target = folder / f"{GRADED_NOTEBOOK}.ipynb"
    replaced = os.path.lexists(target) and not _generated_here(course, lesson, target)
    if replaced and not force:
        shown = target.relative_to(course.root) if target.is_relative_to(course.root) else target
        raise ReleaseKept(f"{shown} differs from the student version (someone's answers?) and was kept; "
                          f"`course release {lesson[:2]} --force` writes the new version and moves this one "
                          f"to build/kept/{lesson}/{GRADED_NOTEBOOK}.yours-<date>-<time>.ipynb")
    old_work = sorted(folder.glob(f"{GRADED_NOTEBOOK}.yours-*.ipynb")) + ([target] if replaced else [])
    for old in old_work:
        new = _keep_aside(old, kept_folder(course.root, lesson))
        if on_kept:
            on_kept(old, new)
    key = _source_key(course, lesson)
    with _generation_folder(course) as work:
        generated = _generate(course, lesson, work)
        _keep_trusted(course, lesson, generated, key)
        shutil.copytree(generated, folder, dirs_exist_ok=True)
    record_release(course.root, lesson, target)
    return folder


def _keep_aside(old: Path, kept: Path) -> Path:
    """Move ``old`` into the folder ``kept`` (made), under a name no file there has: its own
    when it is already an ``exercises.yours-<date>-<time>.ipynb``, else that name with the time now."""
    import time

    kept.mkdir(parents=True, exist_ok=True)
    name = old.name if old.name.startswith(f"{GRADED_NOTEBOOK}.yours-") else \
        f"{GRADED_NOTEBOOK}.yours-{time.strftime('%Y%m%d-%H%M%S')}.ipynb"
    new = kept / name
    while os.path.lexists(new):
        new = new.with_name(new.name.replace(".ipynb", "-1.ipynb"))
    shutil.move(old, new)   # os.replace, or a copy where build/ is on another file system
    return new


def trusted_paths(root: Path, lesson: str) -> tuple[Path, Path]:
    """(the grader's student version of ``lesson``, its record: the key of what it was generated
    from and the SHA-256 of its bytes), both under ``build/grading/<lesson>/``, where nobody works."""
    folder = root / "build" / "grading" / lesson
    return folder / "student.ipynb", folder / "student.json"


def _source_key(course: CourseDir, lesson: str) -> str:
    """A hash of what the student version is generated from: the lesson's source notebook, the
    course's ``nbgrader_config.py`` (its stubs), nbgrader's version and this module."""
    import hashlib

    import nbgrader

    digest = hashlib.sha256(nbgrader.__version__.encode())
    for part in (course.source / lesson / f"{GRADED_NOTEBOOK}.ipynb", course.root / "nbgrader_config.py",
                 Path(__file__)):
        digest.update(b"\0" + (part.read_bytes() if part.is_file() else b"-"))
    return digest.hexdigest()


def _generation_folder(course: CourseDir):
    """A fresh folder under ``build/grading/`` that nbgrader releases into (removed after use)."""
    import tempfile

    base = course.root / "build" / "grading"
    base.mkdir(parents=True, exist_ok=True)
    return tempfile.TemporaryDirectory(prefix=".student-", dir=base)


def _generate(course: CourseDir, lesson: str, work: str) -> Path:
    """nbgrader's student version of ``lesson``, generated from the source into ``work/<lesson>/``
    (returned), and the lesson's cells recorded in the course's gradebook.

    nbgrader's own converter runs in this process, configured as ``nbgrader generate_assignment
    LESSON --force`` would be in the course directory (its ``nbgrader_config.py``, then the
    course's folders): the subprocess spent 2.7 CPU-s importing nbgrader for 0.3 CPU-s of work
    on the course's 2-core machine, and a test run releases a lesson some twenty times."""
    from nbgrader.converters import GenerateAssignment

    config = _course_config(course)
    config.CourseDirectory.release_directory = str(work)
    ok, log = _convert(GenerateAssignment, "generate_assignment", course, lesson, config)
    generated = Path(work) / lesson
    if not ok or not (generated / f"{GRADED_NOTEBOOK}.ipynb").is_file():
        raise GradingError(f"nbgrader generate_assignment {lesson} failed on {course.source / lesson}: {_why(log)}")
    return generated


def _why(log: str) -> str:
    """The line of an nbgrader log that says what went wrong: the last exception's, else the first error."""
    lines = log.splitlines()
    exceptions = [line for line in lines if re.match(r"[A-Za-z_][\w.]*(Error|Exception)\b.*: ", line)]
    errors = [line for line in lines if line.startswith(("[ERROR]", "[CRITICAL]"))]
    return (exceptions[-1:] or errors[:1] or ["nothing in its log"])[0][:300]


def _keep_trusted(course: CourseDir, lesson: str, generated: Path, key: str) -> None:
    """The generated notebook as the grader's student version, with its record (each file
    replaced in one rename: a grader reading meanwhile finds them disagree and generates its own)."""
    import hashlib
    import json

    notebook, record = trusted_paths(course.root, lesson)
    notebook.parent.mkdir(parents=True, exist_ok=True)
    data = (generated / f"{GRADED_NOTEBOOK}.ipynb").read_bytes()
    entry = json.dumps({"key": key, "sha256": hashlib.sha256(data).hexdigest()}).encode()
    for path, content in ((notebook, data), (record, entry)):
        tmp = path.with_name(f".{path.name}.{os.getpid()}-{os.urandom(3).hex()}.tmp")
        tmp.write_bytes(content)
        tmp.replace(path)


def _read_trusted(course: CourseDir, lesson: str, key: str):
    """The grader's student version of ``lesson`` as a notebook, or None when it is missing, was
    generated from something else than the source now (``key``) or changed since (its SHA-256)."""
    import hashlib
    import json

    import nbformat

    notebook, record = trusted_paths(course.root, lesson)
    try:
        saved = json.loads(record.read_text())
        data = notebook.read_bytes()
        if not isinstance(saved, dict) or saved.get("key") != key or \
                saved.get("sha256") != hashlib.sha256(data).hexdigest():
            return None
        return nbformat.reads(data.decode("utf-8"), as_version=4)
    except (OSError, ValueError, UnicodeDecodeError):
        return None


def student_version(course: CourseDir, lesson: str):
    """The student version of ``lesson`` that the grader trusts (cells are restored from it):
    ``build/grading/<lesson>/student.ipynb``, used only while its record says it was generated
    from the source as it is now (and the nbgrader configuration) and its bytes are the ones
    generated; otherwise generated again from the source, never taken from ``release/`` (where
    students work). Also makes sure the gradebook knows the lesson (the generation records it).
    ``GradingError`` (one line) when it cannot be generated or verified."""
    key = _source_key(course, lesson)
    nb = _read_trusted(course, lesson, key)
    if nb is None or not _gradebook_knows(course, lesson):
        with _generation_folder(course) as work:
            _keep_trusted(course, lesson, _generate(course, lesson, work), key)
        nb = _read_trusted(course, lesson, key)
    if nb is None:
        raise GradingError(f"the grader's student version of {lesson} ({trusted_paths(course.root, lesson)[0]}) "
                           "cannot be verified against the lesson's source; nothing was graded")
    return nb


def _gradebook_knows(course: CourseDir, lesson: str) -> bool:
    course.settings()  # a course without a gradebook gets an empty one first
    try:
        with Gradebook(course.db_url) as gb:
            gb.find_assignment(lesson)
        return True
    except MissingEntry:
        return False


def _released_record(root: Path, lesson: str) -> Path:
    return root / "build" / "grading" / "released" / f"{lesson}.cells"


def cells_fingerprint(path: Path) -> str | None:
    """A hash of a notebook's cells (type and source, in order; outputs and metadata aside),
    or None when it cannot be read as a notebook."""
    import hashlib
    import json

    try:
        data = json.loads(Path(path).read_bytes().decode("utf-8"))
        cells = [[c["cell_type"], "".join(c["source"]) if isinstance(c["source"], list) else c["source"]]
                 for c in data["cells"]]
    except (OSError, ValueError, UnicodeDecodeError, KeyError, TypeError, RecursionError):
        return None
    return hashlib.sha256(json.dumps(cells).encode()).hexdigest()


def record_release(root: Path, lesson: str, notebook: Path) -> None:
    """Remember the cells of the student version just written to ``root/release/lesson`` (so a
    later release knows whether the file there is still that version or someone's work)."""
    fingerprint = cells_fingerprint(notebook)
    if fingerprint:
        record = _released_record(root, lesson)
        record.parent.mkdir(parents=True, exist_ok=True)
        record.write_text(fingerprint + "\n")


def _generated_here(course: CourseDir, lesson: str, target: Path) -> bool:
    """Whether ``target`` holds the cells of a student version: the one recorded at the last
    release, or the one the source gives now (the grader's, ``student_version``)."""
    have = cells_fingerprint(target)
    if have is None or os.path.islink(target):
        return False
    record = _released_record(course.root, lesson)
    if record.is_file() and record.read_text().strip() == have:
        return True
    student_version(course, lesson)
    return cells_fingerprint(trusted_paths(course.root, lesson)[0]) == have


_NBGRADER_LOCK = threading.Lock()
_LOG = logging.getLogger("course.nbgrader")  # in-process nbgrader logs here, into its error text only
_LOG.propagate = False
_LOG.setLevel(logging.INFO)


def _convert(converter_class, command: str, course: CourseDir, lesson: str, config,
             student: str | None = None) -> tuple[bool, str]:
    """Run one of nbgrader's converters on ``lesson`` in this process, as ``nbgrader COMMAND
    LESSON --force`` would in the course directory; return (whether it succeeded, its log,
    with levels as the command prints them). A converter that cannot even start (a missing
    folder, a bad setting) raises ``GradingError``."""
    from nbgrader.converters import NbGraderException
    from nbgrader.coursedir import CourseDirectory

    coursedir = CourseDirectory(config=config)
    coursedir.assignment_id = lesson
    if student:
        coursedir.student_id = student
    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    handler.setFormatter(logging.Formatter("[%(levelname)s] %(message)s"))
    with _NBGRADER_LOCK:  # the converter changes the working directory while it runs
        _LOG.handlers = [handler]
        try:
            converter = converter_class(coursedir=coursedir, config=config, log=_LOG)
            converter.force = True
            converter.start()
            ok = True
        except NbGraderException:
            ok = False
        except (OSError, ValueError) as exc:
            raise GradingError(f"nbgrader {command} {lesson} failed: {exc}\n{buffer.getvalue()[-2000:]}") from None
        finally:
            _LOG.handlers = []
    return ok, buffer.getvalue()


def _course_config(course: CourseDir):
    """The traitlets config ``nbgrader`` would use in ``course.root``: its ``nbgrader_config.py``
    if it has one, then the settings ``CourseDir.nbgrader`` passes on the command line."""
    from traitlets.config import Config
    from traitlets.config.loader import PyFileConfigLoader

    config = Config()
    if (course.root / "nbgrader_config.py").exists():
        config.merge(PyFileConfigLoader("nbgrader_config.py", path=str(course.root)).load_config())
    for key, value in course.settings().items():
        config.CourseDirectory[key] = value
    return config


def autograde(course: CourseDir, lesson: str, student: str | None = None,
              cell_timeout: int = 120) -> subprocess.CompletedProcess:
    """Autograde the submissions of ``lesson`` (all students, or one) with nbgrader's own
    ``Autograde`` converter in this process, configured as ``nbgrader autograde LESSON --force``
    would be in the course directory (see ``_generate``: the subprocess spent 2.7 CPU-s importing
    nbgrader, once per lesson of every build). Returns what the command would have: exit status
    1 when a notebook failed to autograde, and nbgrader's log as ``stderr``."""
    from nbgrader.converters import Autograde

    config = _course_config(course)
    config.Execute.timeout = cell_timeout   # Execute goes on after errors (not configurable)
    # the kernels' stderr is this process's now: keep their start-up warnings (unencrypted TCP)
    # off the console, as `course build` does for the lectures; errors still show
    config.Execute.extra_arguments = ["--IPKernelApp.log_level=ERROR"]
    ok, log = _convert(Autograde, "autograde", course, lesson, config, student)
    return subprocess.CompletedProcess(["nbgrader", "autograde", lesson, "--force"], 0 if ok else 1, "", log)


def score(course: CourseDir, lesson: str, student: str) -> tuple[float, float]:
    """(score, max_score) of one student's submission, from the course's gradebook."""
    with Gradebook(course.db_url) as gb:
        try:
            sub = gb.find_submission(lesson, student)
        except MissingEntry:
            return 0.0, float(gb.find_assignment(lesson).max_score)
        return float(sub.score), float(sub.max_score)
