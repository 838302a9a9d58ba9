"""`course build`: execute every lesson, build its deck, release and round-trip-grade it.

Writes, under the output folder (``build/`` by default):

* ``executed/NN_name/lecture.ipynb`` and ``exercises.ipynb`` (with outputs), and beside
  each an ``.html`` rendering that a browser opens offline,
* ``slides/NN_name.slides.html`` (offline reveal.js deck) and ``slides/_vendor/``,
* ``release/NN_name/`` (the student version: no solutions, no hidden tests),
* ``summary.json`` and ``index.html``.

Lessons build in parallel worker processes (one per free core, see ``default_workers``);
each lesson's result is reported as soon as it is done. One failing lesson, even one whose
notebook is not readable, is reported in the summary and the table; the others still build.
"""
from __future__ import annotations

import html
import json
import multiprocessing
import os
import re
import shutil
import tempfile
import time
import traceback
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

from .paths import lesson_dirs
from .slides import build_deck, notebook_html

LECTURE = "lecture.ipynb"
EXERCISES = "exercises.ipynb"
# the kernel's own log (e.g. "Kernel is running over TCP without encryption") is not the
# user's to act on; errors still show
KERNEL_ARGS = ["--IPKernelApp.log_level=ERROR"]
# phases of one lesson's build, in order, as named in summary.json and `course bench build_phases`
PHASES = ("execute_lecture", "slides", "release_and_grading", "html")


def execute_notebook(path: Path, timeout: int = 600, nb=None, **client_options):
    """Run a notebook top to bottom in a fresh kernel, in its own folder; return the
    executed notebook node. ``nb``: run this notebook node (changed in place, so a caller
    that catches the error still has the outputs so far) instead of reading ``path``;
    ``client_options`` go to ``nbclient.NotebookClient`` (e.g. ``record_timing=True``).
    Raises ``nbclient.exceptions.CellExecutionError`` on an error and ``nbformat`` reader
    errors for a file that is not a notebook."""
    import nbformat
    from nbclient import NotebookClient

    from .warm_kernels import AsyncWarmKernelManager

    if nb is None:
        nb = nbformat.read(str(path), as_version=4)
    # The kernel talks over Unix sockets in a folder of its own: kernels started at the same
    # moment by parallel builds cannot pick the same TCP port, and none runs unencrypted TCP.
    with tempfile.TemporaryDirectory(prefix="course-kernel-") as sockets:
        # a fresh kernel forked from this process's template, which imported torch, NumPy, pyplot and
        # ipykernel once (warm_kernels: about 3 s of CPU less per notebook); async, so that nbclient
        # notices a kernel that died (a blocking client waits for its next message forever)
        km = AsyncWarmKernelManager(kernel_name="python3", transport="ipc", ip=str(Path(sockets) / "k"))
        # figures go inline into the notebook even when the caller chose a non-GUI backend
        # for itself (the test suite sets MPLBACKEND=Agg, which would leave decks without plots)
        env = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"}
        NotebookClient(nb, km=km, timeout=timeout, kernel_name="python3", extra_arguments=KERNEL_ARGS,
                       resources={"metadata": {"path": str(path.parent)}}, shutdown_kernel="immediate",
                       **client_options).execute(env=env, cleanup_kc=True)
        # cleanup_kc: nbclient keeps a kernel it did not create alive (km passed in); this one is
        # ours to stop, or every executed lecture leaves a kernel (and its sockets) behind.
        # "immediate": the finished kernel is killed, not asked to exit: an interpreter that
        # imported torch spends about 1 s of CPU tearing itself down (measured here), for nothing
    return nb


def lesson_title(path: Path) -> str:
    """The first markdown heading of a notebook, without the leading #s (the folder's name
    when the notebook has none or cannot be read)."""
    import nbformat

    try:
        nb = nbformat.read(str(path), as_version=4)
    except Exception:  # noqa: BLE001 - an unreadable notebook is reported by the build itself
        return path.parent.name
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("#"):
                    return line.lstrip("#").strip()
    return path.parent.name


ANSI = re.compile(r"\x1b\[[0-9;]*m")   # colours in tracebacks from the kernel


def _error_text(exc: BaseException) -> str:
    """The last line of an error (for a cell error: the exception and its message), plain."""
    text = [line for line in ANSI.sub("", str(exc)).strip().splitlines() if line.strip()]
    return (text[-1] if text else type(exc).__name__)[:300]


