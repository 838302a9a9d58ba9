"""ZeRO memory model against counted tensors; ZeRO stages and FSDP2 against one process; the
sharded-step check (lesson 13, exercise 4) judged in the caller, not in the workers: directly,
and through the real grading pipeline (``grade_lesson``, sandboxed) with submissions written
as a student would write them, in one class: the honest notebook (the reference solution, graded
once, by the plan: ``reference_student``) and attacks, each the blank release with only
``sharded_momentum_step`` answered, which must earn nothing at all (the other exercises fail at
once, with no multi-process work). One of them, ``peek``, is issue 26's attack 6 on lesson 13
(see tests/grading/test_grading_parallel_attacks.py): it looks for every rank's gradient in its
own process instead of communicating, and finds only its own."""
import copy
import json
import math
import runpy
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F
from scratch_course import not_passed_in_checker, scratch_course

import course_lib
from course_lib.checks import zero as step_check
from course_lib.models import count_parameters
from course_lib.parallel import zero
from course_lib.training_memory import activation_bytes
from course_tools.grading import sandbox
from course_tools.grading.grade import grade_lesson
from course_tools.grading.sandbox import Limits


def test_zero_paper_figure_1():
    # Rajbhandari et al. 2020, Figure 1: 7.5B parameters, 64 GPUs, K = 12
    gb = [zero.memory_per_rank(7.5e9, 64, s)["total"] / 1e9 for s in range(4)]
    assert [round(g, 1) for g in gb] == [120.0, 31.4, 16.6, 1.9]


def test_stages_shard_the_right_categories():
    n, ranks = 1000, 4
    for stage in range(4):
        held = zero.memory_per_rank(n, ranks, stage, "fp32", activation_bytes=123)
        assert held["optimizer"] == (8 * n / ranks if stage >= 1 else 8 * n)
        assert held["grads"] == (4 * n / ranks if stage >= 2 else 4 * n)
        assert held["params"] == (4 * n / ranks if stage == 3 else 4 * n)
        assert held["activations"] == 123
        assert held["total"] == pytest.approx(sum(v for k, v in held.items() if k != "total"))
    with pytest.raises(ValueError):
        zero.memory_per_rank(n, ranks, 4)


def test_mixed_precision_adam_holds_what_the_formula_says():
    sizes = (16, 48, 48, 5)
    trainer = zero.MixedPrecisionAdam(zero.mlp(sizes), lr=1e-2)
    X, y = zero.make_data(1, 8, sizes)
    for _ in range(2):
        trainer.zero_grad()
        loss = F.cross_entropy(trainer.model(X.bfloat16()).float(), y)
        loss.backward()
        trainer.step()
    n = count_parameters(trainer.model)
    measured = zero.measured_bytes(trainer)
    formula = zero.memory_per_rank(n)
    for key in ("params", "grads", "optimizer"):
        assert measured[key] == formula[key], key
    assert measured["counters"] == 4 * len(list(trainer.model.parameters()))
    assert next(trainer.model.parameters()).dtype == torch.bfloat16
    # activations kept for backward: the input of every Linear, 2 bytes each
    assert activation_bytes(trainer.model, (8, 16), device="cpu") == 8 * (16 + 48 + 48) * 2


def test_gradient_precision_sets_the_bytes_per_parameter():
    # the ZeRO paper's 16 bytes assume 16-bit gradients; an fp32 gradient buffer makes 18
    n = 1000
    assert zero.memory_per_rank(n)["total"] == 16 * n
    held = zero.memory_per_rank(n, 4, 2, "mixed_fp32_grads")
    assert zero.memory_per_rank(n, precision="mixed_fp32_grads")["total"] == 18 * n
    assert (held["params"], held["grads"], held["optimizer"]) == (2 * n, 4 * n / 4, 12 * n / 4)
    # MixedPrecisionAdam makes its fp32 gradients only inside step: 2 + 2 + 4 + 12 = 20 bytes there
    sizes = (16, 48, 48, 5)
    trainer = zero.MixedPrecisionAdam(zero.mlp(sizes), lr=1e-2)
    X, y = zero.make_data(1, 8, sizes)
    in_step = []
    trainer.optimizer.register_step_pre_hook(
        lambda opt, args, kwargs: in_step.append(sum(m.grad.nbytes for m in trainer.master)))
    F.cross_entropy(trainer.model(X.bfloat16()).float(), y).backward()
    trainer.step()
    n = count_parameters(trainer.model)
    assert in_step == [4 * n]
    assert zero.measured_bytes(trainer)["grads"] + in_step[0] == 6 * n


