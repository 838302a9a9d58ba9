"""`course release` and `course grade`: the student versions, and sandboxed autograding with the
limits it accepts (checked before anything is graded)."""
from __future__ import annotations

import sys
import time
from pathlib import Path

from .command_common import CourseError, notebook_problem, one_lesson, say
from .paths import BUILD, NOTEBOOKS, REPO


def _root_course():
    from .grading.nbgrader_course import CourseDir

    return CourseDir(REPO, NOTEBOOKS)


def cmd_release(args) -> int:
    from .grading.nbgrader_course import GradingError, ReleaseKept, release
    from .paths import lesson_dirs

    lessons = lesson_dirs(args.lessons)
    failed, kept = [], []
    for n, lesson in enumerate(lessons, start=1):
        start = time.perf_counter()
        problem = notebook_problem(lesson / "exercises.ipynb")
        try:
            if problem:
                raise CourseError(problem)
            step = f"[{n}/{len(lessons)}] {lesson.name}"
            folder = release(_root_course(), lesson.name, force=getattr(args, "force", False),
                             on_kept=lambda old, new, step=step: say(f"{step}: {_shown(old)} moved to {_shown(new)}"))
        except ReleaseKept as exc:
            kept.append(lesson.name)
            say(f"[{n}/{len(lessons)}] {lesson.name}: KEPT: {exc}")
            continue
        except (CourseError, GradingError) as exc:
            failed.append(lesson.name)
            say(f"[{n}/{len(lessons)}] {lesson.name}: FAILED: {str(exc).strip().splitlines()[0][:300]}")
            continue
        say(f"[{n}/{len(lessons)}] {lesson.name}: {time.perf_counter() - start:.0f} s")
        print(folder / "exercises.ipynb")
    if failed or kept:
        raise CourseError("; ".join(
            ([f"no student version for {', '.join(failed)} (see the lines above)"] if failed else []) +
            ([(f"not replaced, because they hold work: {', '.join(kept)} (see the lines above; --force "
               "replaces them and moves each old file to build/kept/NN_name/)")] if kept else [])))
    return 0


def _shown(path: Path) -> str:
    """``path`` relative to the course folder when it lies in it."""
    return str(path.relative_to(REPO) if path.is_relative_to(REPO) else path)


def _lesson_and_shard(args) -> tuple[Path, tuple[int, int]]:
    """The one lesson folder and the shard (index, count) that a `course grade` command line names;
    ValueError with the line to print for bad input (no such lesson, more than one, a malformed
    --shard, a missing --submissions folder)."""
    from .paths import lesson_dirs

    try:
        lessons = lesson_dirs(args.lesson)
    except (SystemExit, Exception) as exc:  # noqa: BLE001 - bad input: one line, not a traceback
        raise ValueError(f"unknown lesson {args.lesson!r} ({exc})") from None
    if len(lessons) != 1:
        raise ValueError(f"give exactly one lesson, not {args.lesson!r}")
    shard = (0, 1)
    if args.shard:
        try:
            index, count = (int(x) for x in args.shard.split("/"))
            assert 0 <= index < count
        except (ValueError, AssertionError):
            raise ValueError(f"--shard wants I/N with 0 <= I < N, not {args.shard!r}") from None
        shard = (index, count)
    if args.submissions and not Path(args.submissions).is_dir():
        raise ValueError(f"no submissions folder {args.submissions}")
    return lessons[0], shard


def _sandbox_and_limits(args):
    """(whether student code runs sandboxed, its Limits) for a `course grade` command line, with
    the warning and the limits in force printed; None when no sandbox can be had and the command
    did not accept grading without one."""
    from .grading import sandbox as grading_sandbox
    from .grading.sandbox import Limits, limits_in_force

    sandbox = not args.no_sandbox_i_trust_this_code
    if not sandbox:
        print("WARNING: grading WITHOUT a sandbox: student code can read and change every file "
              "this user can, use the network and other students' work. Only for code you trust.",
              file=sys.stderr)
    elif not grading_sandbox.bubblewrap():
        print("course grade: refusing to run student code without a sandbox. "
              f"{grading_sandbox.why_no_sandbox()} "
              "To grade code you trust anyway, pass --no-sandbox-i-trust-this-code.", file=sys.stderr)
        return None
    limits = Limits(memory_bytes=int(args.memory_gib * 2**30), cell_seconds=args.cell_timeout,
                    notebook_seconds=args.notebook_timeout, gpu=args.gpu)
    print(f"limits: memory and processes bounded {limits_in_force()}"
          + ("; GPU passed in (no address-space limit)" if args.gpu else "; no GPU inside the sandbox"),
          file=sys.stderr)
    return sandbox, limits


