"""Exercises that discriminate: plausible wrong answers lose points, judged by the trusted
checker that grades students.

For every lesson with a fixture file ``tests/grading/wrong_answers/<lesson>.py``, written by the
lesson's author: ``WRONG_ANSWERS = {solution grade_id: [edit, ...]}`` (plausible mistakes) and
``LIBRARY_CALLS = {solution grade_id: edit}`` (the answer of a student who calls the closest
``course_lib`` function instead of doing the exercise), where each answer is the edit it makes
to the reference solution cell with its ``### BEGIN/END SOLUTION`` lines removed: ``(old, new)``
replaces the one occurrence of ``old``; a list of pairs makes several edits in order:

* every solution cell has at least two wrong answers and one library call, and every edit
  still applies to the reference (its ``old`` text occurs exactly once);
* per lesson, ONE submission is graded by ``course grade``'s own ``execute_submission`` (student
  cells in a student kernel, every test cell judged in the trusted checker): the reference
  notebook, where after each exercise's last test cell come, for each wrong answer, the blank
  stub and the library call, the exercise's cells again with the answer in place, a test cell
  that judges it by the exercise's test cells (``judged_once``: their visible parts, then, where
  there are hidden tests, the whole cells with the hidden tests in place; it stops at the first
  failure, one lost test cell being what is asserted), then the reference cells again to restore
  the state; after the blank stub, copies of every test cell (their hidden tests run in place;
  each copy has its own grade_id). The reference passes every test cell, every wrong answer or
  library call fails its judging cell, and the blank fails every copy, each with one line saying
  which function or kernel is not answered yet and the test cell's lines (what the student's
  feedback shows; no traceback of the checker or the library).

None of the reference's own cells may raise either: this trial is the exercises notebook's test
under ``make test`` (the root conftest keeps nbval from running the same notebook again; ``pytest
notebooks/NN_name/exercises.ipynb`` still runs one through nbval, in a plain kernel).

The submission runs in the grader's sandbox (bubblewrap, the student's kernel and the checker
each as a sandbox user) where it can run, as ``course grade`` runs it, so the reference's full
marks here are also the proof that every test cell of the lesson passes in the checker in the
sandbox (the plan ``course grade`` computes first; its refusal of a failing reference is tested
in test_grading_plans.py). The limits are wider than a class's (the trial notebook runs every
exercise several times; a loaded test machine is slower).
"""
import os
import re
import resource
import runpy
import shutil
import tempfile
from pathlib import Path

import nbformat
import pytest
import torch

from course_tools.grading import kept_templates
from course_tools.grading.cells import is_test_cell
from course_tools.grading.checker_process import import_statements
from course_tools.grading.execute import execute_submission
from course_tools.grading.plan import lesson_facts
from course_tools.grading.sandbox import Limits, bubblewrap, sandbox_uid
from course_tools.grading.segments import split_hidden
from course_tools.paths import lesson_dirs

FIXTURES = Path(__file__).parent / "wrong_answers"
LESSONS = lesson_dirs()
STUB = "# YOUR CODE HERE\nraise NotImplementedError()"
SOLUTION_REGION = re.compile(r"^([ \t]*)### BEGIN SOLUTION\n.*?^[ \t]*### END SOLUTION[ \t]*\n?", re.S | re.M)
MARKER_LINE = re.compile(r"^[ \t]*### (BEGIN|END) SOLUTION[ \t]*$")
HIDDEN_MARKER = re.compile(r"^[ \t]*### (BEGIN|END) HIDDEN TESTS[ \t]*\n?", re.M)
# CUDA reserves far more virtual address space than it uses: with a GPU the address-space
# limit would fail the first CUDA allocation, so it is lifted there (these are the course's
# own reference solutions, not untrusted code).
LIMITS = Limits(memory_bytes=resource.RLIM_INFINITY if torch.cuda.is_available() else 16 * 2**30, processes=100_000,
                cpu_seconds=3600, cell_seconds=180, notebook_seconds=3600, output_bytes=100_000,
                gpu=torch.cuda.is_available())


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