def test_zero_stages_and_fsdp_match_one_process_and_the_formula():
    steps, sizes = 3, (16, 32, 32, 4)
    results = zero.compare(2, steps=steps, sizes=sizes, batch=4, timeout=120)
    reference = zero.reference_losses(2, steps, sizes, batch=4)
    for key in (0, 1, 2, 3, "fsdp2"):
        mean = [sum(r[key]["losses"][i] for r in results) / 2 for i in range(steps)]
        assert mean == pytest.approx(reference, abs=1e-5), key
        n = results[0][key]["n_params"]
        formula = zero.memory_per_rank(n, 2, 3 if key == "fsdp2" else key, "fp32")
        for r in results:
            for part in ("params", "grads", "optimizer"):
                assert r[key]["bytes"][part] == formula[part], (key, part)
    assert results[0]["fsdp2"]["param_types"] == ["DTensor"]



FSDP_WITH_A_GPU_IN_SIGHT = """
import os, torch, torch.distributed as dist
torch.cuda.is_available = lambda: True          # a one-GPU machine, as the ranks see it
torch.cuda.device_count = lambda: 1
torch._C._get_accelerator = lambda: torch.device("cuda")   # what FSDP2 asks when it picks a mesh itself
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=os.environ["PORT"], RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
dist.init_process_group("gloo")
from course_lib.parallel import zero
out = zero.fsdp_run(2, (8, 16, 4), 4, 1e-2, 0, torch.device("cpu"))
print(out["param_types"], len(out["losses"]))
"""


def test_fsdp_builds_its_mesh_on_the_ranks_device_when_a_gpu_is_in_sight():
    # on an H100, rank 1 of 2 gloo processes died: fully_shard without a mesh made a CUDA mesh
    # and asked for GPU 1; the ranks compute on the CPU, so the mesh must be a CPU mesh
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    done = subprocess.run([sys.executable, "-c", FSDP_WITH_A_GPU_IN_SIGHT], capture_output=True, text=True,
                          timeout=120, env={**__import__("os").environ, "PORT": str(port)})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["['DTensor']", "2"]