def _empty_row(name: str, title: str) -> dict:
    return {"lesson": name, "title": title, "executed": False, "seconds": 0.0, "slides": None,
            "release": None, "max_score": 0.0, "reference_score": 0.0, "blank_score": 0.0,
            "errors": [], "phases": {}}


def build_lesson(lesson_dir: Path, out: Path) -> dict:
    """Build one lesson; return its summary row (errors are recorded, not raised).
    ``row["phases"]`` holds the seconds of each step (see ``PHASES``)."""
    import nbformat

    name = lesson_dir.name
    row = _empty_row(name, lesson_title(lesson_dir / LECTURE))
    phases = row["phases"]
    start = time.perf_counter()
    executed_dir = out / "executed" / name
    executed_dir.mkdir(parents=True, exist_ok=True)

    t = time.perf_counter()
    lecture = None
    try:
        lecture = execute_notebook(lesson_dir / LECTURE)
        nbformat.write(lecture, str(executed_dir / LECTURE))
    except Exception as exc:  # noqa: BLE001 - recorded for the summary
        row["errors"].append(f"lecture: {_error_text(exc)}")
    phases["execute_lecture"] = round(time.perf_counter() - t, 2)

    t = time.perf_counter()
    if lecture is not None:
        try:  # the deck reuses the notebook just executed: the lecture runs once per build
            row["slides"] = str(build_deck(lecture, out / "slides", name).relative_to(out))
        except Exception as exc:  # noqa: BLE001
            row["errors"].append(f"slides: {_error_text(exc)}")
    phases["slides"] = round(time.perf_counter() - t, 2)

    t = time.perf_counter()
    exercises_ok = _release_and_grade(lesson_dir, out, executed_dir, row)
    phases["release_and_grading"] = round(time.perf_counter() - t, 2)
    row["executed"] = lecture is not None and exercises_ok

    t = time.perf_counter()
    for nb_name in (LECTURE, EXERCISES):
        executed = executed_dir / nb_name
        if executed.exists():
            try:  # index.html links these: a browser shows them rendered, not as JSON
                notebook_html(executed, executed.with_suffix(".html"), out / "slides")
            except Exception as exc:  # noqa: BLE001
                row["errors"].append(f"html of {nb_name}: {_error_text(exc)}")
    phases["html"] = round(time.perf_counter() - t, 2)
    row["seconds"] = round(time.perf_counter() - start, 1)
    return row


def _release_and_grade(lesson_dir: Path, out: Path, executed_dir: Path, row: dict) -> bool:
    """The student version into ``out/release/<lesson>``, and the round trip: reference and
    blank graded through the trusted checker (scores into ``row``, the graded reference beside
    the executed lecture). True when the reference ran without an error outside its test cells."""
    name = lesson_dir.name
    try:
        from .grading.round_trip import round_trip  # nbgrader: only the round trip needs it (a GPU machine may lack it)
        result = round_trip(lesson_dir, out / "grading" / name)
        release_dir = out / "release" / name
        if release_dir.exists():
            shutil.rmtree(release_dir)
        shutil.copytree(result["release"], release_dir)
        row["release"] = str(release_dir.relative_to(out))
        graded = result["graded_reference"]
        exercises_ok = graded.exists() and not _has_errors(graded)
        if graded.exists():
            shutil.copy2(graded, executed_dir / EXERCISES)
        if not exercises_ok:
            row["errors"].append("exercises: the reference solution raised an error "
                                 f"(see {executed_dir / EXERCISES})")
        row.update(max_score=result["max_score"], reference_score=result["reference_score"],
                   blank_score=result["blank_score"])
        return exercises_ok
    except Exception as exc:  # noqa: BLE001
        row["errors"].append(f"grading: {_error_text(exc)}")
        (out / "grading").mkdir(parents=True, exist_ok=True)
        (out / "grading" / f"{name}.traceback.txt").write_text(traceback.format_exc())
        return False


def _has_errors(path: Path) -> bool:
    """True when an executed notebook holds an error output outside graded test cells."""
    import nbformat

    nb = nbformat.read(str(path), as_version=4)
    for cell in nb.cells:
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade"):
            continue  # a failing test of the reference shows in the score instead
        if any(o.get("output_type") == "error" for o in cell.get("outputs", [])):
            return True
    return False


