"""Structure every lesson must have (cheap: reads the JSON, runs nothing)."""
import json
import re
from pathlib import Path

import pytest

from course_tools.paths import lesson_dirs

LESSONS = lesson_dirs()
NOTEBOOKS = [nb for lesson in LESSONS for nb in sorted(lesson.glob("*.ipynb"))]
SEED_NUMBER = re.compile(r"\bseeds? ?0\d\d\b", re.IGNORECASE)


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


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: p.name)
def test_hidden_tests_are_labelled_and_test_cells_named_for_what_they_check(lesson):
    """A feedback names a failed hidden test by its label alone (``# hidden test: <what it checks>``,
    never its data, course_tools.grading.segments): every hidden part starts with one. A visible
    test cell named ``..._hidden`` confused students: no test cell is named so."""
    from course_tools.grading.segments import hidden_labels, split_hidden

    for cell in load(lesson / "exercises.ipynb")["cells"]:
        meta = cell["metadata"].get("nbgrader", {})
        if not meta.get("grade"):
            continue
        assert not meta["grade_id"].endswith("_hidden"), f"{meta['grade_id']}: name the cell for what it checks"
        _, hidden = split_hidden("".join(cell["source"]))
        labels = hidden_labels(hidden)
        assert not hidden or labels and labels[0][0] == 2, f"{meta['grade_id']}: its hidden part starts without a label"
        assert all(len(label) < 200 for _, label in labels), meta["grade_id"]


def _slides(cells):
    """The lecture's slides: lists of cells, each starting at a slide or subslide."""
    slides = []
    for cell in cells:
        kind = cell["metadata"].get("slideshow", {}).get("slide_type", "-")
        if kind in ("slide", "subslide") or not slides:
            slides.append([])
        slides[-1].append(cell)
    return slides


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: p.name)
def test_every_content_slide_has_speaker_notes(lesson):
    """An instructor presenting any slide after the title has notes for it."""
    slides = _slides(load(lesson / "lecture.ipynb")["cells"])
    bare = [number for number, cells in enumerate(slides[1:], start=2)
            if not any(c["metadata"]["slideshow"]["slide_type"] == "notes" for c in cells)]
    assert bare == [], f"slides without speaker notes (1 = the title slide): {bare}"


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: p.name)
def test_lecture_has_a_references_slide_students_can_follow(lesson):
    cells = load(lesson / "lecture.ipynb")["cells"]
    refs = [c for c in cells if c["cell_type"] == "markdown"
            and "".join(c["source"]).lstrip().startswith("## References")
            and c["metadata"]["slideshow"]["slide_type"] in ("slide", "subslide")]
    assert refs, "no '## References' slide"
    text = "".join(refs[0]["source"])
    assert len(re.findall(r"https?://", text)) >= 2, "the references slide needs links students can follow"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_no_seed_numbers_in_student_visible_text(path):
    """The course's source documents are cited by their real references (authors, title,
    year, link), never by an internal number students cannot look up."""
    hits = [i for i, c in enumerate(load(path)["cells"]) if SEED_NUMBER.search("".join(c["source"]))]
    assert hits == [], f"cells naming a seed number: {hits}"


def test_no_seed_numbers_in_printed_sources():
    """Data files and library strings that lessons print cite real references too."""
    repo = LESSONS[0].parent.parent
    files = sorted((repo / "data").glob("*.csv")) + sorted((repo / "course_lib").rglob("*.py"))
    hits = [str(f.relative_to(repo)) for f in files if SEED_NUMBER.search(f.read_text())]
    assert hits == [], f"files naming a seed number: {hits}"


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: p.name)
def test_lecture_shows_a_diagram(lesson):
    cells = load(lesson / "lecture.ipynb")["cells"]
    assert any("diagrams.show(" in "".join(c["source"]) for c in cells if c["cell_type"] == "code"), \
        "no diagram (course_lib.diagrams.show) in the lecture"


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: p.name)
def test_live_rise_folds_what_the_decks_fold(lesson):
    """Presented live (RISE in JupyterLab), a lecture shows what its offline deck shows: a code
    cell tagged hide-input-on-slides has its input collapsed (JupyterLab's source_hidden: one
    click shows it), and the slideshow uses the decks' theme and numbering. (A tall slide scrolls
    live rather than zooming: README, "For instructors".)"""
    nb = load(lesson / "lecture.ipynb")
    unfolded = [i for i, c in enumerate(nb["cells"]) if "hide-input-on-slides" in c["metadata"].get("tags", [])
                and not c["metadata"].get("jupyter", {}).get("source_hidden")]
    assert unfolded == [], f"tagged cells whose input is not collapsed: {unfolded}"
    rise = nb["metadata"].get("rise", {})
    assert rise.get("theme") == "white" and rise.get("slideNumber") == "c/t" and rise.get("scroll") is True, rise
