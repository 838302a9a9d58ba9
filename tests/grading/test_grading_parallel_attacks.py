"""Students who try to cheat lesson 11's multi-process allreduce (issue 16), graded in one batch
by the real grading pipeline (``grade_lesson``, sandboxed) on a scratch course of the live lesson.
Each attack is a submission written as a student would write it: the blank release with only
``my_allreduce`` answered (the other exercises fail at once, with no multi-process work), so it
must earn nothing at all; ``hoard_disk``, whose checker is stopped, is the honest notebook with
``my_allreduce`` replaced, and must lose the allreduce's points and nothing else: the checker
started after it runs again the visible parts of the test cells that passed before each hidden
part (a test cell may build on an earlier one: exercise 2's second uses the first's job). The
honest notebook is the reference solution, graded once, by the plan (``reference_student``).
The allreduce check (``course_lib.checks.collectives``) is judged in the trusted
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
* **no rank can find another rank's inputs** (issue 26, attack 6: a function that walked the
  launcher's frames and ``gc.get_objects()`` found every rank's tensors there and computed the
  allreduce with no communication, 4/4): each worker now receives only its own rank's tensors,
  from the checker, after it started (``launch.PerRank``, ``rendezvous.Handoff``), drawn from a
  seed the checker draws afresh; attack ``peek`` (and ``peek`` in lesson 13's sharded step, graded
  with that step's other attacks in tests/lib/test_parallel_zero.py) finds nothing but its own and
  earns 0; workers and the fork server are non-dumpable, so ``proc_peek`` cannot open a sibling's
  or the server's memory, environment or pipes through ``/proc`` (the sandbox runs them as a user
  of its own). Ranks that exchange their tensors some other way than send/recv (files, the store)
  do communicate; that is the point-to-point rule above, kept inside the workers;
* the workers run as the same user as the checker that starts them, so the checker makes itself
  non-dumpable before it ships student code (``launch.job_for``): a worker can then neither
  read its environment or memory nor open its pipes through ``/proc`` (attack ``forge_reply``;
  when the grader runs as root the pipes, created before the sandbox drops to its user, are
  closed to the worker by their owner as well).

Skipped where bubblewrap cannot run.
"""
import copy
import json

import nbformat
import pytest
from scratch_course import not_passed_in_checker, scratch_course

from course_tools.grading import sandbox
from course_tools.grading.grade import grade_lesson
from course_tools.grading.sandbox import Limits

LESSON = "11_parameter_servers_and_collectives"
FULL = 12.0
ALLREDUCE_CELLS = ("ex4_visible", "ex4_uneven_chunks")
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
        "    for name in ('course_lib.checks.collectives', 'course_lib.checks.worker_results', '__main__'):\n"
        "        module = sys.modules.get(name)\n"
        "        if module is not None:\n"
        "            module.check_allreduce = lambda *a, **k: {'error': 0.0, 'in_place_error': 0.0,\n"
        "                                                      'returns_input': True, 'library_modules': []}\n"
        "            module.worst = lambda values: 0.0\n"
        "            module.difference = lambda got, expected: 0.0\n"
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
        "                    \"worst=lambda values: 0.0) or {'calls': [], 'library_modules': []}\")\n"
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
    # (f) no communication at all: every rank's tensors looked up in this process (the launcher's
    #     frames, gc.get_objects(), the files of the launch folder); summed when all were found
    # (g) the same through /proc: the memory, environment and pipes of a sibling rank and of the
    #     fork server (same user as this worker); a wrong value unless it got in
    "proc_peek": (
        "def my_allreduce(tensor):\n"
        "    import os\n"
        "    me, parent, reached = os.getpid(), os.getppid(), []\n"
        "    for pid in os.listdir('/proc'):\n"
        "        if not pid.isdigit() or int(pid) == me:\n"
        "            continue\n"
        "        try:\n"
        "            with open(f'/proc/{pid}/stat') as fh:\n"
        "                ppid = int(fh.read().rsplit(')', 1)[1].split()[1])\n"
        "        except (OSError, ValueError, IndexError):\n"
        "            continue\n"
        "        if ppid != parent and int(pid) != parent:\n"
        "            continue\n"
        "        for what in ('mem', 'environ', 'fd/0', 'fd/1'):\n"
        "            try:\n"
        "                os.close(os.open(f'/proc/{pid}/{what}', os.O_RDONLY | os.O_NONBLOCK))\n"
        "                reached.append(f'{pid}/{what}')\n"
        "            except OSError:\n"
        "                pass\n"
        "    if reached:\n"
        "        raise RuntimeError(f'reached a sibling or the fork server: {reached}')\n"
        "    return tensor\n"),
    "peek": (
    "def my_allreduce(tensor):\n"
    "    # no communication: find the other ranks' tensors in this process (frames, gc, files)\n"
    "    import gc, os, pickle, sys\n"
    "    world = dist.get_world_size()\n"
    "    found = {}\n"
    "\n"
    "    def look(obj, depth=0):\n"
    "        if torch.is_tensor(obj):\n"
    "            if obj.shape == tensor.shape and obj.dtype == tensor.dtype:\n"
    "                found.setdefault(tuple(obj.reshape(-1).tolist()), obj.clone())\n"
    "        elif depth < 4 and isinstance(obj, (list, tuple)):\n"
    "            for item in obj:\n"
    "                look(item, depth + 1)\n"
    "        elif depth < 4 and isinstance(obj, dict):\n"
    "            for item in list(obj.values()):\n"
    "                look(item, depth + 1)\n"
    "\n"
    "    frame = sys._getframe(1)\n"
    "    while frame is not None:\n"
    "        look(dict(frame.f_locals))\n"
    "        frame = frame.f_back\n"
    "    for obj in gc.get_objects():\n"
    "        if isinstance(obj, list) and len(obj) == world:\n"
    "            look(obj, 2)\n"
    "    for name in os.listdir(sys.argv[1]):\n"
    "        try:\n"
    "            with open(os.path.join(sys.argv[1], name), 'rb') as fh:\n"
    "                look(pickle.load(fh))\n"
    "        except Exception:\n"
    "            pass\n"
    "    if len(found) == world:\n"
    "        tensor.copy_(sum(found.values()))\n"
    "    return tensor\n"),
    # (h) issue 26, attack 5: the workers run in the checker's sandbox; each rank fills its /tmp
    #     with files under the per-file limit (800 MiB a rank against 512 MiB for the sandbox),
    #     then waits; the checker's sandbox used to have no watchdog, so nothing stopped it
    "hoard_disk": (
        "def my_allreduce(tensor):\n"
        "    import os, tempfile, time\n"
        "    for i in range(4):\n"
        "        with open(os.path.join(tempfile.gettempdir(), f'hoard-{os.getpid()}-{i}'), 'wb') as f:\n"
        "            for _ in range(25):\n"
        "                f.write(b'x' * 8 * 2**20)\n"
        "    time.sleep(20)\n"
        "    return tensor\n"),
}