def default_workers(lessons: int) -> int:
    """Lessons built at once: one per core, at most one per 3 GiB of memory (a lesson's
    kernels, torch included, take up to about that), at most 8, at least 1."""
    try:
        import psutil

        by_memory = int(psutil.virtual_memory().total // (3 * 2**30))
    except ImportError:
        by_memory = 8
    return max(1, min(lessons, os.cpu_count() or 1, by_memory, 8))


def _worker_init(threads: int) -> None:
    """In each worker process: kernels (and nbgrader's) started from here use ``threads``
    threads unless the user chose otherwise, so that parallel lessons do not oversubscribe
    the cores (two threads per kernel on a loaded 2-core machine ran 20x slower)."""
    import warnings

    try:  # Linux: a worker ends with the `course build` that started it (Ctrl-C, kill)
        import ctypes
        import signal

        ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS"):
        os.environ.setdefault(var, str(threads))
    warnings.simplefilter("ignore")  # library deprecation notices are not the user's to act on


def _crashed_row(lesson_dir: Path, exc: BaseException) -> dict:
    row = _empty_row(lesson_dir.name, lesson_title(lesson_dir / LECTURE))
    row["errors"].append(f"build crashed: {type(exc).__name__}: {_error_text(exc)}")
    return row


def _longest_first(lessons: list[Path], out: Path) -> list[Path]:
    """The lessons, the slowest of the last build first (so that no long lesson starts last
    and keeps one worker busy alone at the end). Where no build is known (a fresh clone), the
    last lessons first: the multi-process ones (10, 11, 13) are the slowest."""
    try:
        seconds = {r["lesson"]: r["seconds"] for r in json.loads((out / "summary.json").read_text())["lessons"]}
    except (OSError, ValueError, KeyError, TypeError):
        return sorted(lessons, key=lambda p: p.name, reverse=True)
    return sorted(lessons, key=lambda p: -seconds.get(p.name, float("inf")))


def build(ids: str | None = None, out: Path = Path("build"), progress=print,
          workers: int | None = None) -> list[dict]:
    """Build the chosen lessons (all by default), ``workers`` at a time (default:
    ``default_workers``); call ``progress`` with one line per lesson as it finishes; write
    summary.json and index.html; return the rows in lesson order."""
    out = Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    lessons = lesson_dirs(ids)
    workers = workers or default_workers(len(lessons))
    progress(f"building {len(lessons)} lesson{'s' * (len(lessons) != 1)} "
             f"with {workers} worker{'s' * (workers != 1)} ...")
    rows = {}
    if workers == 1:
        for lesson_dir in lessons:
            rows[lesson_dir] = build_lesson(lesson_dir, out)
            progress(f"[{len(rows)}/{len(lessons)}] {line(rows[lesson_dir])}")
    else:
        threads = max(1, (os.cpu_count() or 1) // workers)
        with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
                                 initializer=_worker_init, initargs=(threads,)) as pool:
            futures = {pool.submit(build_lesson, lesson_dir, out): lesson_dir
                       for lesson_dir in _longest_first(lessons, out)}
            try:
                for future in as_completed(futures):
                    lesson_dir = futures[future]
                    try:
                        rows[lesson_dir] = future.result()
                    except Exception as exc:  # noqa: BLE001 - a worker died: the others go on
                        rows[lesson_dir] = _crashed_row(lesson_dir, exc)
                    progress(f"[{len(rows)}/{len(lessons)}] {line(rows[lesson_dir])}")
            except BaseException:  # Ctrl-C: stop the workers now rather than after their lessons
                for proc in list(getattr(pool, "_processes", {}).values()):
                    proc.terminate()
                pool.shutdown(wait=False, cancel_futures=True)
                raise
    ordered = [rows[lesson_dir] for lesson_dir in lessons]
    write_summary(out, ordered)
    return ordered


def publish_releases(rows: list[dict], out: Path, dest: Path) -> list[str]:
    """Copy each built student version ``out/release/NN_name`` to ``dest/NN_name`` (the
    course's ``release/`` folder, where students open them), never over a folder that is
    already there (it may hold a student's work). Return one line per lesson."""
    from .grading.nbgrader_course import record_release

    lines = []
    for r in rows:
        if not r.get("release"):
            continue
        target = Path(dest) / r["lesson"]
        if target.exists():
            lines.append(f"kept {target} (already there; `course release {r['lesson'][:2]}` replaces it only if "
                         "it holds no one's work, and otherwise says how to force it)")
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(Path(out) / r["release"], target)
        record_release(Path(dest).parent, r["lesson"], target / EXERCISES)
        lines.append(f"student version: {target / EXERCISES}")
    return lines


def write_summary(out: Path, rows: list[dict]) -> dict:
    """Merge ``rows`` into ``out/summary.json`` (a partial build keeps the other lessons'
    rows) and rewrite ``out/index.html``; return the summary."""
    summary_path = out / "summary.json"
    try:
        old = json.loads(summary_path.read_text()) if summary_path.exists() else {"lessons": []}
    except ValueError:
        old = {"lessons": []}  # a damaged summary is rebuilt from this build's rows
    built = {r["lesson"] for r in rows}
    merged = [r for r in old.get("lessons", []) if r["lesson"] not in built] + rows
    merged.sort(key=lambda r: r["lesson"])
    summary = {"lessons": merged, "built_at": time.strftime("%Y-%m-%d %H:%M:%S")}
    summary_path.write_text(json.dumps(summary, indent=2))
    (out / "index.html").write_text(index_html(summary, out))
    return summary


def ok(row: dict) -> bool:
    """A lesson is good when it executed, has its deck, and grading tells the reference
    from the blank."""
    return (row["executed"] and not row["errors"] and row["max_score"] > 0
            and row["reference_score"] == row["max_score"] and row["blank_score"] == 0)


def status(row: dict) -> str:
    """'ok', or the reasons a lesson is not."""
    if ok(row):
        return "ok"
    return "; ".join(row["errors"]) or (
        f"scores wrong: reference {row['reference_score']:g} of {row['max_score']:g}, "
        f"blank {row['blank_score']:g} (want full marks and 0)")


def line(row: dict) -> str:
    """One lesson's result on one line, as printed when it finishes."""
    return (f"{row['lesson']:38} {row['seconds']:6.1f} s  reference {row['reference_score']:g}"
            f"/{row['max_score']:g}  blank {row['blank_score']:g}  {status(row)}")


def table(rows: list[dict]) -> str:
    """The build summary as a fixed-width text table."""
    lines = [f"{'lesson':38} {'run':4} {'secs':>6} {'ref':>6} {'blank':>6} {'max':>6}  status"]
    for r in rows:
        lines.append(f"{r['lesson']:38} {'yes' if r['executed'] else 'NO':4} {r['seconds']:6.1f} "
                     f"{r['reference_score']:6g} {r['blank_score']:6g} {r['max_score']:6g}  {status(r)}")
    return "\n".join(lines)


def _notebook_link(out: Path | None, lesson: str, stem: str) -> str:
    """Link to the rendered HTML of an executed notebook (the .ipynb where no HTML exists)."""
    rel = f"executed/{lesson}/{stem}"
    if out is not None and not (out / f"{rel}.html").exists():
        if (out / f"{rel}.ipynb").exists():
            return f'<a href="{html.escape(rel)}.ipynb">{stem} (.ipynb)</a>'
        return f"no {stem}"
    return f'<a href="{html.escape(rel)}.html">{stem}</a>'


def index_html(summary: dict, out: Path | None = None) -> str:
    """A small static page linking every deck, executed notebook (rendered) and release."""
    rows = []
    for r in summary["lessons"]:
        deck = f'<a href="{html.escape(r["slides"])}">slides</a>' if r.get("slides") else "no deck"
        release = (f'<a href="{html.escape(r["release"])}/{EXERCISES}">student version</a>'
                   if r.get("release") else "none")
        rows.append(
            f"<tr><td>{html.escape(r['lesson'])}</td><td>{html.escape(r['title'])}</td><td>{deck}</td>"
            f"<td>{_notebook_link(out, r['lesson'], 'lecture')} · "
            f"{_notebook_link(out, r['lesson'], 'exercises')}</td><td>{release}</td>"
            f"<td>{r['reference_score']:g} / {r['max_score']:g}</td><td>{r['blank_score']:g}</td>"
            f"<td>{r['seconds']:.0f} s</td><td>{html.escape(status(r))}</td></tr>")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>GPU computing for deep learning: build</title>
<style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:4px 8px}}th{{background:#1b4f72;color:#fff}}
td:nth-child(-n+1),td:nth-child(n+6):nth-child(-n+8){{white-space:nowrap}}</style></head>
<body><h1>GPU computing for deep learning</h1><p>Built {html.escape(summary['built_at'])}.
Executed notebooks open as web pages; the exercises shown are the reference solutions.</p>
<table><tr><th>lesson</th><th>title</th><th>deck</th><th>executed</th><th>release</th><th>reference</th>
<th>blank</th><th>time</th><th>status</th></tr>
{''.join(rows)}
</table></body></html>
"""
