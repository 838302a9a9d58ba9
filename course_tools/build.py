"""`course build`: execute every lesson, build its deck, release and round-trip-grade it.

Writes, under the output folder (``build/`` by default):

* ``executed/NN_name/lecture.ipynb`` and ``exercises.ipynb`` (with outputs),
* ``slides/NN_name.slides.html`` (offline reveal.js deck) and ``slides/_vendor/``,
* ``release/NN_name/`` (the student version: no solutions, no hidden tests),
* ``summary.json`` and ``index.html``.

One failing lesson is reported in the summary and the table; the others still build.
"""
from __future__ import annotations

import html
import json
import shutil
import time
import traceback
from pathlib import Path

from .grading import round_trip
from .paths import lesson_dirs
from .slides import build_deck

LECTURE = "lecture.ipynb"


def execute_notebook(path: Path, timeout: int = 600):
    """Run a notebook top to bottom in a fresh kernel, in its own folder; return the
    executed notebook node. Raises ``nbclient.exceptions.CellExecutionError`` on an error."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(str(path), as_version=4)
    NotebookClient(nb, timeout=timeout, kernel_name="python3",
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    return nb


def lesson_title(path: Path) -> str:
    """The first markdown heading of a notebook, without the leading #s."""
    import nbformat

    nb = nbformat.read(str(path), as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("#"):
                    return line.lstrip("#").strip()
    return path.parent.name


def _error_text(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[-1] if text else type(exc).__name__)[:500]


def build_lesson(lesson_dir: Path, out: Path) -> dict:
    """Build one lesson; return its summary row (errors are recorded, not raised)."""
    import nbformat

    name = lesson_dir.name
    row = {"lesson": name, "title": lesson_title(lesson_dir / LECTURE), "executed": False,
           "seconds": 0.0, "slides": None, "release": None, "max_score": 0.0,
           "reference_score": 0.0, "blank_score": 0.0, "errors": []}
    start = time.perf_counter()
    executed_dir = out / "executed" / name
    executed_dir.mkdir(parents=True, exist_ok=True)
    lecture_ok = False
    try:
        lecture = execute_notebook(lesson_dir / LECTURE)
        nbformat.write(lecture, str(executed_dir / LECTURE))
        lecture_ok = True
        row["slides"] = str(build_deck(lecture, out / "slides", name).relative_to(out))
    except Exception as exc:  # noqa: BLE001 - recorded for the summary
        row["errors"].append(f"lecture: {_error_text(exc)}")
    try:
        result = round_trip(lesson_dir, out / "grading" / name)
        release_dir = out / "release" / name
        if release_dir.exists():
            shutil.rmtree(release_dir)
        shutil.copytree(result["release"], release_dir)
        row["release"] = str(release_dir.relative_to(out))
        graded = result["graded_reference"]
        exercises_ok = graded.exists() and not _has_errors(graded)
        if graded.exists():
            shutil.copy2(graded, executed_dir / "exercises.ipynb")
        if not exercises_ok:
            row["errors"].append("exercises: the reference solution raised an error "
                                 f"(see {executed_dir / 'exercises.ipynb'})")
        row.update(max_score=result["max_score"], reference_score=result["reference_score"],
                   blank_score=result["blank_score"])
        row["executed"] = lecture_ok and exercises_ok
    except Exception as exc:  # noqa: BLE001
        row["errors"].append(f"grading: {_error_text(exc)}")
        (out / "grading" / f"{name}.traceback.txt").write_text(traceback.format_exc())
    row["seconds"] = round(time.perf_counter() - start, 1)
    return row


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


def build(ids: str | None = None, out: Path = Path("build"), progress=print) -> list[dict]:
    """Build the chosen lessons (all by default); write summary.json and index.html."""
    out = Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for lesson_dir in lesson_dirs(ids):
        progress(f"building {lesson_dir.name} ...")
        rows.append(build_lesson(lesson_dir, out))
    write_summary(out, rows)
    return rows


def write_summary(out: Path, rows: list[dict]) -> dict:
    """Merge ``rows`` into ``out/summary.json`` (a partial build keeps the other lessons'
    rows) and rewrite ``out/index.html``; return the summary."""
    summary_path = out / "summary.json"
    old = json.loads(summary_path.read_text()) if summary_path.exists() else {"lessons": []}
    built = {r["lesson"] for r in rows}
    merged = [r for r in old.get("lessons", []) if r["lesson"] not in built] + rows
    merged.sort(key=lambda r: r["lesson"])
    summary = {"lessons": merged, "built_at": time.strftime("%Y-%m-%d %H:%M:%S")}
    summary_path.write_text(json.dumps(summary, indent=2))
    (out / "index.html").write_text(index_html(summary))
    return summary


def ok(row: dict) -> bool:
    """A lesson is good when it executed and grading tells the reference from the blank."""
    return (row["executed"] and row["max_score"] > 0
            and row["reference_score"] == row["max_score"] and row["blank_score"] == 0)


def table(rows: list[dict]) -> str:
    """The build summary as a fixed-width text table."""
    lines = [f"{'lesson':38} {'run':4} {'secs':>6} {'ref':>6} {'blank':>6} {'max':>6}  status"]
    for r in rows:
        status = "ok" if ok(r) else "; ".join(r["errors"]) or "scores wrong"
        lines.append(f"{r['lesson']:38} {'yes' if r['executed'] else 'NO':4} {r['seconds']:6.1f} "
                     f"{r['reference_score']:6g} {r['blank_score']:6g} {r['max_score']:6g}  {status}")
    return "\n".join(lines)


def index_html(summary: dict) -> str:
    """A small static page linking every deck, executed notebook and release."""
    rows = []
    for r in summary["lessons"]:
        deck = f'<a href="{html.escape(r["slides"])}">slides</a>' if r.get("slides") else "no deck"
        state = "ok" if ok(r) else html.escape("; ".join(r["errors"]) or "scores wrong")
        rows.append(
            f"<tr><td>{html.escape(r['lesson'])}</td><td>{html.escape(r['title'])}</td><td>{deck}</td>"
            f'<td><a href="executed/{r["lesson"]}/lecture.ipynb">lecture</a> · '
            f'<a href="executed/{r["lesson"]}/exercises.ipynb">exercises</a></td>'
            f"<td>{r['reference_score']:g} / {r['max_score']:g}</td><td>{r['blank_score']:g}</td>"
            f"<td>{r['seconds']:.0f} s</td><td>{state}</td></tr>")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>GPU computing for deep learning: build</title>
<style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:4px 8px}}th{{background:#1b4f72;color:#fff}}</style></head>
<body><h1>GPU computing for deep learning</h1><p>Built {html.escape(summary['built_at'])}.</p>
<table><tr><th>lesson</th><th>title</th><th>deck</th><th>executed</th><th>reference</th>
<th>blank</th><th>time</th><th>status</th></tr>
{''.join(rows)}
</table></body></html>
"""
