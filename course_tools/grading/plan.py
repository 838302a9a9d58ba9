"""Step 4 of grading: where each test cell of a lesson is judged (the plan), decided once per
lesson by grading its reference solution.

A test cell is judged by the trusted checker when the reference solution passes it there: its
checks then need nothing from the student's kernel but plain data, Numba CUDA kernels (those
cross as source and are rebuilt in the checker, ``kernel_source``) and the plain results of its
``@in_student_kernel`` probes. Every other test cell (the lesson's author has left it needing
the student's own objects) is judged in the student's kernel, guarded, and ``course grade``
warns about it; every lesson of the course is judged wholly in the checker. The plan is
checked with a second reference run when it mixes the two; if the reference then misses a
point, every cell of the lesson is judged in the kernel and the plan says why. The result is
cached in ``build/grading/<lesson>/plan.json``, keyed by a hash of the notebooks and the code
that grades them.
"""
from __future__ import annotations

import ast
import hashlib
import json
import os
from pathlib import Path

from .submission import _nb_meta, is_test_cell, restore_test_cells


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
        meta = _nb_meta(cell)
        if meta.get("solution"):
            solution |= _defined(cell.source)
        elif not meta.get("grade"):
            setup |= _defined(cell.source)
    return solution - setup


def lesson_facts(source_nb, plan: dict | None = None) -> dict:
    """What ``execute`` needs about a lesson: solution names, the instructor's setup cells
    (position in the source, code) and each test cell's position in the source."""
    setup, position = [], {}
    for pos, cell in enumerate(source_nb.cells):
        meta = _nb_meta(cell)
        if cell.cell_type == "code" and not meta.get("grade") and not meta.get("solution"):
            setup.append((pos, cell.source))
        if is_test_cell(cell):
            position[meta["grade_id"]] = pos
    return {"names": solution_names(source_nb), "setup": setup, "position": position, "plan": dict(plan or {})}


def fingerprint(source_nb, release_nb) -> str:
    """Hash of the lesson's notebooks and of the code that grades them (this package and
    every module of course_lib, whose checks and launchers the test cells call)."""
    import nbformat

    import course_lib.checks.core as core

    digest = hashlib.sha256()
    digest.update(nbformat.writes(source_nb).encode())
    digest.update(nbformat.writes(release_nb).encode())
    library = Path(core.__file__).resolve().parents[1]    # course_lib: checks, launch, counters
    for path in sorted(Path(__file__).parent.glob("*.py")) + sorted(library.rglob("*.py")):
        digest.update(path.read_bytes())
    return digest.hexdigest()


def lesson_plan(root: Path, lesson: str, source_nb, release_nb, run_reference) -> tuple[dict, str]:
    """({grade_id: "checker" | "kernel"}, a note for the grader or ""). ``run_reference(facts)``
    grades the reference solution with those facts and returns its Execution."""
    cache = root / "build" / "grading" / lesson / "plan.json"
    key = fingerprint(source_nb, release_nb)
    try:
        saved = json.loads(cache.read_text())
        if saved.get("key") == key:
            return saved["plan"], saved.get("note", "")
    except (OSError, ValueError, KeyError):
        pass
    gids = [_nb_meta(c)["grade_id"] for c in source_nb.cells if is_test_cell(c)]
    first = run_reference(lesson_facts(source_nb, {g: "checker" for g in gids}))
    plan = {g: "checker" if first.verdicts.get(g) and first.verdicts[g].passed else "kernel" for g in gids}
    note = ""
    if "kernel" in plan.values() and "checker" in plan.values():
        second = run_reference(lesson_facts(source_nb, plan))
        if not all(second.verdicts.get(g) and second.verdicts[g].passed for g in gids):
            missed = [g for g in gids if not (second.verdicts.get(g) and second.verdicts[g].passed)]
            plan = {g: "kernel" for g in gids}
            note = f"the reference missed {', '.join(missed)} with a mixed plan; every test cell runs in the kernel"
    cache.parent.mkdir(parents=True, exist_ok=True)
    tmp = cache.with_name(f"plan.{os.getpid()}.{os.urandom(3).hex()}.tmp")  # shards may write at once
    tmp.write_text(json.dumps({"key": key, "plan": plan, "note": note}, indent=1))
    tmp.replace(cache)
    return plan, note


def reference_notebook(source_nb, release_nb):
    """The reference solution as a submission (test cells and metadata as graded)."""
    nb, _ = restore_test_cells(source_nb, source_nb, release_nb)
    return nb