def cmd_grade(args) -> int:
    """Sandboxed autograding of one lesson's submissions (all, or one shard), then the grades
    CSV, gradebook and feedback; or (--merge) the shards of the last run into one CSV and
    gradebook; or (--slurm N) N shards and their merge submitted to Slurm (``grade_slurm``;
    exit 0 once both jobs are submitted). Exit 0 when every submission was processed (whatever
    it scored); 1 for a grader fault or bad input; 2 when no sandbox is available and the grader
    did not accept that; 130 when interrupted (Ctrl-C: the CSV written says who was not graded).
    SIGTERM ends it by that signal, after the same CSV."""
    from .grading.grade import grade_lesson, merge_lesson
    from .grading.nbgrader_course import GradingError
    from .grading.sandbox import SandboxUnavailable

    try:
        lesson, shard = _lesson_and_shard(args)
    except ValueError as exc:
        print(f"course grade: {exc}", file=sys.stderr)
        return 1
    started = None
    try:
        if getattr(args, "slurm", None):
            from .grade_slurm import submit

            return submit(lesson, args)
        if args.merge:
            outcomes = merge_lesson(lesson)
        else:
            chosen = _sandbox_and_limits(args)
            if chosen is None:
                return 2
            sandbox, limits = chosen
            started = time.time()
            outcomes = grade_lesson(lesson, submissions=Path(args.submissions) if args.submissions else None,
                                    workers=args.workers, limits=limits, sandbox=sandbox,
                                    feedback=not args.no_feedback, shard=shard)
    except (GradingError, SandboxUnavailable) as exc:
        print(f"course grade: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:   # Ctrl-C: grade_lesson wrote what it had before passing it on
        print(f"course grade: interrupted (Ctrl-C); {_what_was_written(lesson.name, shard, started)}", file=sys.stderr)
        return 130
    return _report(outcomes, lesson.name, shard, args)


def _report(outcomes, lesson: str, shard: tuple[int, int], args) -> int:
    """One line per student (score out of the maximum, the reasons), then where the results are;
    the exit status: 1 when the grader failed a student (a refused submission was processed:
    its row says why), else 0."""
    for o in outcomes:
        got = f"{o.score:g}" if o.score == o.score else ("error" if o.status == "error" else "none")
        print(f"{o.student:20} {got:>6} / {o.max_score:g}   {o.reason}")
    failed = any(o.status == "error" for o in outcomes)
    if shard[1] > 1 and not args.merge:
        print(f"shard {shard[0]}/{shard[1]} done; after every shard: course grade {lesson} --merge")
        return 1 if failed else 0
    print(f"grades: {BUILD / f'grades_{lesson}.csv'}")
    if not args.no_feedback:
        print(f"feedback: {REPO / 'feedback'}/<student>/{lesson}/")
    return 1 if failed else 0


def _what_was_written(lesson: str, shard: tuple[int, int], started: float | None) -> str:
    """After an interrupted ``course grade``: which results file says who was not graded, if the
    run wrote one (it does once grading has begun), else that nothing was recorded."""
    csv = BUILD / f"grades_{lesson}.csv"
    if shard[1] == 1 and started is not None and csv.is_file() and csv.stat().st_mtime >= started - 1:
        return f"{_shown(csv)} says which students were not graded"
    shard_file = BUILD / "grading" / lesson / "shards" / f"{shard[0]}-of-{shard[1]}" / "outcomes.json"
    if shard[1] > 1 and started is not None and shard_file.is_file() and shard_file.stat().st_mtime >= started - 1:
        return f"this shard's results ({_shown(shard_file)}) say which students were not graded"
    return "nothing was graded or recorded"


# the limits `course grade` accepts: (flag, attribute, smallest, largest, unit). Below the smallest
# every submission fails for the grader's reason, not the student's (a 0 s cell limit, nbgrader's
# "-1 = no limit"); there is no "no limit": the largest is a day per cell and per notebook.
GRADE_LIMITS = (("--cell-timeout", "cell_timeout", 1.0, 86400.0, "seconds"),
                ("--notebook-timeout", "notebook_timeout", 10.0, 86400.0, "seconds"),
                ("--memory-gib", "memory_gib", 1.0, 1024.0, "GiB"))


def check_limits(args) -> None:
    """CourseError (one line) for a grading limit that is not a number in its range."""
    import math

    for flag, attr, low, high, unit in GRADE_LIMITS:
        value = getattr(args, attr, None)
        if value is None:
            continue
        if not math.isfinite(value) or not low <= value <= high:
            hint = (f" (nbgrader's -1 for 'no limit' is not offered: the longest is {high:g})"
                    if value < 0 and unit == "seconds" else "")
            raise CourseError(f"{flag} {value:g}: give {unit} from {low:g} to {high:g}{hint}; "
                              "nothing was graded")
    if getattr(args, "notebook_timeout", None) is not None and args.notebook_timeout < args.cell_timeout:
        raise CourseError(f"--notebook-timeout {args.notebook_timeout:g} is shorter than --cell-timeout "
                          f"{args.cell_timeout:g}; nothing was graded")


MAX_SLURM_SHARDS = 1000   # below Slurm's default MaxArraySize (1001)


def check_grade_input(args) -> None:
    """CourseError (one line) for a `course grade` command line that cannot be graded."""
    one_lesson(args.lesson)
    if args.submissions:
        from .grading.intake import SubmissionProblem, folder_problem
        try:
            folder_problem(Path(args.submissions))
        except SubmissionProblem as exc:
            raise CourseError(str(exc)) from None
    check_limits(args)
    if getattr(args, "slurm", None) is not None:
        if args.shard or args.merge:
            raise CourseError("--slurm submits the shards and their merge itself: give it without --shard and --merge")
        if not 1 <= args.slurm <= MAX_SLURM_SHARDS:
            raise CourseError(f"--slurm {args.slurm}: give 1 to {MAX_SLURM_SHARDS} shards "
                              "(tasks of one Slurm job array)")
    from .grading.sandbox import SLOTS
    if not 1 <= args.workers <= SLOTS:
        raise CourseError(f"--workers must be between 1 and {SLOTS} (submissions graded at once by one grader)")
