"""Students who try to cheat lesson 11's multi-process allreduce (issue 16), graded in one batch
by the real grading pipeline (``grade_lesson``, sandboxed) on a scratch course. Each attack is a
submission written as a student would write it: the honest notebook with ``my_allreduce``
replaced. The allreduce check (``course_lib.checks.collectives``) is judged in the trusted
checker: it starts the worker processes that run the student's function, reads back only plain
data (``torch.load(weights_only=True)``) and computes the expected sums itself.

What is and is not enforced, honestly:

* the **values** (the sums returned and left in the tensor passed in) are judged outside every
  process that runs student code: patching the check inside a worker or inside the kernel
  changes nothing (attack ``patch_judge``), and a result file crafted by a worker runs nothing
  in the checker (attack ``crafted_result``: its payload, had it run, would have reported a
  perfect result);
* the **point-to-point-only rule** (no ``dist.all_reduce``) can only be kept inside the worker
  processes, which run the student's code: the workers replace every collective of
  ``torch.distributed`` (also when the module is imported again under another name, attack
  ``reimport``, which therefore earns 0 on the allreduce cells), but a student who digs the
  originals out (say through the dispatcher's ``torch.ops.c10d`` operators) is not stopped by
  the grader; the same holds for the hidden tests' "returns the tensor it was given" and "no
  course_lib module imported", which are observations made inside the workers;
* the workers run as the same user as the checker that starts them, so the checker makes itself
  non-dumpable before it ships student code (``launch.job_for``): a worker can then neither
  read its environment or memory nor open its pipes through ``/proc`` (attack ``forge_reply``;
  when the grader runs as root the pipes, created before the sandbox drops to its user, are
  closed to the worker by their owner as well).

Skipped where bubblewrap cannot run. The grader's canary (``integrity.guarded_test``) must never
run a kernel-judged test cell's own statements: lesson 11's ex3_hidden pushes into the
student's ``SumStore``, and a second push made the reference miss it (then every cell of the
lesson fell back to the kernel).
"""
import copy
import json

import nbformat
import pytest
from scratch_course import scratch_course

from course_tools.grading import grade_lesson, sandbox
from course_tools.grading.integrity import guarded_test
from course_tools.grading.sandbox import Limits

LESSON = "11_parameter_servers_and_collectives"
FULL = 12.0
ALLREDUCE_CELLS = ("ex4_visible", "ex4_hidden")
ALLREDUCE_POINTS = 4.0
LIMITS = Limits(cell_seconds=150, notebook_seconds=600)
pytestmark = [pytest.mark.timeout(1200),
              pytest.mark.skipif(not sandbox.bubblewrap(), reason="no sandbox: " + sandbox.why_no_sandbox())]

ATTACKS = {
    # (a) the built-in collective, through torch.distributed imported again under another name
    "reimport": (
        "def my_allreduce(tensor):\n"
        "    import torch.distributed as d\n"
        "    d.all_reduce(tensor)\n"
        "    return tensor\n"),
    # (b) the right shape, wrong values; the check rewritten in the worker and in the kernel
    "patch_judge": (
        "import course_lib.checks.collectives as _c\n"
        "_perfect = {'error': 0.0, 'in_place_error': 0.0, 'returns_input': True, 'library_modules': []}\n"
        "_c.check_allreduce = lambda *a, **k: dict(_perfect)\n"
        "\n"
        "def my_allreduce(tensor):\n"
        "    import sys\n"
        "    for name in ('course_lib.checks.collectives', '__main__'):\n"
        "        module = sys.modules.get(name)\n"
        "        if module is not None:\n"
        "            module.check_allreduce = lambda *a, **k: {'error': 0.0, 'in_place_error': 0.0,\n"
        "                                                      'returns_input': True, 'library_modules': []}\n"
        "            module._worst = lambda values: 0.0\n"
        "            module._difference = lambda got, expected: 0.0\n"
        "    tensor.mul_(3.0)\n"
        "    return tensor\n"),
    # (c) a crafted result file: a pickle that, if the checker unpickled it, would rewrite the
    #     checker's judge to report a perfect allreduce; then the worker ends before its own result
    "crafted_result": (
        "def my_allreduce(tensor):\n"
        "    import os, pickle, sys\n"
        "    class Payload:\n"
        "        def __reduce__(self):\n"
        "            code = (\"__import__('sys').modules['course_lib.checks.collectives'].__dict__.update(\"\n"
        "                    \"_raw_calls=lambda r, rank, shapes: {'calls': [], 'library_modules': []}, \"\n"
        "                    \"_worst=lambda values: 0.0) or {'calls': [], 'library_modules': []}\")\n"
        "            return (eval, (code,))\n"
        "    folder = sys.argv[1]\n"
        "    for rank in range(8):\n"
        "        for name in (f'result{rank}.pt', f'result{rank}.pkl'):\n"
        "            with open(os.path.join(folder, name), 'wb') as fh:\n"
        "                pickle.dump(Payload(), fh)\n"
        "    sys.stdout.flush()\n"
        "    os._exit(0)\n"),
    # (e) a worker (same user as the checker that started it) reads the checker's environment and
    #     writes a forged "test passed" reply into its pipes, through /proc; then a wrong value
    "forge_reply": (
        "def my_allreduce(tensor):\n"
        "    import json, os\n"
        "    forged = json.dumps({'op': 'done', 'ok': True, 'stdout': 'ok: forged'}) + '\\n'\n"
        "    seen = []\n"
        "    for pid in os.listdir('/proc'):\n"
        "        try:\n"
        "            if not pid.isdigit() or b'checker.py' not in open(f'/proc/{pid}/cmdline', 'rb').read():\n"
        "                continue\n"
        "            seen.append(open(f'/proc/{pid}/environ', 'rb').read()[:100])\n"
        "            for fd in os.listdir(f'/proc/{pid}/fd'):\n"
        "                if os.readlink(f'/proc/{pid}/fd/{fd}').startswith('pipe:'):\n"
        "                    with open(f'/proc/{pid}/fd/{fd}', 'w') as end:\n"
        "                        end.write(forged)\n"
        "        except OSError:\n"
        "            pass\n"
        "    if seen:\n"
        "        raise RuntimeError(f'got into the checker: {seen}')\n"
        "    return tensor\n"),
}


