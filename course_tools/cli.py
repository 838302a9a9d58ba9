"""The `course` command: doctor, build, lab, slides, release, grade, bench."""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from .paths import BUILD, NOTEBOOKS, REPO



def _gib(n: float) -> str:
    return f"{n / 2**30:.1f} GiB"


def cmd_doctor(args) -> int:
    from course_lib.hardware import describe

    info = describe()
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    cpu = info["cpu"]
    caches = ", ".join(f"{k} {v // 1024} KiB" for k, v in cpu["caches"].items())
    print(f"Python {info['python']}, torch {info['torch']}, NumPy {info['numpy']}")
    print(f"CPU     {cpu['model']} ({cpu['arch']}), {cpu['physical_cores']} cores / "
          f"{cpu['logical_cores']} threads, up to {cpu['max_clock_hz'] / 1e9:.2f} GHz")
    print(f"SIMD    {', '.join(cpu['simd']) or 'none detected'}")
    print(f"caches  {caches or 'unknown'}")
    print(f"RAM     {_gib(info['ram_bytes'])}")
    if info["cuda_gpus"]:
        for g in info["cuda_gpus"]:
            print(f"GPU {g['index']}   {g['name']}, {_gib(g['memory_bytes'])}, "
                  f"compute capability {g['compute_capability']}, {g['multiprocessors']} SMs")
    else:
        print("GPU     no CUDA GPU usable by torch")
    print(f"arrays  {info['array_module']} (CuPy usable: {'yes' if info['cupy_usable'] else 'no'})")
    print(f"kernels Numba CUDA: {info['numba_cuda']}")
    print(f"torch.distributed backends: {', '.join(info['distributed_backends']) or 'none'}")
    for fb in info["fallbacks"]:
        print(f"fallback: {fb}")
    return 0


def cmd_build(args) -> int:
    from .build import build, ok, table

    rows = build(args.lessons, Path(args.out))
    print(table(rows))
    print(f"summary: {Path(args.out).resolve() / 'summary.json'}; open "
          f"{Path(args.out).resolve() / 'index.html'} in a browser")
    return 0 if all(ok(r) for r in rows) else 1


def cmd_slides(args) -> int:
    from .build import execute_notebook
    from .paths import lesson_dirs
    from .slides import build_deck

    out = Path(args.out) / "slides"
    for lesson in lesson_dirs(args.lessons):
        nb = execute_notebook(lesson / "lecture.ipynb") if not args.no_execute else lesson / "lecture.ipynb"
        print(build_deck(nb, out, lesson.name))
    return 0


def cmd_lab(args) -> int:
    cmd = [sys.executable, "-m", "jupyter", "lab", f"--notebook-dir={REPO}", *args.extra]
    return subprocess.call(cmd)


def _root_course():
    from .grading import CourseDir

    return CourseDir(REPO, NOTEBOOKS)


def cmd_release(args) -> int:
    from .grading import release
    from .paths import lesson_dirs

    for lesson in lesson_dirs(args.lessons):
        print(release(_root_course(), lesson.name))
    return 0


def cmd_grade(args) -> int:
    """Sandboxed autograding of every submission of one lesson, then grades CSV and feedback.
    Exit 0 when every submission was processed (whatever it scored); 1 for a grader fault;
    2 when no sandbox is available and the grader did not accept running without one."""
    from .grading import GradingError, Limits, SandboxUnavailable, bubblewrap, grade_lesson, why_no_sandbox
    from .paths import lesson_dirs

    (lesson,) = lesson_dirs(args.lesson)
    sandbox = not args.no_sandbox_i_trust_this_code
    if not sandbox:
        print("WARNING: grading WITHOUT a sandbox: student code can read and change every file "
              "this user can, use the network and other students' work. Only for code you trust.",
              file=sys.stderr)
    elif not bubblewrap():
        print(f"course grade: refusing to run student code without a sandbox. {why_no_sandbox()} "
              "To grade code you trust anyway, pass --no-sandbox-i-trust-this-code.", file=sys.stderr)
        return 2
    limits = Limits(memory_bytes=int(args.memory_gib * 2**30), cell_seconds=args.cell_timeout,
                    notebook_seconds=args.notebook_timeout)
    try:
        outcomes = grade_lesson(lesson, submissions=Path(args.submissions) if args.submissions else None,
                                workers=args.workers, limits=limits, sandbox=sandbox,
                                feedback=not args.no_feedback)
    except (GradingError, SandboxUnavailable) as exc:
        print(f"course grade: {exc}", file=sys.stderr)
        return 1
    for o in outcomes:
        got = "error" if o.score != o.score else f"{o.score:g}"
        print(f"{o.student:20} {got:>6} / {o.max_score:g}   {o.reason}")
    print(f"grades: {BUILD / f'grades_{lesson.name}.csv'}")
    if not args.no_feedback:
        print(f"feedback: {REPO / 'feedback'}/<student>/{lesson.name}/")
    return 1 if any(o.score != o.score for o in outcomes) else 0


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
    b.set_defaults(func=cmd_build)
    lab = sub.add_parser("lab", help="JupyterLab on the course, RISE available")
    lab.add_argument("extra", nargs=argparse.REMAINDER, help="arguments passed to jupyter lab")
    lab.set_defaults(func=cmd_lab)
    s = sub.add_parser("slides", help="offline reveal.js decks of the lectures")
    s.add_argument("lessons", nargs="?", help="comma-separated lessons (default: all)")
    s.add_argument("--out", default=str(BUILD))
    s.add_argument("--no-execute", action="store_true", help="slides without outputs (faster)")
    s.set_defaults(func=cmd_slides)
    r = sub.add_parser("release", help="nbgrader student versions into release/")
    r.add_argument("lessons", nargs="?", help="comma-separated lessons (default: all)")
    r.set_defaults(func=cmd_release)
    g = sub.add_parser("grade", help="autograde the submissions of one lesson")
    g.add_argument("lesson")
    g.add_argument("--submissions", help="folder with one subfolder per student")
    g.add_argument("--workers", type=int, default=1, help="submissions graded in parallel")
    g.add_argument("--cell-timeout", type=float, default=120.0, help="seconds per cell (default 120)")
    g.add_argument("--notebook-timeout", type=float, default=900.0, help="seconds per notebook (default 900)")
    g.add_argument("--memory-gib", type=float, default=4.0, help="address space per process (default 4)")
    g.add_argument("--no-feedback", action="store_true", help="skip nbgrader's HTML feedback")
    g.add_argument("--no-sandbox-i-trust-this-code", action="store_true",
                   help="run submissions without bubblewrap (only for code you trust)")
    g.set_defaults(func=cmd_grade)
    be = sub.add_parser("bench", help="the course's performance figures")
    be.add_argument("--json", action="store_true")
    be.add_argument("--only", help="comma-separated benchmark groups")
    be.set_defaults(func=cmd_bench)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.command in ("build", "slides", "release", "grade", "bench", "lab"):
        from .loopback import ensure_loopback

        ensure_loopback()  # kernels talk over 127.0.0.1, which `unshare -n` leaves down
    if args.command in ("release", "grade"):
        os.chdir(REPO)  # nbgrader reads nbgrader_config.py from the working directory
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
