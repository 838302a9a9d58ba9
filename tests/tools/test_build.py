"""`course build` end to end on lesson 00, and on a broken lesson that must not stop the build."""
import json
import shutil

import nbformat
import pytest

from course_tools import build
from course_tools.paths import NOTEBOOKS


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("build")
    rows = build.build("00", out, progress=lambda m: None)
    return out, rows


def test_summary_lists_the_lesson_with_scores(built):
    out, rows = built
    summary = json.loads((out / "summary.json").read_text())
    (row,) = [r for r in summary["lessons"] if r["lesson"] == "00_setup"]
    for key in ("executed", "seconds", "slides", "release", "max_score", "reference_score", "blank_score"):
        assert key in row
    assert row["executed"] is True
    assert row["reference_score"] == row["max_score"] > 0
    assert row["blank_score"] == 0
    assert build.ok(row)
    assert rows == [row]


def test_outputs_exist(built):
    out, _ = built
    assert (out / "slides" / "00_setup.slides.html").exists()
    assert (out / "release" / "00_setup" / "exercises.ipynb").exists()
    executed = nbformat.read(str(out / "executed" / "00_setup" / "lecture.ipynb"), as_version=4)
    assert any(c.get("outputs") for c in executed.cells if c.cell_type == "code")
    page = (out / "index.html").read_text()
    assert "00_setup" in page and "slides/00_setup.slides.html" in page
    # notebooks open in a browser as web pages (not raw JSON), with no network
    assert 'href="executed/00_setup/lecture.html"' in page and 'href="executed/00_setup/exercises.html"' in page
    rendered = (out / "executed" / "00_setup" / "lecture.html").read_text()
    assert "<html" in rendered and "../../slides/_vendor/require.js" in rendered


def test_table_reports_each_lesson(built):
    _, rows = built
    text = build.table(rows)
    assert "00_setup" in text and text.splitlines()[1].rstrip().endswith("ok")


def _notebook(cells):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    for kind, src in cells:
        cell = nbformat.v4.new_code_cell(src) if kind == "code" else nbformat.v4.new_markdown_cell(src)
        cell.metadata["slideshow"] = {"slide_type": "slide"}
        nb.cells.append(cell)
    return nb


def test_a_broken_lecture_is_reported_and_grading_still_runs(tmp_path):
    lesson = tmp_path / "98_broken"
    lesson.mkdir()
    nbformat.write(_notebook([("md", "# Broken lesson"), ("code", "1 / 0")]), str(lesson / "lecture.ipynb"))
    shutil.copy2(NOTEBOOKS / "00_setup" / "exercises.ipynb", lesson / "exercises.ipynb")
    row = build.build_lesson(lesson, tmp_path / "out")
    assert row["executed"] is False
    assert any("lecture" in e and "ZeroDivisionError" in e for e in row["errors"])
    assert row["reference_score"] == row["max_score"] > 0  # the exercises were still graded
    assert not build.ok(row)


def _row(name, ref=1.0):
    return {"lesson": name, "title": name, "executed": True, "seconds": 1.0, "slides": None,
            "release": None, "max_score": 1.0, "reference_score": ref, "blank_score": 0.0, "errors": []}


def test_summary_merges_partial_builds(tmp_path):
    build.write_summary(tmp_path, [_row("01_a"), _row("02_b")])
    summary = build.write_summary(tmp_path, [_row("02_b", ref=0.5)])
    assert [r["lesson"] for r in summary["lessons"]] == ["01_a", "02_b"]
    assert summary["lessons"][1]["reference_score"] == 0.5
    assert json.loads((tmp_path / "summary.json").read_text()) == summary
    page = (tmp_path / "index.html").read_text()
    assert page.count("<tr>") == 3 and "scores wrong" in page


def test_lessons_build_in_parallel_and_report_as_they_finish(tmp_path, monkeypatch):
    from course_tools import paths

    for name in ("97_first", "98_second"):
        (tmp_path / "notebooks" / name).mkdir(parents=True)
        (tmp_path / "notebooks" / name / "lecture.ipynb").write_text("not a notebook")
        (tmp_path / "notebooks" / name / "exercises.ipynb").write_text("not a notebook either")
    monkeypatch.setattr(paths, "NOTEBOOKS", tmp_path / "notebooks")
    lines = []
    rows = build.build(None, tmp_path / "out", progress=lines.append, workers=2)
    assert [r["lesson"] for r in rows] == ["97_first", "98_second"]  # lesson order, whatever finished first
    assert lines[0] == "building 2 lessons with 2 workers ..."
    assert sorted(line.split()[1] for line in lines[1:]) == ["97_first", "98_second"]
    for r in rows:
        assert not build.ok(r) and any(e.startswith("lecture:") for e in r["errors"])
        assert set(r["phases"]) == set(build.PHASES)


def test_default_workers_stay_within_cores_and_lessons():
    import os

    assert build.default_workers(1) == 1
    assert 1 <= build.default_workers(50) <= min(os.cpu_count() or 1, 8)


def test_published_releases_never_overwrite_a_students_folder(tmp_path):
    built = tmp_path / "build" / "release" / "01_x"
    built.mkdir(parents=True)
    (built / "exercises.ipynb").write_text("fresh release")
    kept = tmp_path / "release" / "01_x"
    kept.mkdir(parents=True)
    (kept / "exercises.ipynb").write_text("my answers")
    rows = [dict(_row("01_x"), release="release/01_x"), dict(_row("02_y"), release=None)]
    lines = build.publish_releases(rows, tmp_path / "build", tmp_path / "release")
    assert (kept / "exercises.ipynb").read_text() == "my answers"
    assert len(lines) == 1 and lines[0].startswith("kept")
    (kept / "exercises.ipynb").unlink()
    kept.rmdir()
    assert build.publish_releases(rows, tmp_path / "build", tmp_path / "release")[0].startswith("student version")
    assert (kept / "exercises.ipynb").read_text() == "fresh release"


def test_the_slowest_lessons_of_the_last_build_start_first(tmp_path):
    lessons = [tmp_path / n for n in ("00_a", "01_b", "02_c", "03_new")]
    # no previous build (a fresh clone): the last lessons, the multi-process ones, first
    assert build._longest_first(lessons, tmp_path) == lessons[::-1]
    build.write_summary(tmp_path, [dict(_row("00_a"), seconds=5.0), dict(_row("01_b"), seconds=50.0),
                                   dict(_row("02_c"), seconds=20.0)])
    assert [p.name for p in build._longest_first(lessons, tmp_path)] == ["03_new", "01_b", "02_c", "00_a"]