def wrong_answers(lesson: Path, kind: str = "WRONG_ANSWERS") -> dict | None:
    """{grade_id: [wrong source, ...]}: the lesson's stored edits (``WRONG_ANSWERS``, or
    ``LIBRARY_CALLS``: one per cell) applied to its reference; None without a fixture file."""
    path = FIXTURES / f"{lesson.name}.py"
    if not path.exists():
        return None
    edits = runpy.run_path(str(path)).get(kind, {})
    if kind == "LIBRARY_CALLS":
        edits = {gid: [edit] for gid, edit in edits.items()}
    nb = nbformat.read(str(lesson / "exercises.ipynb"), as_version=4)
    reference = {_gid(c): c.source for c in nb.cells if _is_solution(c)}
    unknown = sorted(set(edits) - set(reference))
    assert not unknown, f"{path.name}: {kind} for unknown cells: {unknown}"
    out = {}
    for gid, answers in edits.items():
        out[gid] = []
        for n, answer in enumerate(answers):
            try:
                out[gid].append(apply_edits(reference[gid], answer))
            except EditDoesNotApply as exc:
                raise EditDoesNotApply(f"{path.name}: {kind} {gid} #{n + 1}: {exc}") from None
    return out


def _said(verdict) -> str:
    """What a test cell's verdict showed (its error lines), for a failure message."""
    if verdict is None:
        return "no verdict: the cell did not run"
    return " | ".join(f"{o.get('ename', '')}: {o.get('evalue', '')}" if o.get("output_type") == "error"
                      else str(o.get("text", ""))[-300:] for o in verdict.outputs)[-600:]


def _said_by(outputs) -> str:
    """The first error among a cell's outputs, in one line."""
    error = next(o for o in outputs if o.get("output_type") == "error")
    return f"{error.get('ename', '')}: {error.get('evalue', '')}"[-300:]


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
        pytest.skip(f"tests/grading/wrong_answers/{lesson.name}.py does not exist yet (the lesson's author writes it)")
    ids = solution_ids(lesson)
    assert ids, "the exercises have no solution cells"
    assert set(fixture) <= set(ids), f"wrong answers for unknown cells: {sorted(set(fixture) - set(ids))}"
    short = {gid: len(fixture.get(gid, [])) for gid in ids if len(fixture.get(gid, [])) < 2}
    assert not short, f"solution cells with fewer than two wrong answers: {short}"
    for gid, answers in fixture.items():
        assert len(set(answers)) == len(answers), f"{gid}: the same wrong answer twice"


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: p.name)
def test_every_solution_cell_has_a_library_call_answer(lesson):
    """For each exercise, the answer of a student who calls the closest ``course_lib``
    function is stored (and must lose points, below): no exercise is one call into the library."""
    fixture = wrong_answers(lesson, "LIBRARY_CALLS")
    if fixture is None:
        pytest.skip(f"tests/grading/wrong_answers/{lesson.name}.py does not exist yet (the lesson's author writes it)")
    missing = [gid for gid in solution_ids(lesson) if gid not in fixture]
    assert not missing, f"solution cells without a LIBRARY_CALLS answer: {missing}"


def _copy(cell, source: str | None = None, grade_id: str | None = None):
    """A copy of a cell (new id), with another source or, for a test cell, another grade_id
    and its hidden tests run in place."""
    new = nbformat.v4.new_code_cell(cell.source if source is None else source, metadata=dict(cell.metadata))
    if grade_id:
        new.metadata = {**cell.metadata, "nbgrader": {**cell.metadata["nbgrader"], "grade_id": grade_id}}
        new.source = HIDDEN_MARKER.sub("", new.source)
    return new


def judged_once(tests: list) -> str:
    """One test cell's source that judges an answer by every test cell of its exercise and stops
    at the first failure: the cells' visible parts in order (as the grader runs them), then, if
    the exercise has hidden tests, the whole cells in order with their hidden tests in place. So
    an answer that fails a visible test never pays for a hidden one, and one that passes every
    visible test is judged by the whole cells as the grader judges them."""
    parts = [split_hidden(t.source) for t in tests]
    sources = [visible for visible, _ in parts]
    if any(hidden for _, hidden in parts):
        sources += [HIDDEN_MARKER.sub("", t.source) for t in tests]
    return "\n".join(source.rstrip() + "\n" for source in sources)


