"""Exercises that discriminate: plausible wrong answers lose points.

For every lesson with a fixture file ``tests/wrong_answers/<lesson>.py`` (``WRONG_ANSWERS =
{solution grade_id: [edit, ...]}``, written by the lesson's author), where each wrong answer is
the edit it makes to the reference solution cell with its ``### BEGIN/END SOLUTION`` lines
removed: ``(old, new)`` replaces the one occurrence of ``old``; a list of pairs makes several
edits in order:

* every solution cell has at least two wrong answers, and every edit still applies to the
  reference (its ``old`` text occurs exactly once);
* in ONE kernel per lesson: the reference notebook passes every graded test cell; then, for
  each wrong answer, the solution cell is replaced, the cells up to the exercise's last graded
  test cell run again (its test cells only until one fails), and at least one of that
  exercise's graded test cells must fail (a test
  cell fails as nbgrader sees it: an error, or anything written to stderr); the reference
  solution is then run again to restore the state. The blank stub of each exercise fails all
  of that exercise's graded test cells.
"""
import re
import resource
import runpy
import shutil
from pathlib import Path

import nbformat
import pytest
import torch

from course_tools.grading.submission import is_test_cell
from course_tools.paths import lesson_dirs
from course_tools.grading.student_kernel import SandboxKernel
from course_tools.grading.sandbox import Limits

FIXTURES = Path(__file__).parent / "wrong_answers"
LESSONS = lesson_dirs()
STUB = "# YOUR CODE HERE\nraise NotImplementedError()"
SOLUTION_REGION = re.compile(r"^([ \t]*)### BEGIN SOLUTION\n.*?^[ \t]*### END SOLUTION[ \t]*\n?", re.S | re.M)
MARKER_LINE = re.compile(r"^[ \t]*### (BEGIN|END) SOLUTION[ \t]*$")
# CUDA reserves far more virtual address space than it uses: with a GPU the address-space
# limit would fail the first CUDA allocation, so it is lifted there (these are the course's
# own reference solutions, not untrusted code).
LIMITS = Limits(memory_bytes=resource.RLIM_INFINITY if torch.cuda.is_available() else 16 * 2**30, processes=100_000, cpu_seconds=3600, cell_seconds=180,
                notebook_seconds=3600, output_bytes=100_000)


class EditDoesNotApply(AssertionError):
    """A stored wrong answer no longer fits the reference solution it edits."""


def without_markers(source: str) -> str:
    """A solution cell as a student would write it: the ``### BEGIN/END SOLUTION`` lines gone."""
    return "\n".join(line for line in source.splitlines() if not MARKER_LINE.match(line))


def apply_edits(reference: str, edits) -> str:
    """The reference solution (markers removed) with one wrong answer's edits made in order."""
    source = without_markers(reference)
    for old, new in [edits] if isinstance(edits, tuple) else edits:
        if source.count(old) != 1:
            raise EditDoesNotApply(f"{old!r} occurs {source.count(old)} times in the reference, not once")
        source = source.replace(old, new)
    return source + "\n"


def wrong_answers(lesson: Path) -> dict | None:
    """{grade_id: [wrong source, ...]}: the lesson's stored edits applied to its reference."""
    path = FIXTURES / f"{lesson.name}.py"
    if not path.exists():
        return None
    edits = runpy.run_path(str(path))["WRONG_ANSWERS"]
    nb = nbformat.read(str(lesson / "exercises.ipynb"), as_version=4)
    reference = {_gid(c): c.source for c in nb.cells if _is_solution(c)}
    unknown = sorted(set(edits) - set(reference))
    assert not unknown, f"{path.name}: wrong answers for unknown cells: {unknown}"
    out = {}
    for gid, answers in edits.items():
        out[gid] = []
        for n, answer in enumerate(answers):
            try:
                out[gid].append(apply_edits(reference[gid], answer))
            except EditDoesNotApply as exc:
                raise EditDoesNotApply(f"{path.name}: {gid} wrong answer #{n + 1}: {exc}") from None
    return out


