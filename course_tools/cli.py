"""The `course` command: doctor, build, lab, slides, release, grade, bench."""
from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
from pathlib import Path

from .command_common import CourseError, notebook_problem, say
from .doctor import cmd_doctor
from .grade_command import check_grade_input, cmd_grade, cmd_release
from .paths import BUILD, REPO, UnknownLesson

RELEASE = REPO / "release"   # nbgrader's release folder: the student versions, where students work


def cmd_build(args) -> int:
    from .build import build, ok, publish_releases, table

    out = Path(args.out).resolve()
    rows = build(args.lessons, out, progress=say, workers=args.workers)
    print(table(rows))
    if out == BUILD.resolve():  # the course's own build: students find their notebooks in release/
        lines = publish_releases(rows, out, RELEASE)
        kept = sum(line.startswith("kept") for line in lines)
        if lines:
            print(f"student versions: {RELEASE}/NN_name/exercises.ipynb ({len(lines) - kept} written, "
                  f"{kept} kept because they were already there and may hold your answers; `course release NN` "
                  "replaces one only when it holds no one's work, and otherwise says how to force it)")
    print(f"summary: {out / 'summary.json'}; open {out / 'index.html'} in a browser")
    bad = [r["lesson"] for r in rows if not ok(r)]
    if bad:
        print(f"course build: {len(bad)} of {len(rows)} lessons not ok: {', '.join(bad)}", file=sys.stderr)
    return 1 if bad else 0


def _executed_copy(lesson: Path, out: Path) -> Path | None:
    """The lecture as ``course build`` executed it, when that copy is newer than the source
    notebook and than every module of course_lib (so its outputs are still current)."""
    import course_lib

    executed = out / "executed" / lesson.name / "lecture.ipynb"
    if not executed.is_file():
        return None
    newest = max([(lesson / "lecture.ipynb").stat().st_mtime] +
                 [p.stat().st_mtime for p in Path(course_lib.__file__).parent.rglob("*.py")])
    return executed if executed.stat().st_mtime >= newest else None


def cmd_slides(args) -> int:
    import time

    from .build import execute_notebook
    from .paths import lesson_dirs
    from .slides import SlidesUnavailable, build_deck, vendor_into

    out = Path(args.out)
    try:
        vendor_into(out / "slides")  # a missing npm install is one message, not one per lesson
    except SlidesUnavailable as exc:
        raise CourseError(str(exc)) from exc
    lessons = lesson_dirs(args.lessons)
    failed = []
    for n, lesson in enumerate(lessons, start=1):
        start = time.perf_counter()
        source = lesson / "lecture.ipynb"
        reused = None if (args.no_execute or args.execute) else _executed_copy(lesson, out)
        how = ("without outputs" if args.no_execute else
               f"from {reused.relative_to(out.resolve()) if reused.is_relative_to(out.resolve()) else reused}"
               if reused else "executing the lecture")
        say(f"[{n}/{len(lessons)}] {lesson.name}: {how} ...")
        try:
            problem = notebook_problem(source)
            if problem:
                raise CourseError(problem)
            nb = source if args.no_execute else reused or execute_notebook(source)
            deck = build_deck(nb, out / "slides", lesson.name)
        except Exception as exc:  # noqa: BLE001 - one broken lecture must not stop the others
            failed.append(lesson.name)
            say(f"[{n}/{len(lessons)}] {lesson.name}: FAILED: {_one_line(exc)}")
            continue
        say(f"[{n}/{len(lessons)}] {lesson.name}: {time.perf_counter() - start:.0f} s")
        print(deck)
    if failed:
        raise CourseError(f"no deck for {', '.join(failed)} (see the lines above)")
    return 0


def _one_line(exc: BaseException) -> str:
    """An error as one plain line: its type and the last line of its message."""
    from .build import ANSI

    lines = [line for line in ANSI.sub("", str(exc)).strip().splitlines() if line.strip()]
    return f"{type(exc).__name__}: {lines[-1] if lines else ''}"[:300]


# What `course lab` turns off, as the hub does for students (hub/jupyter/): JupyterLab's news
# pop-up (it asks to fetch news from the network and covers a test cell's output) and its update
# check, and nbgrader's instructor tools (formgrader, course list, assignment creation), which
# a student has no use for: the formgrader would offer to manage a course that release/ is not.
LAB_SERVER_CONFIG = {
    "ServerApp": {"jpserver_extensions": {"nbgrader.server_extensions.formgrader": False,
                                          "nbgrader.server_extensions.course_list": False}},
    "LabApp": {"news_url": "", "check_for_updates_class": "jupyterlab.NeverCheckForUpdate"},
}
LAB_PAGE_CONFIG = {"disabledExtensions": {
    "@jupyterlab/apputils-extension:announcements": True, "@jupyter/nbgrader:formgrader": True,
    "@jupyter/nbgrader:create-assignment": True, "@jupyter/nbgrader:course-list": True}}