def test_the_canary_never_runs_the_cells_own_statements():
    namespace = {"_ran": []}
    probe = guarded_test("_ran.append(1)\ncheck_true('probe', True, 'a pass', 'a pass')\n", "probe", canary=True)
    with pytest.raises(Exception, match="integrity check"):
        exec(probe, namespace)  # noqa: S102 - the grader's own guard code around a probe
    assert namespace["_ran"] == []


def _cell(nb, grade_id):
    return next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


def _honest(source, blank):
    nb = copy.deepcopy(blank)
    for c in source.cells:
        meta = c.metadata.get("nbgrader", {})
        if meta.get("solution"):
            _cell(nb, meta["grade_id"]).source = "\n".join(
                ln for ln in c.source.splitlines() if "### " not in ln) + "\n"
    return nb


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("course")
    course, source = scratch_course(root, LESSON)
    src_nb = nbformat.read(str(source / LESSON / "exercises.ipynb"), as_version=4)
    blank = nbformat.read(str(root / "release" / LESSON / "exercises.ipynb"), as_version=4)
    honest = _honest(src_nb, blank)
    subs = {"honest": honest}
    for name, code in ATTACKS.items():
        nb = copy.deepcopy(honest)
        _cell(nb, "ex4_allreduce").source = code
        subs[name] = nb
    incoming = root / "incoming"
    for student, nb in subs.items():
        (incoming / student).mkdir(parents=True)
        nbformat.write(nb, str(incoming / student / "exercises.ipynb"))
    outcomes = grade_lesson(source / LESSON, course=course, submissions=incoming, workers=2, limits=LIMITS,
                            progress=False)
    plan = json.loads((root / "build" / "grading" / LESSON / "plan.json").read_text())
    graded_nbs = {o.student: nbformat.read(str(p), as_version=4)
                  for o in outcomes for p in [root / "autograded" / o.student / LESSON / "exercises.ipynb"]
                  if p.exists()}
    return {"by": {o.student: o for o in outcomes}, "plan": plan, "graded": graded_nbs}


def test_every_test_cell_the_allreduce_included_is_judged_by_the_checker(graded):
    plan = graded["plan"]
    assert plan["note"] == "", plan
    assert set(ALLREDUCE_CELLS) <= set(plan["plan"])
    assert [gid for gid, where in plan["plan"].items() if where != "checker"] == [], plan


def test_honest_work_keeps_full_marks(graded):
    o = graded["by"]["honest"]
    assert o.score == FULL, (o.score, o.reason, o.cells)


@pytest.mark.parametrize("student", sorted(ATTACKS))
def test_attacks_earn_nothing_on_the_allreduce(graded, student):
    o = graded["by"][student]
    assert o.status == "graded", (student, o.reason)
    assert {gid: o.cells[gid] for gid in ALLREDUCE_CELLS} == {gid: 0.0 for gid in ALLREDUCE_CELLS}, (student, o.cells)
    honest = graded["by"]["honest"]
    assert o.score == honest.score - ALLREDUCE_POINTS, (student, o.score, o.cells)  # the rest is honest work


def _errors(nb, grade_id) -> str:
    return "\n".join(out.get("evalue", "") for out in _cell(nb, grade_id).outputs if out.output_type == "error")


def test_each_attack_fails_for_its_own_reason(graded):
    nbs = graded["graded"]
    assert "dist.all_reduce is not allowed" in _errors(nbs["reimport"], "ex4_visible")
    assert "a largest difference below 1e-9" in _errors(nbs["patch_judge"], "ex4_visible")
    # the first rank to leave (os._exit right after planting the files) may cut a slower peer's
    # gloo set-up short ("Connection reset by peer"); either way nothing it wrote is read as a
    # result (tests/test_parallel_launch.py shows the refusal on its own, deterministically)
    crafted = _errors(nbs["crafted_result"], "ex4_visible")
    assert "was refused: only plain data" in crafted or "exited with code" in crafted, crafted[-500:]
    assert "a largest difference below 1e-9" in _errors(nbs["forge_reply"], "ex4_visible")
    assert "got into the checker" not in _errors(nbs["forge_reply"], "ex4_visible")