def _gid(cell):
    return cell.metadata.get("nbgrader", {}).get("grade_id")


def _is_solution(cell):
    return cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("solution", False)


def blank_of(source: str) -> str:
    """A solution cell as the release has it (nbgrader's ClearSolutions, code stub)."""
    return SOLUTION_REGION.sub(lambda m: "".join(m.group(1) + ln + "\n" for ln in STUB.splitlines()), source)


def exercises(nb) -> list[dict]:
    """Groups of consecutive solution cells with the code cells after them, up to their last
    graded test cell: {"solutions": [index], "after": [index of plain code], "tests": [index]}."""
    groups, current = [], None
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        if _is_solution(cell):
            if current is None or current["tests"]:
                current = {"solutions": [], "after": [], "tests": []}
                groups.append(current)
            current["solutions"].append(i)
        elif current is not None:
            current["tests" if is_test_cell(cell) else "after"].append(i)
    for g in groups:  # plain cells after the last test belong to nobody
        g["after"] = [i for i in g["after"] if g["tests"] and i < g["tests"][-1]]
    return groups


def solution_ids(lesson: Path) -> list[str]:
    nb = nbformat.read(str(lesson / "exercises.ipynb"), as_version=4)
    return [_gid(c) for c in nb.cells if _is_solution(c)]


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: p.name)
def test_every_solution_cell_has_two_wrong_answers(lesson):
    fixture = wrong_answers(lesson)
    if fixture is None:
        pytest.skip(f"tests/wrong_answers/{lesson.name}.py does not exist yet (the lesson's author writes it)")
    ids = solution_ids(lesson)
    assert ids, "the exercises have no solution cells"
    assert set(fixture) <= set(ids), f"wrong answers for unknown cells: {sorted(set(fixture) - set(ids))}"
    short = {gid: len(fixture.get(gid, [])) for gid in ids if len(fixture.get(gid, [])) < 2}
    assert not short, f"solution cells with fewer than two wrong answers: {short}"
    for gid, answers in fixture.items():
        assert len(set(answers)) == len(answers), f"{gid}: the same wrong answer twice"


