"""The README says what the course is: its lesson table's graded solution cells and points are
each lesson's exercises' own (read from their nbgrader metadata), and its quick start says who
runs which command, `make test` being the documented test command."""
import json
import re

from course_tools.paths import NOTEBOOKS, REPO

README = (REPO / "README.md").read_text()
ROW = re.compile(r"^\| (\d\d) \|.*\| (\d+)(?: cells)?, (\d+(?:\.\d+)?) \|$", re.MULTILINE)


def graded(lesson) -> tuple[int, float]:
    """(solution cells, points of the graded cells) of a lesson's exercises.ipynb."""
    notebook = json.loads((lesson / "exercises.ipynb").read_text())
    cells = [c.get("metadata", {}).get("nbgrader", {}) for c in notebook["cells"]]
    return sum(bool(m.get("solution")) for m in cells), sum(m.get("points", 0) for m in cells if m.get("grade"))


def test_lesson_table_counts_each_lessons_solution_cells_and_points():
    table = {number: (int(cells), float(points)) for number, cells, points in ROW.findall(README)}
    lessons = {lesson.name[:2]: graded(lesson) for lesson in sorted(NOTEBOOKS.glob("[0-9][0-9]_*"))}
    assert sorted(table) == sorted(lessons), "the lesson table's rows are not the lessons in notebooks/"
    stale = {n: f"README says {table[n][0]} cells, {table[n][1]:g} points; the notebook has {c}, {p:g}"
             for n, (c, p) in lessons.items() if table[n] != (c, p)}
    assert not stale, stale


def test_quick_start_says_who_runs_which_command():
    block = re.search(r"## Quick start\n.*?```sh\n(.*?)```", README, re.DOTALL).group(1)
    commands = [line.split("#")[0].strip() for line in block.splitlines()]
    assert commands == ["make lab", "make course", "make test"], commands
    roles = [line.split("#", 1)[1].split(":")[0].strip() for line in block.splitlines()]
    assert roles == ["student", "instructor, grader", "developer"], roles