def trial_notebook(nb, answers: dict[str, list[tuple[str, str]]]):
    """The reference notebook with, after each exercise's last test cell, one trial per answer
    (``{solution grade_id: [(label, source), ...]}``): the exercise's solution cells (one
    replaced), its plain cells, one test cell that runs its test cells (``judged_once``; grade_id
    ``<first test's id>~<label>``), then its solution and plain cells again as the reference has
    them. An answer needs to lose only one test cell, so it is judged until the first that
    fails. Returns (notebook, {label: [copied test grade_ids]})."""
    trials, cells = {}, []
    groups = {g["tests"][-1]: g for g in exercises(nb) if g["tests"]}
    for index, cell in enumerate(nb.cells):
        cells.append(cell)
        group = groups.get(index)
        if group is None:
            continue
        restore = [nb.cells[i] for i in group["solutions"] + group["after"]]
        first, tests = nb.cells[group["tests"][0]], judged_once([nb.cells[j] for j in group["tests"]])
        for i in group["solutions"]:
            for label, source in answers.get(_gid(nb.cells[i]), []):
                for j in group["solutions"]:
                    cells.append(_copy(nb.cells[j], source if j == i else None))
                cells += [_copy(nb.cells[j]) for j in group["after"]]
                trials[label] = [f"{_gid(first)}~{label}"]
                cells.append(_copy(first, tests, grade_id=trials[label][0]))
                cells += [_copy(c) for c in restore]
    trial = nbformat.v4.new_notebook(metadata=nb.metadata)
    trial.cells = cells
    return trial, trials


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: p.name)
def test_wrong_answers_lose_points_reference_full_blank_zero(lesson):
    fixture = wrong_answers(lesson)
    if fixture is None:
        pytest.skip(f"tests/grading/wrong_answers/{lesson.name}.py does not exist yet (the lesson's author writes it)")
    library = wrong_answers(lesson, "LIBRARY_CALLS") or {}
    nb = nbformat.read(str(lesson / "exercises.ipynb"), as_version=4)
    answers: dict[str, list] = {}
    for gid, sources in fixture.items():
        answers.setdefault(gid, []).extend((f"wrong{n + 1}-{gid}", src) for n, src in enumerate(sources))
    for gid, sources in library.items():
        answers.setdefault(gid, []).append((f"library-{gid}", sources[0]))
    trial, trials = trial_notebook(nb, answers)
    blanks = blank_trials(nb, trial, trials)
    number = {id(c): n + 1 for n, c in enumerate(nb.cells)}   # the reference's own cells, by their place in it
    originals = [i for i, c in enumerate(trial.cells) if id(c) in number]
    ex = _run_trial(lesson, trial)
    passed = {gid: v.passed for gid, v in ex.verdicts.items()}
    failed_reference = [_gid(c) for c in nb.cells if is_test_cell(c) and not passed.get(_gid(c))]
    assert not failed_reference, (f"the reference solution fails test cells {failed_reference}: {ex.notes[:3]}; "
                                  f"they said: {[_said(ex.verdicts.get(g)) for g in failed_reference]}")
    raised = [f"cell {number[id(trial.cells[i])]}: {_said_by(ex.outputs[i])}" for i in originals
              if trial.cells[i].cell_type == "code" and not is_test_cell(trial.cells[i])
              and any(o.get("output_type") == "error" for o in ex.outputs.get(i, []))]
    assert not raised, f"cells of the reference that raise (the exercises' notebook test): {raised}"
    kept_marks = [label for label, gids in trials.items()
                  if label not in blanks and all(passed.get(g) for g in gids)]
    blank_passing = [g for label in blanks for g in trials[label] if passed.get(g)]
    assert not blank_passing, f"test cells that pass with the blank stub: {blank_passing}"
    assert not kept_marks, f"wrong answers (or library calls) that keep full marks: {kept_marks}"
    unclear = {g: lines for label in blanks for g in trials[label] if (lines := unclear_blank_failure(ex.verdicts[g]))}
    assert not unclear, f"blank test cells whose feedback does not say in one line what is not answered: {unclear}"