class Runner:
    """The lesson's exercises in one kernel, with the reference state restorable."""

    def __init__(self, nb, folder: Path):
        self.nb = nb
        self.kernel = SandboxKernel(folder, LIMITS, sandbox=False)
        self.kernel.start()

    def run(self, source: str) -> bool:
        """True when the code ran without an error and wrote nothing to stderr."""
        result = self.kernel.execute(source, LIMITS.cell_seconds)
        if result.status in ("timeout", "died"):
            self.restart()
            return False
        return result.status == "ok" and not any(o.get("name") == "stderr" for o in result.outputs)

    def restart(self):
        self.kernel.restart()
        for cell in self.nb.cells:
            if cell.cell_type == "code" and not is_test_cell(cell):
                self.kernel.execute(cell.source, LIMITS.cell_seconds)

    def close(self):
        self.kernel.stop()

    def tests_after(self, group: dict, replacement: dict[int, str], until_one_fails: bool = False) -> list[bool]:
        """Run the group's solution cells (``replacement`` for some), the plain cells between,
        and its test cells (with ``until_one_fails``, only until one fails: enough to know a
        wrong answer loses points); return each run test cell's pass/fail; then restore the
        reference."""
        for i in group["solutions"]:
            self.run(replacement.get(i, self.nb.cells[i].source))
        for i in group["after"]:
            self.run(self.nb.cells[i].source)
        passed = []
        for i in group["tests"]:
            passed.append(self.run(self.nb.cells[i].source))
            if until_one_fails and not passed[-1]:
                break
        for i in group["solutions"] + group["after"]:
            self.run(self.nb.cells[i].source)
        return passed


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: p.name)
def test_wrong_answers_lose_points_reference_full_blank_zero(lesson, tmp_path):
    fixture = wrong_answers(lesson)
    if fixture is None:
        pytest.skip(f"tests/wrong_answers/{lesson.name}.py does not exist yet (the lesson's author writes it)")
    nb = nbformat.read(str(lesson / "exercises.ipynb"), as_version=4)
    folder = tmp_path / lesson.name
    shutil.copytree(lesson, folder, ignore=shutil.ignore_patterns(".ipynb_checkpoints", "*.ipynb"))
    runner = Runner(nb, folder)
    try:
        failed_reference = [_gid(c) for c in nb.cells if c.cell_type == "code"
                            and not runner.run(c.source) and is_test_cell(c)]
        assert not failed_reference, f"the reference solution fails test cells {failed_reference}"
        by_id = {_gid(nb.cells[i]): (g, i) for g in exercises(nb) for i in g["solutions"]}
        undetected, blank_passing = [], []
        for group in exercises(nb):
            if not group["tests"]:
                continue
            blank = runner.tests_after(group, {i: blank_of(nb.cells[i].source) for i in group["solutions"]})
            if any(blank):
                blank_passing.append([_gid(nb.cells[i]) for i, ok in zip(group["tests"], blank) if ok])
        for gid, answers in fixture.items():
            group, index = by_id[gid]
            for n, source in enumerate(answers):
                if all(runner.tests_after(group, {index: source}, until_one_fails=True)):
                    undetected.append(f"{gid} wrong answer #{n + 1}")
        assert not blank_passing, f"test cells that pass with the blank stub: {blank_passing}"
        assert not undetected, f"wrong answers that keep full marks: {undetected}"
    finally:
        runner.close()


def test_exercise_grouping_and_blank_stub():
    nb = nbformat.v4.new_notebook()
    meta = lambda gid, sol, grade: {"nbgrader": {"grade_id": gid, "solution": sol, "grade": grade,  # noqa: E731
                                                 "points": 1 if grade else 0}}
    nb.cells = [nbformat.v4.new_code_cell("import x"),
                nbformat.v4.new_code_cell("def f():\n    ### BEGIN SOLUTION\n    return 1\n    ### END SOLUTION",
                                          metadata=meta("s1", True, False)),
                nbformat.v4.new_code_cell("y = f()"),
                nbformat.v4.new_code_cell("assert y", metadata=meta("t1", False, True)),
                nbformat.v4.new_code_cell("z = 2"),
                nbformat.v4.new_code_cell("g = 1", metadata=meta("s2", True, False)),
                nbformat.v4.new_code_cell("assert g", metadata=meta("t2", False, True))]
    groups = exercises(nb)
    assert groups == [{"solutions": [1], "after": [2], "tests": [3]},
                      {"solutions": [5], "after": [], "tests": [6]}]
    assert blank_of(nb.cells[1].source) == "def f():\n    # YOUR CODE HERE\n    raise NotImplementedError()\n"


def test_wrong_answers_are_stored_as_edits():
    for path in sorted(FIXTURES.glob("*.py")):
        assert path.read_text().startswith("# format: edits"), f"{path.name} is not in the edit format"
    reference = "def f(x):\n    ### BEGIN SOLUTION\n    y = x + 1\n    return y * 2\n    ### END SOLUTION"
    assert apply_edits(reference, ("x + 1", "x - 1")) == "def f(x):\n    y = x - 1\n    return y * 2\n"
    assert apply_edits(reference, [("x + 1", "x"), ("y * 2", "y")]) == "def f(x):\n    y = x\n    return y\n"
    with pytest.raises(EditDoesNotApply, match="occurs 0 times"):
        apply_edits(reference, ("x + 2", "x"))
    with pytest.raises(EditDoesNotApply, match="occurs 2 times"):
        apply_edits(reference, ("y", "z"))
