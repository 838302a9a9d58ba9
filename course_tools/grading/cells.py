"""The notebook's cell words: what a cell is to grading, read from its nbgrader metadata, as
nbgrader's own ``nbgrader.utils`` names them (``is_grade``, ``is_solution``, ``is_locked``).

- a grade cell (``is_grade``) earns ``points``; its ``grade_id`` names it;
- a test cell (``is_test_cell``) is a grade cell of code that is no solution: the instructor's
  test, judged by the trusted checker;
- a solution cell (``is_solution``) is where the student writes;
- a locked cell (``is_locked``) is one the student may not edit.

Each word reads a cell as JSON (a dict or an nbformat node) and never raises, whatever its
metadata holds: a cell without a ``metadata.nbgrader`` mapping is a plain cell. (A student's
notebook is reduced to well-formed metadata first: ``submission.sanitise_notebook``.)
"""
from __future__ import annotations


def nbgrader_meta(cell) -> dict:
    """A cell's nbgrader metadata; {} when it has none or it is not a mapping."""
    meta = cell.get("metadata") if isinstance(cell, dict) else None
    meta = meta.get("nbgrader") if isinstance(meta, dict) else None
    return meta if isinstance(meta, dict) else {}


def grade_id(cell) -> str | None:
    """The cell's nbgrader ``grade_id``; None when it has none (or one that is not text)."""
    gid = nbgrader_meta(cell).get("grade_id")
    return gid if isinstance(gid, str) else None


def is_grade(cell) -> bool:
    """Whether the cell earns points (nbgrader's ``grade``)."""
    return bool(nbgrader_meta(cell).get("grade"))


def is_solution(cell) -> bool:
    """Whether the cell is one the student writes (nbgrader's ``solution``)."""
    return bool(nbgrader_meta(cell).get("solution"))


def is_locked(cell) -> bool:
    """Whether the student may not edit the cell (nbgrader's ``locked``)."""
    return bool(nbgrader_meta(cell).get("locked"))


def is_test_cell(cell) -> bool:
    """Whether the cell is an instructor's test: a grade cell of code that is no solution."""
    return isinstance(cell, dict) and cell.get("cell_type") == "code" and is_grade(cell) and not is_solution(cell)


def points(cell) -> float:
    """The points a grade cell is worth (0 for any other cell)."""
    return float(nbgrader_meta(cell).get("points", 0)) if is_grade(cell) else 0.0


def ids_of_test_cells(nb) -> list[str]:
    """The grade ids of a notebook's test cells, in notebook order. (Not named ``test_...``: a test
    module that imports it must not have it collected as a test.)"""
    return [grade_id(cell) for cell in nb.cells if is_test_cell(cell)]


def max_score(nb) -> float:
    """The points a notebook's grade cells are worth in all."""
    return float(sum(points(cell) for cell in nb.cells))
