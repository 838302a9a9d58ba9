"""course_lib.simt against Numba's CUDA simulator (through the oracle, tests/numba_oracle.py) on every kernel
of lessons 03 and 04: the reference solutions of the exercises (read from the notebooks, launched as
their test cells launch them), every stored wrong answer (tests/grading/wrong_answers), lesson 03's lecture
kernels and course_lib.kernels. Same outputs, same reads and writes per thread, the same races
(same message) and the same failures, but one: a cuda.syncthreads() that only part of a block's running
threads reach, which the engine reports and Numba's simulator runs (it releases a barrier once every
live thread waits at some barrier); and the engine is at least as fast on the lessons' sizes."""
import math
import time

import numpy as np
import pytest
import simt_lessons as lessons
from numba_oracle import count_accesses

from course_lib import hardware, kernels, simt

cuda = hardware.numba_cuda()   # before anything imports numba.cuda: it decides GPU or simulator
from numba import float32  # noqa: E402


def outcome(runner, kernel, grid, block, args):
    """(copies of the arguments after the launch, counts or None, exception or None, seconds)."""
    copies = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    start = time.perf_counter()
    try:
        return copies, runner(kernel, grid, block, *copies), None, time.perf_counter() - start
    except (AssertionError, IndexError, TypeError) as exc:
        return copies, None, exc, time.perf_counter() - start


def agree(kernel, grid, block, args) -> tuple[float, float]:
    """Assert that both engines agree on one launch; return (Numba seconds, engine seconds)."""
    sim_args, counts, sim_error, sim_s = outcome(count_accesses, kernel, grid, block, args)
    our_args, result, our_error, our_s = outcome(simt.run, kernel, grid, block, args)
    if isinstance(our_error, simt.DivergentBarrier):
        return sim_s, our_s
    assert type(our_error) is type(sim_error), (sim_error, our_error)
    if sim_error is not None:
        if type(sim_error).__name__ == "SharedMemoryRace":
            assert str(our_error) == str(sim_error)
        return sim_s, our_s
    assert result.counts.per_thread == counts.per_thread
    if not result.uninitialised:      # else the engine's poison shows where the simulator's zeros hide
        for ours, theirs in zip(our_args, sim_args):
            if isinstance(ours, np.ndarray):
                np.testing.assert_allclose(ours, theirs, rtol=1e-6)
    return sim_s, our_s


def cases():
    for lesson in ("03", "04"):
        wrong = lessons.wrong_answers(lesson)
        for gid in lessons.solution_cells(lesson):
            yield pytest.param(lesson, gid, -1, id=f"{lesson}-{gid}-reference")
            for k in range(len(wrong.get(gid, []))):
                yield pytest.param(lesson, gid, k, id=f"{lesson}-{gid}-wrong{k}")


TIMES: dict = {}


@pytest.mark.parametrize("lesson, gid, wrong", list(cases()))
def test_exercise_kernels_agree_with_numba(lesson, gid, wrong):
    if (lesson, gid) in lessons.NO_ORACLE:
        pytest.skip(lessons.NO_ORACLE[(lesson, gid)])
    source = lessons.solution_cells(lesson)[gid]
    if wrong >= 0:
        source = lessons.apply(source, lessons.wrong_answers(lesson)[gid][wrong])
        if source is None:
            pytest.skip("this wrong answer's edit no longer applies to the notebook's solution")
    rng = np.random.default_rng(7)
    runs = lessons.launches(lesson, gid, lessons.namespace(lesson), rng)
    if not runs:
        pytest.skip(f"a new exercise: add the launches of {gid}'s test cells to tests/simt_lessons.py")
    for name, grid, block, args in (runs if wrong < 0 else runs[:1]):
        kernel = lessons.build(lesson, source, name, f"<lesson {lesson} {gid} {wrong}>")
        times = agree(kernel, grid, block, args)
        if wrong < 0:
            TIMES[(gid, str(args[-1].shape))] = times


def test_lecture_and_library_kernels_agree_with_numba():
    rng = np.random.default_rng(8)
    lecture = lessons.lecture_kernels()
    assert {"matmul_tiled_kernel", "block_sum_kernel", "block_sum_no_barrier"} <= set(lecture)
    a, b = rng.random((16, 24)).astype(np.float32), rng.random((24, 8)).astype(np.float32)
    grid, block = kernels.grid_2d(16, 8)
    agree(lecture["matmul_tiled_kernel"], grid, block, (a, b, np.zeros((16, 8), np.float32)))
    agree(kernels.matmul_naive_kernel, grid, block, (a, b, np.zeros((16, 8), np.float32)))
    v = rng.random(300)
    agree(lecture["block_sum_kernel"], 5, 64, (v, np.zeros(5)))
    agree(lecture["block_sum_no_barrier"], 5, 64, (v, np.zeros(5)))
    agree(kernels.vector_add_kernel, 1, 128, (v[:100], v[:100], np.zeros(100)))
    x, y = rng.random((20, 3)), rng.random((13, 3))
    grid, block = kernels.grid_2d(20, 13)
    agree(kernels.squared_distance_kernel, grid, block, (x, y, np.zeros((20, 13))))
    agree(kernels.histogram_kernel, 4, 128, (rng.normal(size=500), -3.0, 3.0, np.zeros(10, np.int32)))


