"""Releasing and autograding lessons with nbgrader.

Each lesson folder ``notebooks/NN_name`` is one nbgrader assignment whose graded
notebook is ``exercises.ipynb``. nbgrader runs as a subprocess on a course
directory, either the real one (the repository root, as configured in
``nbgrader_config.py``) or a scratch one that the build uses for its round trip:
release the blank, then autograde the reference solution and the blank and
read their scores from the scratch gradebook. The real gradebook is never touched
by a build.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = REPO / "notebooks"
GRADED_NOTEBOOK = "exercises"


class GradingError(RuntimeError):
    """nbgrader itself failed (not a student's notebook)."""


@dataclass
class CourseDir:
    """An nbgrader course directory: ``root`` holds source/, release/, submitted/, ..."""

    root: Path
    source: Path

    @property
    def db_url(self) -> str:
        return f"sqlite:///{self.root / 'gradebook.db'}"

    def nbgrader(self, *args: str, timeout: int = 300, cell_timeout: int = 120) -> subprocess.CompletedProcess:
        """Run ``nbgrader ARGS`` on this course directory; return the finished process."""
        cmd = [sys.executable, "-m", "nbgrader", *args,
               f"--CourseDirectory.root={self.root}",
               f"--CourseDirectory.source_directory={self.source.relative_to(self.root) if self.source.is_relative_to(self.root) else self.source}",
               f"--CourseDirectory.notebook_id={GRADED_NOTEBOOK}",
               f"--CourseDirectory.db_url={self.db_url}",
               f"--Execute.timeout={cell_timeout}",
               "--Execute.allow_errors=True"]
        env = dict(os.environ)  # nbgrader calls `alembic`, which lives beside this Python
        env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
        try:
            return subprocess.run(cmd, cwd=self.root, capture_output=True, text=True,
                                  timeout=timeout, env=env)
        except subprocess.TimeoutExpired as exc:
            raise GradingError(f"nbgrader {args[0]} took longer than {timeout} s") from exc


def lesson_dirs(ids: str | None = None) -> list[Path]:
    """Lesson folders, in order; ``ids`` is a comma list of numbers ('00,01') or folder names."""
    every = sorted(p for p in NOTEBOOKS.iterdir() if p.is_dir() and p.name[:2].isdigit())
    if not ids:
        return every
    chosen = []
    for want in (w.strip() for w in ids.split(",") if w.strip()):
        match = [p for p in every if p.name == want or p.name.split("_")[0] == want.zfill(2)]
        if not match:
            names = ", ".join(p.name for p in every)
            raise SystemExit(f"course: no lesson '{want}'. Lessons: {names}")
        chosen.extend(m for m in match if m not in chosen)
    return chosen


def release(course: CourseDir, lesson: str) -> Path:
    """Generate the student version of ``lesson`` (solutions and hidden tests removed)."""
    done = course.nbgrader("generate_assignment", lesson, "--force")
    if done.returncode != 0:
        raise GradingError(f"nbgrader generate_assignment {lesson} failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return course.root / "release" / lesson


def autograde(course: CourseDir, lesson: str, student: str | None = None) -> subprocess.CompletedProcess:
    """Autograde the submissions of ``lesson`` (all students, or one)."""
    args = ["autograde", lesson, "--force"]
    if student:
        args.append(f"--student={student}")
    return course.nbgrader(*args, timeout=900)


def score(course: CourseDir, lesson: str, student: str) -> tuple[float, float]:
    """(score, max_score) of one student's submission, from the course's gradebook."""
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(course.db_url) as gb:
        try:
            sub = gb.find_submission(lesson, student)
        except MissingEntry:
            return 0.0, float(gb.find_assignment(lesson).max_score)
        return float(sub.score), float(sub.max_score)


def round_trip(lesson_dir: Path, workdir: Path) -> dict:
    """Release ``lesson_dir`` in a scratch course, autograde its reference solution and its
    blank release; return the scores and where the released and graded notebooks are."""
    lesson = lesson_dir.name
    if workdir.exists():
        shutil.rmtree(workdir)
    source = workdir / "source"
    shutil.copytree(lesson_dir, source / lesson, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    course = CourseDir(workdir, source)
    released = release(course, lesson)
    for student, folder in (("reference", source / lesson), ("blank", released)):
        target = workdir / "submitted" / student / lesson
        target.mkdir(parents=True)
        shutil.copy2(folder / f"{GRADED_NOTEBOOK}.ipynb", target)
    done = autograde(course, lesson)
    if done.returncode != 0 and "error" in done.stdout.lower() + done.stderr.lower() and not (
            workdir / "autograded" / "reference").exists():
        raise GradingError(f"nbgrader autograde {lesson} failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    ref, max_score = score(course, lesson, "reference")
    blank, _ = score(course, lesson, "blank")
    return {
        "max_score": max_score,
        "reference_score": ref,
        "blank_score": blank,
        "release": released,
        "graded_reference": workdir / "autograded" / "reference" / lesson / f"{GRADED_NOTEBOOK}.ipynb",
        "log": done.stdout[-4000:] + done.stderr[-4000:],
    }


# ---------------------------------------------------------------------------------------
# Sandboxed grading of real submissions: `course grade LESSON`.
#
# Every submission runs in its own kernel inside bubblewrap (course_lib.sandbox). The
# grader outside drives the kernel cell by cell, restores the test cells from the source
# notebook, judges each test cell by the kernel's execute_reply status (not by what the
# cell displayed), and checks before each test cell that the kernel still reports failures
# (a "canary" copy of the test that must fail). The executed notebook is then scored by
# nbgrader's own autograde with execution switched off, so the gradebook, manual grades,
# feedback and export stay nbgrader's.
# ---------------------------------------------------------------------------------------

import json as _json
import re
import secrets
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from .sandbox import Limits, SandboxKernel, SandboxUnavailable, bubblewrap, sandbox_uid, why_no_sandbox

STAGING = Path("build") / "sandboxed"     # executed notebooks that nbgrader scores
CHECK_NAMES = ("CheckFailed", "check_close", "check_equal", "check_in", "check_true", "check_raises")
SIGNALS = {6: "aborted (SIGABRT)", 7: "bus error (SIGBUS)", 9: "killed (SIGKILL, often the memory limit)",
           11: "segmentation fault (SIGSEGV)", 24: "CPU time limit reached (SIGXCPU)",
           25: "file size limit reached (SIGXFSZ)"}


class SubmissionProblem(Exception):
    """The submission cannot be run at all; the message says why, in plain words."""


@dataclass
class Outcome:
    """One student's result: score and the reasons a grader or student should read."""

    student: str
    score: float = 0.0
    max_score: float = 0.0
    reasons: list = None
    seconds: float = 0.0

    def __post_init__(self):
        self.reasons = list(self.reasons or [])

    @property
    def reason(self) -> str:
        return "; ".join(self.reasons) if self.reasons else "graded normally"


def _nb_meta(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {}) or {}


def is_test_cell(cell) -> bool:
    meta = _nb_meta(cell)
    return cell.get("cell_type") == "code" and bool(meta.get("grade")) and not meta.get("solution")


def read_submission(path: Path):
    """The student's notebook as an nbformat node; SubmissionProblem if it is not one."""
    import nbformat

    if not path.exists():
        raise SubmissionProblem(f"missing file {path.name}")
    raw = path.read_bytes()
    try:
        data = _json.loads(raw.decode("utf-8"))
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
    import copy

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


def _checks_source() -> str:
    """course_lib/checks.py as the body of a function (so its helpers stay private)."""
    text = (Path(__file__).parent / "checks.py").read_text()
    lines = [ln for ln in text.splitlines() if not ln.startswith("from __future__")]
    return "\n".join("    " + ln if ln.strip() else "" for ln in lines)


def guarded_test(source: str, token: str, canary: bool) -> str:
    """A test cell's code as the grader runs it: the check helpers are defined afresh inside
    the cell from course_lib/checks.py (so nothing the student rebound or patched in
    ``course_lib.checks`` is used), then the test runs. The canary variant is the same text
    with the switch set, making every check and a final ``assert`` fail: if the kernel then
    reports success, the student's code has tampered with how errors are reported."""
    names = ", ".join(CHECK_NAMES)
    switch = 1 if canary else 0
    return (f"def _course_checks_{token}(_canary):\n{_checks_source()}\n"
            f"    if _canary:\n"
            f"        def _ok(name):\n"
            f"            raise CheckFailed(name + ': integrity check')\n"
            f"    return {names}\n"
            f"_course_mode_{token} = {switch}\n"
            f"{names} = _course_checks_{token}(_course_mode_{token})\n"
            f"{source}\n"
            f"assert _course_mode_{token} == 0, 'integrity check'\n")


RESET_MACHINERY = """\
import sys as _course_sys
_course_ip = get_ipython()
_course_ip.ast_transformers.clear()
_course_sys.excepthook = _course_sys.__excepthook__
del _course_sys, _course_ip
"""


# Identity of the functions and classes that tests rely on, printed by the kernel before any
# student code and again before each test cell; the grader compares the two texts outside.
# A curated list: libraries rebind some of their own names lazily (importing torch._dynamo,
# which the first optimizer step does, wraps torch.manual_seed), so not every callable counts.
FINGERPRINT = """\
def _course_fingerprint():
    import builtins, sys
    every = None
    compare = ["__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__bool__", "__float__",
               "__int__", "__abs__", "__sub__", "all", "any", "item", "tolist", "allclose", "equal", "eq"]
    wanted = {
        "builtins": every, "math": every, "operator": every, "numbers": every, "statistics": every,
        "time": ["perf_counter", "perf_counter_ns", "monotonic", "sleep", "time"],
        "unittest.mock": ["patch", "Mock", "MagicMock"],
        "numpy": ["allclose", "isclose", "array_equal", "array_equiv", "all", "any", "abs", "asarray", "array"],
        "numpy.testing": ["assert_allclose", "assert_array_equal", "assert_equal", "assert_array_almost_equal"],
        "torch": ["allclose", "isclose", "equal", "eq", "is_tensor", "tensor", "as_tensor", "abs"],
        "torch.testing": ["assert_close"],
    }
    classes = {"numpy": "ndarray", "torch": "Tensor"}
    lines = []
    for name, keys in wanted.items():
        try:
            module = __import__(name, fromlist=["_"])
        except Exception:
            continue
        lines.append(f"module {name} {id(sys.modules.get(name))}")
        table = vars(module)
        for key in (k for k, v in list(table.items()) if callable(v)) if keys is None else keys:
            lines.append(f"{name}.{key} {id(table.get(key))}")
        if name in classes:
            cls = table.get(classes[name])
            lines.append(f"{name}.{classes[name]} {id(cls)}")
            for key in compare:
                lines.append(f"{name}.{classes[name]}.{key} {id(vars(cls).get(key)) if cls else 0}")
    return "\\n".join(lines)
print(_course_fingerprint())
del _course_fingerprint
"""


def fingerprint_changes(before: str, after: str) -> list[str]:
    """Names whose object changed or vanished between two FINGERPRINT outputs."""
    now = dict(line.rsplit(" ", 1) for line in after.splitlines() if " " in line)
    return [name for name, ident in (ln.rsplit(" ", 1) for ln in before.splitlines() if " " in ln)
            if now.get(name) != ident and name not in VOLATILE]


# rebound by ipykernel itself on every request (stdin forwarding)
VOLATILE = {"builtins.input", "builtins.raw_input", "builtins.getpass", "getpass.getpass"}


def _stdout(run) -> str:
    return "".join(o.get("text", "") for o in run.outputs if o.get("name") == "stdout")


def _error_output(ename: str, evalue: str) -> dict:
    return {"output_type": "error", "ename": ename, "evalue": evalue, "traceback": [f"{ename}: {evalue}"]}


def _describe_failure(run, number: int, limits: Limits) -> str | None:
    """A plain-words note for a cell that did not end normally (None for ordinary errors)."""
    where = f"cell {number}"
    if run.status == "timeout":
        return f"timed out in {where} (limit {limits.cell_seconds:g} s per cell)"
    if run.status == "died":
        code = run.exit_code
        sig = -code if code is not None and code < 0 else (code - 128 if code and code > 128 else None)
        if sig in SIGNALS:
            return f"kernel crashed in {where}: {SIGNALS[sig]}"
        return f"kernel exited in {where} (exit code {code}: the code ended the kernel's process, e.g. os._exit)"
    if run.ename == "MemoryError":
        return f"memory limit reached in {where} (MemoryError; limit {limits.memory_bytes / 2**30:g} GiB)"
    text = f"{run.ename}: {run.evalue}"
    if "Network is unreachable" in text or "Temporary failure in name resolution" in text or "Name or service not known" in text:
        return f"network access is blocked while grading ({where}: {text[:120]})"
    if "Read-only file system" in text or "Permission denied" in text:
        return f"{where} tried to write or read outside its own folder, which is not allowed ({text[:120]})"
    if run.ename in ("FileNotFoundError", "PermissionError", "IsADirectoryError") and re.search(
            r"'/(?!submission)[^']*'", run.evalue):
        return (f"{where} tried to use a file outside its own folder, which the sandbox does not "
                f"show ({text[:160]})")
    if run.ename == "BlockingIOError" and "Resource temporarily unavailable" in text:
        return f"process limit reached in {where} ({limits.processes} processes and threads)"
    return None


def execute_submission(nb, folder: Path, limits: Limits, slot: int = 0, sandbox: bool = True):
    """Run a restored notebook cell by cell in a sandboxed kernel whose working folder is
    ``folder``; fill in outputs; return (notes, number of test cells judged failed by the
    integrity check). Never raises for anything the student's code does."""
    notes: list[str] = []
    kernel = SandboxKernel(folder, limits, slot=slot, sandbox=sandbox)
    token = secrets.token_hex(6)
    deadline = time.monotonic() + limits.notebook_seconds
    done_ok: list[str] = []          # code of cells that ran fine, replayed after a restart
    tampered = False
    try:
        kernel.start()
        baseline = _stdout(kernel.execute(FINGERPRINT, limits.cell_seconds * 2))
        code_cells = [(i + 1, c) for i, c in enumerate(nb.cells) if c.cell_type == "code"]
        for pos, (number, cell) in enumerate(code_cells):
            cell.outputs, cell.execution_count = [], None
            left = deadline - time.monotonic()
            if left <= 0:
                notes.append(f"notebook time limit ({limits.notebook_seconds:g} s) reached before cell "
                             f"{number}; the remaining cells did not run")
                for _, rest in code_cells[pos:]:
                    rest.outputs = ([_error_output("TimeoutError", "not run: notebook time limit")]
                                    if is_test_cell(rest) else [])
                break
            timeout = min(limits.cell_seconds, left)
            if is_test_cell(cell):
                gid = _nb_meta(cell)["grade_id"]
                if tampered:
                    cell.outputs = [_error_output("IntegrityError", "not graded: error reporting was tampered with")]
                    continue
                kernel.execute(RESET_MACHINERY, timeout=min(10, timeout))
                changed = fingerprint_changes(baseline, _stdout(kernel.execute(FINGERPRINT, timeout)))
                if changed:
                    tampered = True
                    notes.append(f"integrity check failed at test cell {gid} (cell {number}): the code "
                                 f"replaced functions that tests rely on ({', '.join(changed[:5])}); "
                                 "this and later test cells score 0")
                    cell.outputs = [_error_output("IntegrityError", "not graded: built-in functions were replaced")]
                    continue
                canary = kernel.execute(guarded_test(cell.source, token, canary=True), timeout)
                if canary.status == "ok":
                    tampered = True
                    notes.append(f"integrity check failed at test cell {gid} (cell {number}): the kernel "
                                 "reported a test that must fail as passed, so earlier code tampered with "
                                 "error reporting; this and later test cells score 0")
                    cell.outputs = [_error_output("IntegrityError", "not graded: error reporting was tampered with")]
                    continue
                run = canary if canary.status in ("timeout", "died") else kernel.execute(
                    guarded_test(cell.source, token, canary=False), timeout)
            else:
                run = kernel.execute(cell.source, timeout)
            note = _describe_failure(run, number, limits)
            if note:
                notes.append(note)
            if run.truncated:
                notes.append(f"output of cell {number} cut at {limits.output_bytes} bytes")
            outputs = list(run.outputs)
            if is_test_cell(cell) and run.status != "ok":
                outputs = [o for o in outputs if o["output_type"] != "execute_result"]
                if not any(o["output_type"] == "error" for o in outputs):
                    outputs.insert(0, _error_output(run.ename or "TestFailed",
                                                    run.evalue or note or "the test did not pass"))
            elif run.status in ("timeout", "died"):
                outputs.append(_error_output("SandboxLimit", note))
            cell.outputs = outputs
            if run.status == "ok" and not is_test_cell(cell):
                done_ok.append(cell.source)
            if run.status in ("timeout", "died"):
                if run.status == "timeout":
                    kernel.interrupt()
                    if kernel.alive() and kernel.execute("pass", timeout=3).status == "ok":
                        continue  # the interrupt stopped it; the kernel lives on
                kernel.restart()
                baseline = _stdout(kernel.execute(FINGERPRINT, limits.cell_seconds * 2))
                for code in done_ok:  # bring back what the earlier cells defined
                    if kernel.execute(code, min(limits.cell_seconds, max(1.0, deadline - time.monotonic()))).status != "ok":
                        break
                notes.append(f"the kernel was restarted after cell {number} and the earlier cells run again")
    finally:
        kernel.close()
    return notes


def _limits_note(limits: Limits) -> str:
    return (f"{limits.memory_bytes / 2**30:g} GiB memory, {limits.cpu_seconds} s CPU, "
            f"{limits.processes} processes, {limits.cell_seconds:g} s per cell, "
            f"{limits.notebook_seconds:g} s per notebook")


def _copy_for_sandbox(folder: Path, uid: int | None) -> Path:
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


def grade_one(student: str, lesson: str, course: CourseDir, source_nb, release_nb, limits: Limits,
              slot: int, sandbox: bool) -> Outcome:
    """Run one student's submission; write the executed notebook where nbgrader scores it."""
    import nbformat

    start = time.perf_counter()
    outcome = Outcome(student)
    folder = course.root / "submitted" / student / lesson
    staged = course.root / STAGING / student / lesson
    if staged.exists():
        shutil.rmtree(staged)
    staged.mkdir(parents=True)
    for f in ("timestamp.txt",):
        if (folder / f).is_file():
            shutil.copy2(folder / f, staged / f)
    try:
        nb = read_submission(folder / f"{GRADED_NOTEBOOK}.ipynb")
        nb, notes = restore_test_cells(nb, source_nb, release_nb)
        outcome.reasons += notes
        uid = sandbox_uid(slot) if sandbox else None
        work = _copy_for_sandbox(folder, uid)
        try:
            outcome.reasons += execute_submission(nb, work, limits, slot=slot, sandbox=sandbox)
        finally:
            shutil.rmtree(work.parent, ignore_errors=True)
    except SubmissionProblem as exc:
        import copy

        outcome.reasons.append(str(exc))
        nb = copy.deepcopy(release_nb)
        for cell in nb.cells:
            if is_test_cell(cell):
                cell.outputs = [_error_output("NotGraded", str(exc))]
    except Exception as exc:  # noqa: BLE001 - the grader's own fault for this student, recorded
        outcome.reasons.append(f"grader error: {type(exc).__name__}: {str(exc)[:300]}")
        outcome.score = float("nan")
        nb = None
    if nb is not None:
        for cell in nb.cells:
            if cell.cell_type == "code":
                cell.outputs = [nbformat.from_dict(o) for o in cell.outputs]
        nbformat.write(nb, str(staged / f"{GRADED_NOTEBOOK}.ipynb"))
    outcome.seconds = round(time.perf_counter() - start, 2)
    return outcome


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


def _ensure_assignment(course: CourseDir, lesson: str) -> None:
    from nbgrader.api import Gradebook, MissingEntry

    released = course.root / "release" / lesson / f"{GRADED_NOTEBOOK}.ipynb"
    if not (course.root / "gradebook.db").exists():  # nbgrader (a subprocess) creates it
        release(course, lesson)
        return
    try:
        with Gradebook(course.db_url) as gb:
            gb.find_assignment(lesson)
            known = True
    except MissingEntry:
        known = False
    if not known or not released.exists():
        release(course, lesson)


def grade_lesson(lesson_dir: Path, course: CourseDir | None = None, submissions: Path | None = None,
                 workers: int = 1, limits: Limits | None = None, sandbox: bool = True,
                 progress: bool = True, feedback: bool = True) -> list[Outcome]:
    """Grade every submission of one lesson: sandboxed runs in parallel, then nbgrader
    scores them; write ``build/grades_<lesson>.csv`` and feedback. Raises GradingError only
    for a fault of the grader (nbgrader failing as a whole), SandboxUnavailable when
    ``sandbox`` is asked for and cannot be had."""
    import nbformat
    from tqdm import tqdm

    lesson = lesson_dir.name
    limits = limits or Limits()
    course = course or CourseDir(REPO, NOTEBOOKS)
    if sandbox and not bubblewrap():
        raise SandboxUnavailable(why_no_sandbox())
    if submissions:
        import_submissions(course, lesson, Path(submissions))
    _ensure_assignment(course, lesson)
    submitted = course.root / "submitted"
    students = sorted(p.name for p in submitted.iterdir()
                      if (p / lesson).is_dir() and not p.name.startswith(".")) if submitted.exists() else []
    source_nb = nbformat.read(str(course.source / lesson / f"{GRADED_NOTEBOOK}.ipynb"), as_version=4)
    release_nb = nbformat.read(str(course.root / "release" / lesson / f"{GRADED_NOTEBOOK}.ipynb"), as_version=4)
    staging = course.root / STAGING
    for old in staging.glob(f"*/{lesson}"):
        if old.parent.name not in students:
            shutil.rmtree(old)
    slots = list(range(max(1, workers)))
    lock = threading.Lock()

    def job(student: str) -> Outcome:
        with lock:
            slot = slots.pop()
        try:
            return grade_one(student, lesson, course, source_nb, release_nb, limits, slot, sandbox)
        finally:
            with lock:
                slots.append(slot)

    outcomes: list[Outcome] = []
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        bar = tqdm(pool.map(job, students), total=len(students), desc=f"grading {lesson}",
                   unit="submission", disable=not progress)
        outcomes = list(bar)
    if students:
        done = course.nbgrader("autograde", lesson, "--force",
                               f"--CourseDirectory.submitted_directory={STAGING}",
                               "--Execute.enabled=False", "--ClearOutput.enabled=False",
                               timeout=max(300, 20 * len(students)))
        graded = {s for s in students if (course.root / "autograded" / s / lesson).exists()}
        if done.returncode != 0 and not graded:
            raise GradingError(f"nbgrader autograde {lesson} failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
        for o in outcomes:
            got, top = score(course, lesson, o.student)
            o.max_score = top
            if o.student not in graded:
                o.reasons.append("grader error: nbgrader could not score this submission")
                o.score = float("nan")
            elif o.score == o.score:  # not NaN
                o.score = got
        if feedback:
            generate_feedback(course, lesson)
    write_grades_csv(course.root / "build" / f"grades_{lesson}.csv", outcomes)
    return outcomes


def generate_feedback(course: CourseDir, lesson: str) -> subprocess.CompletedProcess:
    """nbgrader feedback (HTML) with hidden tests and their outputs removed."""
    preprocessors = ["nbgrader.preprocessors.GetGrades", "course_lib.feedback.RedactHiddenTests",
                     "nbgrader.preprocessors.ClearHiddenTests",
                     "nbconvert.preprocessors.CSSHTMLHeaderPreprocessor"]
    done = course.nbgrader("generate_feedback", lesson, "--force",
                           f"--GenerateFeedback.preprocessors={_json.dumps(preprocessors)}")
    if done.returncode != 0:
        raise GradingError(f"nbgrader generate_feedback {lesson} failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return done


def write_grades_csv(path: Path, outcomes: list[Outcome]) -> Path:
    """student, score, max_score, seconds, reason: one row per submission."""
    import csv

    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["student", "score", "max_score", "seconds", "reason"])
        for o in outcomes:
            writer.writerow([o.student, "" if o.score != o.score else f"{o.score:g}", f"{o.max_score:g}",
                             f"{o.seconds:g}", o.reason])
    return path