def lab_config(folder: Path) -> Path:
    """``folder`` (made) holding the Jupyter configuration ``course lab`` adds: the server's
    (``jupyter_server_config.json``, ``LAB_SERVER_CONFIG``) and the lab page's
    (``labconfig/page_config.json``, ``LAB_PAGE_CONFIG``)."""
    (folder / "labconfig").mkdir(parents=True, exist_ok=True)
    (folder / "jupyter_server_config.json").write_text(json.dumps(LAB_SERVER_CONFIG, indent=1) + "\n")
    (folder / "labconfig" / "page_config.json").write_text(json.dumps(LAB_PAGE_CONFIG, indent=1) + "\n")
    return folder


def lab_environment(config: Path, env: dict | None = None) -> dict:
    """``env`` (default: this process's) with ``config`` first in ``JUPYTER_CONFIG_PATH``: Jupyter
    reads the folders listed there before its own, and the first to set a value wins."""
    env = dict(os.environ if env is None else env)
    env["JUPYTER_CONFIG_PATH"] = os.pathsep.join([str(config), *filter(None, [env.get("JUPYTER_CONFIG_PATH")])])
    return env


def lab_command(extra: list[str], uid: int | None = None) -> list[str]:
    """The ``jupyter lab`` command line: the course folder as root, its file browser opened
    on release/ (the student versions) when that exists, ``--allow-root`` for uid 0, then
    the user's own arguments."""
    uid = os.geteuid() if uid is None else uid
    cmd = [sys.executable, "-m", "jupyter", "lab", f"--ServerApp.root_dir={REPO}"]
    if any(RELEASE.glob("*/exercises.ipynb")):
        cmd.append("--LabApp.default_url=/lab/tree/release")
    if uid == 0 and "--allow-root" not in extra:
        cmd.append("--allow-root")
    return cmd + [a for a in extra if a != "--"]


def cmd_lab(args) -> int:
    from .paths import lesson_dirs

    missing = [p.name for p in lesson_dirs() if not (RELEASE / p.name / "exercises.ipynb").exists()]
    if missing:
        say(f"writing the student versions of {len(missing)} lesson(s) to {RELEASE} first ...")
        os.chdir(REPO)
        args.lessons = ",".join(missing)
        cmd_release(args)
    # from the course folder: nbgrader's lab extension reads nbgrader_config.py from there
    return subprocess.call(lab_command(args.extra), cwd=REPO, env=lab_environment(lab_config(BUILD / "lab-config")))


def cmd_bench(args) -> int:
    from . import benchmarks

    results = benchmarks.run(args.only.split(",") if args.only else None,
                             progress=(lambda m: print(m, file=sys.stderr)))
    if args.json:
        print(json.dumps(results, indent=2, default=str))
    else:
        for group, figures in results.items():
            print(f"[{group}]")
            for key, value in figures.items():
                if key != "traceback":
                    print(f"  {key:48} {value:.4g}" if isinstance(value, float) else f"  {key:48} {value}")
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="course", description="GPU computing for deep learning: "
                                "build, present and grade the course.")
    sub = p.add_subparsers(dest="command", required=True)
    d = sub.add_parser("doctor", help="what this machine has and which fallbacks apply")
    d.add_argument("--json", action="store_true", help="machine-readable output")
    d.set_defaults(func=cmd_doctor)
    b = sub.add_parser("build", help="execute, slide, release and round-trip-grade lessons")
    b.add_argument("--lessons", help="comma-separated lesson numbers or folder names (default: all)")
    b.add_argument("--out", default=str(BUILD), help="output folder (default: build/)")
    b.add_argument("--workers", type=int, default=None,
                   help="lessons built at once (default: one per core, within memory)")
    b.set_defaults(func=cmd_build)
    lab = sub.add_parser("lab", help="JupyterLab on the course, opened on release/ (the student "
                         "versions, written first if missing), without the news pop-up or the formgrader; "
                         "other arguments go to jupyter lab, e.g. `course lab --port 9999`")
    lab.add_argument("extra", nargs=argparse.REMAINDER, help="arguments passed to jupyter lab")
    lab.set_defaults(func=cmd_lab)
    s = sub.add_parser("slides", help="offline reveal.js decks of the lectures")
    s.add_argument("lessons", nargs="?", help="comma-separated lessons (default: all)")
    s.add_argument("--out", default=str(BUILD))
    s.add_argument("--no-execute", action="store_true", help="slides without outputs (faster)")
    s.add_argument("--execute", action="store_true",
                   help="execute the lecture even when `course build` left a current executed copy")
    s.set_defaults(func=cmd_slides)
    r = sub.add_parser("release", help="nbgrader student versions into release/")
    r.add_argument("lessons", nargs="?", help="comma-separated lessons (default: all)")
    r.add_argument("--force", action="store_true",
                   help="replace a release/NN_name/exercises.ipynb that holds work (it is moved out of release/, "
                        "to build/kept/NN_name/exercises.yours-<date>-<time>.ipynb); without it such a file is "
                        "never touched")
    r.set_defaults(func=cmd_release)
    g = sub.add_parser("grade", help="autograde the submissions of one lesson")
    g.add_argument("lesson")
    g.add_argument("--submissions", help="folder with one subfolder per student")
    g.add_argument("--workers", type=int, default=1, help="submissions graded in parallel")
    g.add_argument("--cell-timeout", type=float, default=120.0,
                   help="seconds per cell, 1 to 86400 (default 120; there is no 'no limit')")
    g.add_argument("--notebook-timeout", type=float, default=900.0,
                   help="seconds per notebook, 10 to 86400 and at least the cell timeout (default 900)")
    g.add_argument("--memory-gib", type=float, default=4.0, help="memory per sandbox, 1 to 1024 GiB (default 4)")
    g.add_argument("--no-feedback", action="store_true", help="skip the HTML feedback")
    g.add_argument("--shard", help="I/N: grade only shard I (from 0) of N, for a cluster; then --merge")
    g.add_argument("--merge", action="store_true", help="merge the shards of the last run into one CSV and gradebook")
    g.add_argument("--slurm", type=int, metavar="N",
                   help="grade in N shards on a Slurm cluster: submit a job array of N `--shard I/N` tasks with these "
                        "options (sbatch) and the `--merge` as a job after them; scripts and logs in "
                        "build/grading/<lesson>/slurm/")
    g.add_argument("--gpu", action="store_true", help="bind the NVIDIA devices into the sandbox (default: CPU only)")
    g.add_argument("--no-sandbox-i-trust-this-code", action="store_true",
                   help="run submissions without bubblewrap (only for code you trust)")
    g.set_defaults(func=cmd_grade)
    be = sub.add_parser("bench", help="the course's performance figures")
    be.add_argument("--json", action="store_true")
    be.add_argument("--only", help="comma-separated benchmark groups")
    be.set_defaults(func=cmd_bench)
    return p


