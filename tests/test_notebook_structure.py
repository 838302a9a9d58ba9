"""Structure every lesson must have (cheap: reads the JSON, runs nothing)."""
import json
from pathlib import Path

import pytest

from course_tools.paths import lesson_dirs

LESSONS = lesson_dirs()
NOTEBOOKS = [nb for lesson in LESSONS for nb in sorted(lesson.glob("*.ipynb"))]


def load(path):
    return json.loads(Path(path).read_text())


def test_every_lesson_has_a_lecture_and_exercises():
    assert LESSONS, "no lessons found"
    for lesson in LESSONS:
        assert (lesson / "lecture.ipynb").exists(), lesson
        assert (lesson / "exercises.ipynb").exists(), lesson


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_cells_have_slide_types_and_no_outputs(path):
    nb = load(path)
    for i, cell in enumerate(nb["cells"]):
        assert "slide_type" in cell["metadata"].get("slideshow", {}), f"cell {i} lacks slide_type"
        if cell["cell_type"] == "code":
            assert not cell.get("outputs"), f"cell {i} has committed outputs"
            assert cell.get("execution_count") is None, f"cell {i} has an execution count"


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: p.name)
def test_lecture_opens_with_goals_closes_with_summary_and_has_notes(lesson):
    cells = load(lesson / "lecture.ipynb")["cells"]
    first = "".join(cells[0]["source"])
    assert cells[0]["metadata"]["slideshow"]["slide_type"] == "slide"
    assert "By the end of this lesson" in first or "learning goals" in first.lower()
    kinds = [c["metadata"]["slideshow"]["slide_type"] for c in cells]
    assert kinds.count("notes") >= 2, "key slides need speaker notes"
    summaries = [c for c in cells if c["cell_type"] == "markdown" and "## Summary" in "".join(c["source"])]
    assert summaries, "no summary slide"


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: p.name)
def test_exercises_have_graded_visible_and_hidden_tests(lesson):
    cells = load(lesson / "exercises.ipynb")["cells"]
    graded = [c for c in cells if c["metadata"].get("nbgrader", {}).get("grade")]
    solutions = [c for c in cells if c["metadata"].get("nbgrader", {}).get("solution")]
    assert len(graded) >= 4, "at least 4 graded test cells"
    assert any("BEGIN HIDDEN TESTS" in "".join(c["source"]) for c in graded), "no hidden tests"
    assert any("BEGIN HIDDEN TESTS" not in "".join(c["source"]) for c in graded), "no visible-only tests"
    assert all(c["metadata"]["nbgrader"].get("points", 0) > 0 for c in graded)
    assert len(solutions) >= 3
    for c in solutions:
        assert "### BEGIN SOLUTION" in "".join(c["source"]), "solution cell without solution region"
    ids = [c["metadata"]["nbgrader"]["grade_id"] for c in cells if "nbgrader" in c["metadata"]]
    assert len(ids) == len(set(ids)), "duplicate nbgrader grade_id"
