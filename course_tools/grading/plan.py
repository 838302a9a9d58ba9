"""Step 4 of grading: the lesson's one judge, checked once per lesson. Every test cell is judged
by the trusted checker; before any student is graded, the lesson's reference solution is graded
there, and a lesson whose reference misses a point is refused (one line naming the cells: the
instructor's to fix, e.g. by passing plain data to the student's functions or wrapping what needs
the student's kernel in ``@in_student_kernel``). A passing check is cached in
``build/grading/<lesson>/plan.json``, keyed by a hash of the notebooks and the code that grades
them, with the test cells the reference passed there (every one: a miss is refused).
"""
from __future__ import annotations

import ast
import hashlib
import json
import os
from pathlib import Path

from .cells import grade_id, ids_of_test_cells, is_grade, is_solution, is_test_cell
from .submission import restore_test_cells


def _defined(source: str) -> set[str]:
    """Top-level names a cell binds by def, class or assignment (imports not counted)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
    return names


def solution_names(source_nb) -> set[str]:
    """The names the student provides: defined at top level by the solution cells and not by
    the instructor's setup cells (those, and every import, the checker has itself)."""
    solution, setup = set(), set()
    for cell in source_nb.cells:
        if cell.cell_type != "code":
            continue
        if is_solution(cell):
            solution |= _defined(cell.source)
        elif not is_grade(cell):
            setup |= _defined(cell.source)
    return solution - setup


def lesson_facts(source_nb) -> dict:
    """What ``execute`` needs about a lesson: solution names, the instructor's setup cells
    (position in the source, code), those of them before the first solution cell (``opening``:
    code no student wrote or can reach) and each test cell's position in the source."""
    setup, position, solved = [], {}, False
    opening = []
    for pos, cell in enumerate(source_nb.cells):
        solved = solved or (cell.cell_type == "code" and is_solution(cell))
        if cell.cell_type == "code" and not is_grade(cell) and not is_solution(cell):
            setup.append((pos, cell.source))
            if not solved:
                opening.append(cell.source)
        if is_test_cell(cell):
            position[grade_id(cell)] = pos
    return {"names": solution_names(source_nb), "setup": setup, "opening": opening, "position": position}


def fingerprint(source_nb, blank_nb) -> str:
    """Hash of the lesson's notebooks (the source and the grader's student version) and of the
    code that grades them (this package and every module of course_lib, whose checks and
    launchers the test cells call)."""
    import nbformat

    import course_lib.checks.core as core

    digest = hashlib.sha256()
    digest.update(nbformat.writes(source_nb).encode())
    digest.update(nbformat.writes(blank_nb).encode())
    library = Path(core.__file__).resolve().parents[1]    # course_lib: checks, launch, counters
    for path in sorted(Path(__file__).parent.rglob("*.py")) + sorted(library.rglob("*.py")):
        digest.update(path.read_bytes())
    return digest.hexdigest()


def lesson_plan(root: Path, lesson: str, source_nb, blank_nb, run_reference) -> list[str]:
    """The lesson's test cells (grade ids, in notebook order) once the reference solution passes
    every one of them in the trusted checker (``run_reference(facts)`` grades it and returns its
    Execution); raises ``GradingError`` naming the cells it misses otherwise. The check is cached
    in ``plan.json``: its key and those cells (``passed_in_checker``)."""
    from .nbgrader_course import GradingError

    cache = root / "build" / "grading" / lesson / "plan.json"
    key = fingerprint(source_nb, blank_nb)
    try:
        saved = json.loads(cache.read_text())
        if saved.get("key") == key:
            return saved["passed_in_checker"]
    except (OSError, ValueError, KeyError):
        pass
    gids = ids_of_test_cells(source_nb)
    reference = run_reference(lesson_facts(source_nb))
    missed = [g for g in gids if not (reference.verdicts.get(g) and reference.verdicts[g].passed)]
    if missed:
        why = "; ".join(reference.notes[:2])
        raise GradingError(f"the reference solution of {lesson} fails test cell(s) {', '.join(missed)} in the trusted "
                           f"checker{' (' + why + ')' if why else ''}, so no student is graded: every test cell must "
                           "pass for the reference (pass plain data to the student's functions, or wrap what needs "
                           "the student's kernel in @in_student_kernel)")
    cache.parent.mkdir(parents=True, exist_ok=True)
    tmp = cache.with_name(f"plan.{os.getpid()}.{os.urandom(3).hex()}.tmp")  # shards may write at once
    tmp.write_text(json.dumps({"key": key, "passed_in_checker": gids}, indent=1))
    tmp.replace(cache)
    return gids


def reference_notebook(source_nb, blank_nb):
    """The reference solution as a submission (test cells and metadata as graded; ``blank_nb``
    is the grader's student version)."""
    nb, _ = restore_test_cells(source_nb, source_nb, blank_nb)
    return nb