def sharded_sgd_step(param, grad, momentum, lr, beta):
    rank, world = dist.get_rank(), dist.get_world_size()
    n = param.numel()
    s = -(-n // world)
    padded = torch.zeros(s * world, dtype=grad.dtype)
    padded[:n] = grad
    mine = torch.empty(s, dtype=grad.dtype)
    dist.reduce_scatter_tensor(mine, padded)
    lo, hi = min(rank * s, n), min((rank + 1) * s, n)
    momentum.mul_(beta).add_(mine[:hi - lo] / world)
    update = torch.zeros(s, dtype=grad.dtype)
    update[:hi - lo] = param[lo:hi] - lr * momentum
    gathered = torch.empty(s * world, dtype=grad.dtype)
    dist.all_gather_into_tensor(gathered, update)
    param.copy_(gathered[:n])


def forgets_to_average(param, grad, momentum, lr, beta):
    rank, world = dist.get_rank(), dist.get_world_size()
    n = param.numel()
    s = -(-n // world)
    lo, hi = min(rank * s, n), min((rank + 1) * s, n)
    dist.all_reduce(grad)  # the sum of the gradients, never divided by the number of ranks
    momentum.mul_(beta).add_(grad[lo:hi])
    delta = torch.zeros(n, dtype=grad.dtype)
    delta[lo:hi] = -lr * momentum
    dist.all_reduce(delta)
    param.add_(delta)


def test_sharded_step_check_accepts_a_right_step_and_rejects_a_wrong_one():
    assert step_check.check_sharded_step(sharded_sgd_step, 3, numels=(10,)) < 1e-12
    assert step_check.check_sharded_step(forgets_to_average, 2, numels=(8,)) > 1e-3


def rewrites_the_check_in_its_worker(param, grad, momentum, lr, beta):
    """Updates nothing; rewrites the check where it runs (the worker) instead."""
    import sys
    for name in ("course_lib.checks.zero", "course_lib.checks.worker_results"):
        sys.modules[name].worst = lambda values: 0.0
        sys.modules[name].difference = lambda got, expected: 0.0
    module = sys.modules["course_lib.checks.zero"]
    module.sharded_step_reference = lambda p, grads, m, lr, beta: (p, m)
    module.check_sharded_step = lambda *a, **k: 0.0


def forges_its_result(param, grad, momentum, lr, beta):
    """Replaces what the worker sends back with the verdict the check used to return."""
    import torch
    save = torch.save
    torch.save = lambda obj, f: save(0.0, f)


def forges_the_parameters(param, grad, momentum, lr, beta):
    """Sends back the right kind of dict holding lists where the tensors should be."""
    import torch
    save = torch.save
    torch.save = lambda obj, f: save({"params": [[[0.0]] * 3], "momenta": [[[0.0]] * 3]}, f)


def step_that_makes_nan(param, grad, momentum, lr, beta):
    param[0] = float("nan")


def step_that_resizes_the_momentum(param, grad, momentum, lr, beta):
    momentum.resize_(param.numel())


def test_sharded_step_check_judges_in_the_caller():
    assert step_check.check_sharded_step(rewrites_the_check_in_its_worker, 2, numels=(8,)) > 1e-3
    with pytest.raises(step_check.MalformedResult, match="rank 0 sent back malformed data \\(not the dict"):
        step_check.check_sharded_step(forges_its_result, 2, numels=(8,))
    with pytest.raises(step_check.MalformedResult, match="rank 0 sent back malformed data \\(params\\)"):
        step_check.check_sharded_step(forges_the_parameters, 2, numels=(8,))


def test_sharded_step_check_reports_nan_and_wrong_shapes():
    assert math.isnan(step_check.check_sharded_step(step_that_makes_nan, 2, numels=(8,)))
    assert step_check.check_sharded_step(step_that_resizes_the_momentum, 2, numels=(8,)) == math.inf


def test_reference_step_is_torch_sgd_with_momentum():
    gen = torch.Generator().manual_seed(3)
    p0 = torch.randn(6, generator=gen, dtype=torch.float64)
    param = torch.nn.Parameter(p0.clone())
    opt = torch.optim.SGD([param], lr=0.1, momentum=0.9)
    mine, m = p0.clone(), torch.zeros(6, dtype=torch.float64)
    for _ in range(3):
        grads = [torch.randn(6, generator=gen, dtype=torch.float64) for _ in range(2)]
        param.grad = torch.stack(grads).mean(0)
        opt.step()
        mine, m = step_check.sharded_step_reference(mine, grads, m, 0.1, 0.9)
    assert torch.allclose(param.detach(), mine)


# ------------------------------------------------------------ graded by the real pipeline
LESSON = "13_sharding_and_model_parallelism"
STEP_CELLS = ("ex4_visible", "ex4_uneven_shards")
ATTACKS = {
    # the parameters left as they were; the check rewritten in the kernel and in every worker
    "patch_judge": (
        "from course_lib.checks import zero as _z\n"
        "_z.check_sharded_step = lambda *a, **k: 0.0\n"
        "\n"
        "def sharded_momentum_step(param, grad, momentum, lr, beta):\n"
        "    import sys\n"
        "    for name in ('course_lib.checks.zero', 'course_lib.checks.worker_results', '__main__'):\n"
        "        module = sys.modules.get(name)\n"
        "        if module is not None:\n"
        "            module.check_sharded_step = lambda *a, **k: 0.0\n"
        "            module.sharded_step_reference = lambda p, grads, m, lr, beta: (p, m)\n"
        "            module.worst = lambda values: 0.0\n"
        "            module.difference = lambda got, expected: 0.0\n"),
    # the worker's result replaced by the verdict the check returned when it judged in the workers
    "forge_result": (
        "def sharded_momentum_step(param, grad, momentum, lr, beta):\n"
        "    import torch\n"
        "    save = torch.save\n"
        "    torch.save = lambda obj, f: save(0.0, f)\n"),
}
# (f) every rank's gradient looked up in this process (the launcher's frames first, then
#     gc.get_objects()); the full momentum kept by the function itself across steps: lesson 13's stored
#     wrong answer of that name (tests/grading/wrong_answers/), here as the whole function
WRONG_ANSWERS_13 = Path(__file__).parents[1] / "grading" / "wrong_answers" / "13_sharding_and_model_parallelism.py"
PEEK = "def sharded_momentum_step(param, grad, momentum, lr, beta):\n" + next(
    new for old, new in runpy.run_path(str(WRONG_ANSWERS_13))["WRONG_ANSWERS"]["ex4_sharded_step"]
    if "find every rank's gradient in this process" in new)


def _cell(nb, grade_id):
    return next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


def _errors(nb, grade_id) -> str:
    return "\n".join(out.get("evalue", "") for out in _cell(nb, grade_id).outputs if out.output_type == "error")


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    if not sandbox.bubblewrap():
        pytest.skip("no sandbox: " + sandbox.why_no_sandbox())
    # the sandboxed kernel and checker run `python -I`: they import the installed course_lib
    installed = subprocess.run([sys.executable, "-I", "-c", "import course_lib; print(course_lib.__file__)"],
                               capture_output=True, text=True, check=False).stdout.strip()
    if Path(installed).resolve() != Path(course_lib.__file__).resolve():
        pytest.skip(f"the grading sandbox would import course_lib from {installed!r}, not from this checkout")
    root = tmp_path_factory.mktemp("course")
    course, source = scratch_course(root, LESSON)
    reference = nbformat.read(str(source / LESSON / "exercises.ipynb"), as_version=4)
    blank = nbformat.read(str(root / "release" / LESSON / "exercises.ipynb"), as_version=4)
    honest = copy.deepcopy(blank)
    for c in reference.cells:
        meta = c.metadata.get("nbgrader", {})
        if meta.get("solution"):
            _cell(honest, meta["grade_id"]).source = "\n".join(
                line for line in c.source.splitlines() if "### " not in line) + "\n"
    submissions = {"honest": honest}
    for name, code in {**ATTACKS, "peek": PEEK}.items():   # the blank with only the sharded step answered
        submissions[name] = copy.deepcopy(blank)
        _cell(submissions[name], "ex4_sharded_step").source = code
    incoming = root / "incoming"
    for student, nb in submissions.items():
        (incoming / student).mkdir(parents=True)
        nbformat.write(nb, str(incoming / student / "exercises.ipynb"))
    outcomes = grade_lesson(source / LESSON, course=course, submissions=incoming, workers=1,
                            limits=Limits(cell_seconds=150, notebook_seconds=600), progress=False,
                            reference_student="honest")
    plan = json.loads((root / "build" / "grading" / LESSON / "plan.json").read_text())
    nbs = {o.student: nbformat.read(str(p), as_version=4) for o in outcomes
           for p in [root / "autograded" / o.student / LESSON / "exercises.ipynb"] if p.exists()}
    return {"by": {o.student: o for o in outcomes}, "plan": plan, "graded": nbs, "root": root}


@pytest.mark.timeout(1200)
def test_graded_sharded_step_is_judged_by_the_checker(graded):
    plan = graded["plan"]
    assert set(STEP_CELLS) <= set(plan["passed_in_checker"]), plan
    assert not_passed_in_checker(graded["root"], LESSON) == [], plan  # every test cell
    honest = graded["by"]["honest"]
    assert honest.score == honest.max_score == 18.0, (honest.score, honest.reason, honest.cells)   # full marks
    for student in ATTACKS:
        o = graded["by"][student]
        assert o.status == "graded", (student, o.reason)
        assert {gid: o.cells[gid] for gid in STEP_CELLS} == {gid: 0.0 for gid in STEP_CELLS}, (student, o.cells)
        assert o.score == 0.0, (student, o.score, o.cells)   # nothing earned anywhere
    errors = {student: _errors(graded["graded"][student], "ex4_visible") for student in ATTACKS}
    assert "a largest difference below 1e-12" in errors["patch_judge"], errors
    assert "sent back malformed data (not the dict" in errors["forge_result"], errors


@pytest.mark.timeout(1200)
def test_a_sharded_step_that_only_looks_for_the_other_ranks_gradients_earns_nothing(graded):
    peek = graded["by"]["peek"]
    assert peek.status == "graded", peek.reason
    assert {gid: peek.cells[gid] for gid in STEP_CELLS} == {gid: 0.0 for gid in STEP_CELLS}, peek.cells
    assert peek.score == 0.0, (peek.score, peek.cells)   # the blank with only the sharded step answered
    assert "a largest difference below 1e-12" in _errors(graded["graded"]["peek"], "ex4_visible")