MAX_FAILURE_LINES = 4   # the message and at most three of the test cell's lines


def unclear_blank_failure(verdict) -> list[str]:
    """The error lines of a blank exercise's failed test cell as its feedback shows them, unless
    they are one line naming what is not answered yet and the test cell's own lines (the
    checker's "line N: ..."); [] when they are."""
    errors = [o for o in verdict.outputs if o.get("output_type") == "error"]
    if not errors:
        return ["no error shown"]
    shown = errors[0]["traceback"]
    short = len(shown) <= MAX_FAILURE_LINES and all(re.match(r"line \d+: ", line) for line in shown[1:])
    return [] if short and "is not answered yet" in shown[0] else shown


def _run_trial(lesson: Path, trial):
    """The trial notebook graded by ``execute_submission`` (the checker judging every test cell),
    in the sandbox when bubblewrap runs here, with the lesson's files as the submission folder, by a
    served checker and kernel borrowed as ``course grade`` borrows them for a slot
    (``kept_templates``: the templates the last lesson of this process gave back, each lesson's
    imports added, so every lesson is also graded on the path a class takes)."""
    sandboxed = bool(bubblewrap())
    # a short scratch path: the kernel's Unix sockets live under it (108 bytes at most)
    scratch = Path(tempfile.mkdtemp(prefix="course-wrong-"))
    facts = lesson_facts(trial)
    imports = import_statements(code for _, code in facts["setup"])
    checker = kept_templates.lend("checker", LIMITS, imports, 0, sandboxed)
    kernel = kept_templates.lend("kernel", LIMITS, imports, 0, sandboxed)
    try:
        folder = kernel.prepare()
        shutil.copytree(lesson, folder, ignore=shutil.ignore_patterns(".ipynb_checkpoints", "*.ipynb"),
                        dirs_exist_ok=True)
        uid = sandbox_uid(0) if sandboxed else None
        if uid is not None:   # the student's files belong to the sandbox user, as course grade gives them
            for path in [folder, *folder.rglob("*")]:
                os.chown(path, uid, uid, follow_symlinks=False)
        return execute_submission(trial, folder, LIMITS, facts, slot=0, sandbox=sandboxed, scratch=scratch,
                                  checker=checker, kernel=kernel)
    finally:
        kept_templates.take_back(kernel)
        kept_templates.take_back(checker)
        shutil.rmtree(scratch, ignore_errors=True)


def blank_trials(nb, trial, trials: dict) -> set[str]:
    """Adds to ``trial`` a blank trial per exercise (every solution cell of the exercise the
    release's stub) after its last test cell; returns their labels."""
    labels = set()
    groups = exercises(nb)
    ends = {id(nb.cells[g["tests"][-1]]): g for g in groups if g["tests"]}
    cells = []
    for cell in trial.cells:
        cells.append(cell)
        group = ends.get(id(cell))
        if group is None:
            continue
        label = f"blank-{_gid(nb.cells[group['solutions'][0]])}"
        labels.add(label)
        trials[label] = []
        cells += [_copy(nb.cells[j], blank_of(nb.cells[j].source)) for j in group["solutions"]]
        cells += [_copy(nb.cells[j]) for j in group["after"]]
        for j in group["tests"]:
            trials[label].append(f"{_gid(nb.cells[j])}~{label}")
            cells.append(_copy(nb.cells[j], grade_id=trials[label][-1]))
        cells += [_copy(nb.cells[j]) for j in group["solutions"] + group["after"]]
    trial.cells = cells
    return labels


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


def test_judged_once_runs_every_visible_part_before_the_hidden_tests():
    cells = [nbformat.v4.new_code_cell("assert a\n### BEGIN HIDDEN TESTS\nassert b\n### END HIDDEN TESTS"),
             nbformat.v4.new_code_cell("assert c\n")]
    assert judged_once(cells) == "assert a\n\nassert c\n\nassert a\nassert b\n\nassert c\n"
    assert judged_once(cells[1:]) == "assert c\n"