# the attacks on the honest notebook (the rest of it must keep its points); the others are on the blank
ON_HONEST_WORK = ("hoard_disk",)


def _cell(nb, grade_id):
    return next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


def _answered(blank, grade_id, code):
    """The blank release with only the solution cell ``grade_id`` answered (by ``code``)."""
    nb = copy.deepcopy(blank)
    _cell(nb, grade_id).source = code
    return nb


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
        subs[name] = _answered(honest if name in ON_HONEST_WORK else blank, "ex4_allreduce", code)
    incoming = root / "incoming"
    for student, nb in subs.items():
        (incoming / student).mkdir(parents=True)
        nbformat.write(nb, str(incoming / student / "exercises.ipynb"))
    outcomes = grade_lesson(source / LESSON, course=course, submissions=incoming, workers=1, limits=LIMITS,
                            progress=False, reference_student="honest")
    plan = json.loads((root / "build" / "grading" / LESSON / "plan.json").read_text())
    graded_nbs = {o.student: nbformat.read(str(p), as_version=4)
                  for o in outcomes for p in [root / "autograded" / o.student / LESSON / "exercises.ipynb"]
                  if p.exists()}
    return {"by": {o.student: o for o in outcomes}, "plan": plan, "graded": graded_nbs, "root": root}


def test_every_test_cell_the_allreduce_included_is_judged_by_the_checker(graded):
    plan = graded["plan"]
    assert set(ALLREDUCE_CELLS) <= set(plan["passed_in_checker"]), plan
    assert not_passed_in_checker(graded["root"], LESSON) == [], plan


def test_honest_work_keeps_full_marks(graded):
    o = graded["by"]["honest"]
    assert o.score == FULL, (o.score, o.reason, o.cells)


@pytest.mark.parametrize("student", sorted(ATTACKS))
def test_attacks_earn_nothing_on_the_allreduce(graded, student):
    o = graded["by"][student]
    assert o.status == "graded", (student, o.reason)
    assert {gid: o.cells[gid] for gid in ALLREDUCE_CELLS} == {gid: 0.0 for gid in ALLREDUCE_CELLS}, (student, o.cells)
    if student in ON_HONEST_WORK:   # the rest is honest work, judged in full by the checker started after it
        honest = graded["by"]["honest"]
        assert o.score == honest.score - ALLREDUCE_POINTS, (student, o.score, o.cells)
    else:   # the blank with only the allreduce answered: nothing earned anywhere
        assert o.score == 0.0, (student, o.score, o.cells)


def _errors(nb, grade_id) -> str:
    return "\n".join(out.get("evalue", "") for out in _cell(nb, grade_id).outputs if out.output_type == "error")


def test_each_attack_fails_for_its_own_reason(graded):
    nbs = graded["graded"]
    assert "dist.all_reduce is not allowed" in _errors(nbs["reimport"], "ex4_visible")
    assert "a largest difference below 1e-9" in _errors(nbs["patch_judge"], "ex4_visible")
    # the first rank to leave (os._exit right after planting the files) may cut a slower peer's
    # gloo set-up short ("Connection reset by peer"); either way nothing it wrote is read as a
    # result (tests/lib/test_parallel_launch.py shows the refusal on its own, deterministically)
    crafted = _errors(nbs["crafted_result"], "ex4_visible")
    assert "was refused: only plain data" in crafted or "exited with code" in crafted, crafted[-500:]
    assert "a largest difference below 1e-9" in _errors(nbs["forge_reply"], "ex4_visible")
    assert "got into the checker" not in _errors(nbs["forge_reply"], "ex4_visible")
    assert "a largest difference below 1e-9" in _errors(nbs["peek"], "ex4_visible")
    assert "a largest difference below 1e-9" in _errors(nbs["proc_peek"], "ex4_visible")
    assert "reached a sibling" not in _errors(nbs["proc_peek"], "ex4_visible")
    hoard = graded["by"]["hoard_disk"]
    assert "disk limit reached" in hoard.reason and "checker's sandbox was stopped" in hoard.reason, hoard.reasons