def _parse(argv: list[str]) -> argparse.Namespace:
    """Parse the command line; everything after `lab` goes to Jupyter untouched."""
    if argv[:1] == ["lab"] and not {"-h", "--help"} & set(argv[1:]):
        args = parser().parse_args(["lab"])
        args.extra = argv[1:]
        return args
    return parser().parse_args(argv)


def _check_input(args) -> None:
    """Refuse bad input before any work starts (each with one plain line)."""
    if args.command == "grade":
        check_grade_input(args)
    if args.command == "build" and args.workers is not None and args.workers < 1:
        raise CourseError("--workers must be 1 or more")
    for attr in ("lessons", "lesson"):
        if getattr(args, attr, None):
            from .paths import lesson_dirs

            lesson_dirs(getattr(args, attr))  # UnknownLesson names the lessons there are


def main(argv: list[str] | None = None) -> int:
    """Run one `course` subcommand. Bad input and missing tools give one line on stderr and
    exit status 1 (argparse's usage errors: 2), never a traceback."""
    args = _parse(sys.argv[1:] if argv is None else list(argv))
    name = f"course {args.command}"
    try:
        _check_input(args)
        if args.command in ("build", "slides", "release", "grade", "bench", "lab"):
            from .loopback import ensure_loopback

            ensure_loopback()  # kernels talk over 127.0.0.1, which `unshare -n` leaves down
        if args.command in ("release", "grade"):
            os.chdir(REPO)  # nbgrader reads nbgrader_config.py from the working directory
        return args.func(args)
    except (CourseError, UnknownLesson, FileNotFoundError, NotADirectoryError, PermissionError) as exc:
        print(f"{name}: {str(exc).strip() or type(exc).__name__}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{name}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - a fault of the tool: one line, details in a file
        log = BUILD / "course-error.txt"
        try:
            import traceback

            log.parent.mkdir(parents=True, exist_ok=True)
            log.write_text(traceback.format_exc())
            where = f" (details: {log})"
        except OSError:
            where = ""
        print(f"{name}: {_one_line(exc)}{where}", file=sys.stderr)
        return 1
    finally:
        if argv is None and "triton" not in sys.modules:
            # the `course` command itself, whose process ends now: the interpreter's last garbage
            # collections over a heap that is about to go (torch, nbgrader) cost about 0.4 s of CPU
            # per command on the course's 2-core machine; what the command wrote is closed already.
            # Not after Triton was imported: its bindings (nanobind) list every object left
            # uncollected at exit as a leak, on the grader's terminal
            gc.freeze()


if __name__ == "__main__":
    sys.exit(main())