def test_engine_is_at_least_as_fast_as_numba_on_the_lessons_sizes():
    if len(TIMES) < 10:
        pytest.skip("run with the agreement tests above (they time both engines)")
    numba_s = sum(t[0] for t in TIMES.values())
    ours_s = sum(t[1] for t in TIMES.values())
    assert ours_s <= numba_s, f"SIMT engine {ours_s:.2f} s, Numba's simulator {numba_s:.2f} s"


POOL_SOURCE = '''@cuda.jit
def pool3_kernel(x, out):
    window = cuda.shared.array(WINDOW, float64)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    window[t + 1] = x[i] if i < x.size else 0.0
    if t == 0:
        window[0] = x[i - 1] if i > 0 else 0.0
    if t == P - 1:
        window[P + 1] = x[i + 1] if i + 1 < x.size else 0.0
    cuda.syncthreads()
    if i < x.size:
        out[i] = window[t] + window[t + 1] + window[t + 2]
'''


def test_kernels_rebuilt_by_the_grading_checker_run_too():
    """The trusted checker compiles a student's kernel from its whitelisted source; the engine reads
    that source back (from linecache) and agrees with Numba on it, race included."""
    from course_tools.grading.gpu_kernels.kernel_source import check, compile_kernel

    scope = {"P": 32, "WINDOW": 34}
    kernel = compile_kernel(check("pool3_kernel", POOL_SOURCE, False), scope)
    x = np.random.default_rng(9).random(70)
    agree(kernel, 3, 32, (x, np.zeros(70)))
    racy = compile_kernel(check("pool3_kernel", POOL_SOURCE.replace("    cuda.syncthreads()\n", ""), False), scope)
    agree(racy, 3, 32, (x, np.zeros(70)))
    result = simt.run(kernel, 3, 32, x, np.zeros(70))
    assert "line 7 reads x[i]" in result.report() or "reads x[i]" in result.report()



@cuda.jit(device=True)
def halve(v):
    if v < 0:
        return -v / 2
    return v / 2


@cuda.jit
def vocabulary(x, table, ints, out, stats):
    """Much of what the kernel whitelist allows, in one grid-stride kernel."""
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    lut = cuda.const.array_like(table)
    for i in range(start, x.size, stride):
        v = x[i]
        a, b = v, -v
        a, b = b, a
        w = float32(abs(a)) + np.float64(round(b, 2)) + math.floor(v * 3) + math.sqrt(abs(v))
        w += cuda.fma(v, 2.0, 1.0) + cuda.selp(v > 0, 1.0, -1.0) + halve(v) + min(v, 0.5, w) + max(v, -1.0)
        k = int(abs(v) * 7) % table.size
        w += lut[k] + cuda.popc(k) + cuda.clz(k + 1) + cuda.ffs(k) + cuda.brev(k) % 7
        if not (v > 0.0 and i % 2 == 0) or i == 3:
            w = -w
        out[i] = w if w == w else 0.0
        cuda.atomic.sub(stats, 0, 1)
        cuda.atomic.exch(stats, 1, 5)
        cuda.atomic.inc(ints, 0, 1000)
        cuda.atomic.dec(ints, 1, 1000)
        cuda.atomic.or_(ints, 2, k)
        cuda.atomic.xor(ints, 3, 1)
        cuda.atomic.and_(ints, 4, 7)
        cuda.atomic.nanmax(stats, 2, v)
        cuda.atomic.cas(ints, 5, 5, 100)
    cuda.threadfence()


@cuda.jit
def votes(x, out):
    t = cuda.threadIdx.x + cuda.blockDim.x * (cuda.threadIdx.y + cuda.blockDim.y * cuda.threadIdx.z)
    every = cuda.syncthreads_and(x[t] > -10.0)
    some = cuda.syncthreads_or(x[t] > 0.5)
    n = cuda.syncthreads_count(x[t] > 0.0)
    if t == 0:
        out[0] = every
        out[1] = some
        out[2] = n
    assert t >= 0


def test_the_whitelisted_vocabulary_agrees_with_numba():
    rng = np.random.default_rng(10)
    x = rng.normal(size=300)
    agree(vocabulary, 2, 64, (x, rng.integers(0, 9, 16), np.arange(8, dtype=np.int64), np.zeros(300), np.zeros(4)))
    agree(votes, 1, (4, 4, 4), (rng.normal(size=64), np.zeros(3, np.int32)))
