"""course_lib.simt: warps run under an active mask through branches, loops and early returns;
barriers, shared memory fresh per block and poisoned, local arrays, atomics, warp shuffles and
votes; schedules; the race detector catches a missing syncthreads under every schedule, and a
syncthreads that only part of a block's running threads reach is an error. Small
kernels with answers computed by NumPy."""
import numpy as np
import pytest

from course_lib import hardware, simt
from course_lib.simt.counts import SharedMemoryRace

cuda = hardware.numba_cuda()   # before anything imports numba.cuda: it decides GPU or simulator
from numba import float32, float64, int32, uint64  # noqa: E402

rng = np.random.default_rng(24)
P = 32
WINDOW = P + 2
T = 4
S = 64
FULL = 0xFFFFFFFF


@cuda.jit
def branchy(x, out):
    """Every control-flow construct a kernel may use, one answer per thread."""
    i = cuda.grid(1)
    if i >= x.size:
        return
    acc = 0.0
    for k in range(i % 5):            # a per-lane trip count
        if k == 3:
            break
        acc += x[i] * k
    n = i
    while n > 1:                      # Collatz steps, different per lane
        if n % 2 == 0:
            n //= 2
            continue
        n = 3 * n + 1
    out[i] = acc + n + (1.0 if i % 3 == 0 else -1.0)


def branchy_expected(x):
    out = np.zeros_like(x)
    for i in range(x.size):
        acc = sum(x[i] * k for k in range(min(i % 5, 3)))
        out[i] = acc + min(i, 1) + (1.0 if i % 3 == 0 else -1.0)
    return out


@cuda.jit
def pool3(x, out):
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


@cuda.jit
def pool3_no_sync(x, out):
    window = cuda.shared.array(WINDOW, float64)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    window[t + 1] = x[i] if i < x.size else 0.0
    if t == 0:
        window[0] = x[i - 1] if i > 0 else 0.0
    if t == P - 1:
        window[P + 1] = x[i + 1] if i + 1 < x.size else 0.0
    if i < x.size:
        out[i] = window[t] + window[t + 1] + window[t + 2]


@cuda.jit
def tiled(a, b, c, sync_before, sync_after):
    a_tile = cuda.shared.array((T, T), float32)
    b_tile = cuda.shared.array((T, T), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    col, row = cuda.grid(2)
    total = 0.0
    for phase in range((a.shape[1] + T - 1) // T):
        a_tile[ty, tx] = a[row, phase * T + tx] if row < a.shape[0] and phase * T + tx < a.shape[1] else 0.0
        b_tile[ty, tx] = b[phase * T + ty, col] if phase * T + ty < b.shape[0] and col < b.shape[1] else 0.0
        if sync_before:
            cuda.syncthreads()
        for k in range(T):
            total += a_tile[ty, k] * b_tile[k, tx]
        if sync_after:
            cuda.syncthreads()
    if row < c.shape[0] and col < c.shape[1]:
        c[row, col] = total


@cuda.jit
def scan(x, out, sync_middle):
    vals = cuda.shared.array(S, float64)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    vals[t] = x[i] if i < x.size else 0.0
    cuda.syncthreads()
    offset = 1
    while offset < S:
        left = vals[t - offset] if t >= offset else 0.0
        if sync_middle:
            cuda.syncthreads()
        vals[t] += left
        cuda.syncthreads()
        offset *= 2
    if i < x.size:
        out[i] = vals[t]


@cuda.jit
def warp_sum(x, out):
    """One warp-shuffle tree per warp, lane 0 adds its warp's total atomically."""
    i = cuda.grid(1)
    v = x[i] if i < x.size else 0.0
    offset = 16
    while offset > 0:
        v += cuda.shfl_down_sync(FULL, v, offset)
        offset //= 2
    if cuda.laneid == 0:
        cuda.atomic.add(out, 0, v)


@cuda.jit
def butterfly_max(x, out):
    i = cuda.grid(1)
    v = x[i]
    mask = 1
    while mask < 32:
        v = max(v, cuda.shfl_xor_sync(FULL, v, mask))
        mask *= 2
    out[i] = v


@cuda.jit
def read_unwritten(out):
    buf = cuda.shared.array(32, float64)
    t = cuda.threadIdx.x
    if t < 16:
        buf[t] = 1.0
    cuda.syncthreads()
    out[cuda.grid(1)] = buf[31 - t]


@cuda.jit
def fresh_per_block(out):
    """Block 0 fills its shared slot; block 1 only reads: it must see poison, not block 0's value."""
    buf = cuda.shared.array(1, float64)
    if cuda.blockIdx.x == 0 and cuda.threadIdx.x == 0:
        buf[0] = 7.0
    cuda.syncthreads()
    if cuda.threadIdx.x == 0:
        out[cuda.blockIdx.x] = buf[0]


@cuda.jit
def atomics(x, stats, hist):
    i = cuda.grid(1)
    if i < x.size:
        cuda.atomic.max(stats, 0, x[i])
        cuda.atomic.min(stats, 1, x[i])
        cuda.atomic.add(hist, int(x[i] * 4), 1)


@cuda.jit
def cas_lock(flag, winner):
    t = cuda.threadIdx.x
    old = cuda.atomic.cas(flag, 0, 0, t + 1)
    if old == 0:
        winner[0] = t


@cuda.jit
def local_reverse(x, out):
    i = cuda.grid(1)
    tmp = cuda.local.array(4, float64)
    for k in range(4):
        tmp[k] = x[i, k]
    for k in range(4):
        out[i, k] = tmp[3 - k]


@cuda.jit
def count_positive(x, out):
    i = cuda.grid(1)
    n = cuda.syncthreads_count(x[i] > 0.0)
    if cuda.threadIdx.x == 0:
        out[cuda.blockIdx.x] = n


@cuda.jit
def warp_reduce_shared(x, out):
    """A warp reduces through shared memory, with syncwarp between the steps (no race)."""
    buf = cuda.shared.array(32, float64)
    t = cuda.threadIdx.x
    buf[t] = x[t]
    cuda.syncwarp(FULL)
    step = 16
    while step > 0:
        if t < step:
            buf[t] += buf[t + step]
        cuda.syncwarp(FULL)
        step //= 2
    if t == 0:
        out[0] = buf[0]


@cuda.jit
def negative_index(x, out):
    i = cuda.grid(1)
    out[i] = x[i - 1]


@cuda.jit
def wrapped_index(x, out):
    i = cuda.grid(1)
    out[i] = x[uint64(i) - uint64(4)]   # lanes 0-3 wrap: 2**64 - 4 in lane 0


@cuda.jit
def huge_index(a, out):
    i = cuda.grid(1)
    out[i] = a[i, 4611686018427387903]   # in bounds for no row: 2**62 - 1


@cuda.jit(device=True)
def twice(v):
    return 2.0 * v


@cuda.jit
def uses_device_function(x, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = twice(x[i]) + math_floor_sum(x[i])


@cuda.jit(device=True)
def math_floor_sum(v):
    return v - int(v)


@pytest.mark.parametrize("schedule", simt.SCHEDULES)
def test_control_flow_per_lane(schedule):
    x = rng.random(70)
    out = np.zeros(70)
    simt.run(branchy, 3, 32, x, out, schedule=schedule, seed=3)
    np.testing.assert_allclose(out, branchy_expected(x))


def test_device_functions_run_inline():
    x = rng.random(40) * 5
    out = np.zeros(40)
    simt.run(uses_device_function, 2, 32, x, out)
    np.testing.assert_allclose(out, 2 * x + (x - np.trunc(x)))


@pytest.mark.parametrize("schedule", simt.SCHEDULES)
def test_correct_kernels_agree_under_every_schedule(schedule):
    x = rng.random(100)
    out = np.zeros(100)
    simt.run(pool3, 4, P, x, out, schedule=schedule, seed=1)
    padded = np.concatenate([[0.0], x, [0.0]])
    np.testing.assert_allclose(out, padded[:-2] + padded[1:-1] + padded[2:])
    a, b = rng.random((6, 7)).astype(np.float32), rng.random((7, 5)).astype(np.float32)
    c = np.zeros((6, 5), np.float32)
    simt.run(tiled, (2, 2), (T, T), a, b, c, True, True, schedule=schedule, seed=1)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)
    y = np.zeros(100)
    simt.run(scan, 2, S, x, y, True, schedule=schedule, seed=1)
    np.testing.assert_allclose(y, np.concatenate([np.cumsum(x[:64]), np.cumsum(x[64:])]))


@pytest.mark.parametrize("schedule", simt.SCHEDULES)
def test_missing_syncthreads_is_caught_under_every_schedule(schedule):
    x = rng.random(70)
    with pytest.raises(SharedMemoryRace, match="window"):
        simt.run(pool3_no_sync, 3, P, x, np.zeros(70), schedule=schedule, seed=5)
    a, b = rng.random((8, 8)).astype(np.float32), rng.random((8, 8)).astype(np.float32)
    for before, after in ((False, True), (True, False)):
        with pytest.raises(SharedMemoryRace, match="_tile"):
            simt.run(tiled, (2, 2), (T, T), a, b, np.zeros((8, 8), np.float32), before, after,
                     schedule=schedule, seed=5)
    with pytest.raises(SharedMemoryRace, match="vals"):
        simt.run(scan, 2, S, rng.random(100), np.zeros(100), False, schedule=schedule, seed=5)


def test_races_can_be_recorded_instead_of_raised():
    result = simt.run(scan, 1, S, rng.random(64), np.zeros(64), False, races="record")
    assert result.races and all(r.array == "vals" for r in result.races)
    assert "race in block (0)" in str(result.races[0])


def test_a_warp_shuffle_reduction_works():
    x = rng.random(100)
    out = np.zeros(1)
    result = simt.run(warp_sum, 2, 64, x, out)
    assert out[0] == pytest.approx(x.sum())
    assert result.counts.total("atomics") == 4          # one per warp
    y = rng.random(64)
    got = np.zeros(64)
    simt.run(butterfly_max, 1, 64, y, got)
    np.testing.assert_array_equal(got, np.repeat(y.reshape(2, 32).max(axis=1), 32))


def test_syncwarp_orders_the_lanes_of_a_warp():
    x = rng.random(32)
    out = np.zeros(1)
    result = simt.run(warp_reduce_shared, 1, 32, x, out)
    assert out[0] == pytest.approx(x.sum()) and not result.races


def test_shared_memory_is_poisoned_and_unwritten_reads_are_named():
    out = np.zeros(32)
    result = simt.run(read_unwritten, 1, 32, out)
    assert np.isnan(out[:16]).all() and (out[16:] == 1.0).all()
    (found,) = result.uninitialised
    assert found.array == "buf" and found.lanes == 16 and "buf[31 - t]" in str(found)


def test_shared_memory_is_fresh_per_block():
    out = np.zeros(2)
    simt.run(fresh_per_block, 2, 32, out)
    assert out[0] == 7.0 and np.isnan(out[1])


@pytest.mark.parametrize("schedule", simt.SCHEDULES)
def test_atomics(schedule):
    x = rng.random(100)
    stats = np.array([-np.inf, np.inf])
    hist = np.zeros(4, dtype=np.int64)
    result = simt.run(atomics, 4, 32, x, stats, hist, schedule=schedule, seed=2)
    assert stats[0] == x.max() and stats[1] == x.min()
    np.testing.assert_array_equal(hist, np.histogram(x, 4, (0, 1))[0])
    assert result.counts.total("atomics") == 3 * 100                 # max, min and add for every x
    assert result.counts.total("global_reads") == 3 * 100 + 3 * 100  # x[i] three times; each atomic reads
    assert result.counts.total("global_writes") == 3 * 100           # ... and writes its slot
    flag, winner = np.zeros(1, dtype=np.int64), np.full(1, -1, dtype=np.int64)
    simt.run(cas_lock, 1, 32, flag, winner, schedule=schedule, seed=2)
    assert flag[0] == winner[0] + 1 and 0 <= winner[0] < 32


def test_local_arrays_are_private_per_lane():
    x = rng.random((40, 4))
    out = np.zeros((40, 4))
    result = simt.run(local_reverse, 2, 20, x, out)
    np.testing.assert_array_equal(out, x[:, ::-1])
    assert result.counts.max_per_thread("global_reads") == 4


def test_syncthreads_count_votes_across_warps():
    x = rng.normal(size=128)
    out = np.zeros(2, dtype=np.int64)
    simt.run(count_positive, 2, 64, x, out)
    np.testing.assert_array_equal(out, (x.reshape(2, 64) > 0).sum(axis=1))


@cuda.jit
def halving_sum(x, out, sync_in_branch):
    """Block sums by halving; with ``sync_in_branch`` the barrier sits inside ``if t < step``."""
    buf = cuda.shared.array(64, float64)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    buf[t] = x[i] if i < x.size else 0.0
    cuda.syncthreads()
    step = cuda.blockDim.x // 2
    while step > 0:
        if t < step:
            buf[t] += buf[t + step]
            if sync_in_branch:
                cuda.syncthreads()
        if not sync_in_branch:
            cuda.syncthreads()
        step //= 2
    if t == 0:
        out[cuda.blockIdx.x] = buf[0]


@cuda.jit
def sync_in_if_and_else(x, out):
    """Two barriers, one for each side of a branch that splits the block between warps."""
    buf = cuda.shared.array(64, float64)
    t = cuda.threadIdx.x
    buf[t] = x[t]
    if t < 32:
        cuda.syncthreads()
    else:
        cuda.syncthreads()
    out[t] = buf[63 - t]


@cuda.jit
def count_in_branch(x, out):
    t = cuda.threadIdx.x
    if x[t] > 0.0:
        n = cuda.syncthreads_count(x[t] > 0.5)
        out[t] = n


@cuda.jit
def reverse_after_return(x, out):
    """Threads past the end of x return before the barrier; the others reverse x through shared memory."""
    buf = cuda.shared.array(96, float64)
    t = cuda.threadIdx.x
    if t >= x.size:
        return
    buf[t] = x[t]
    cuda.syncthreads()
    out[t] = buf[x.size - 1 - t]


@cuda.jit
def idle_threads_sync(x, out):
    """Only the first 8 threads of a block of 64 work, but every thread reaches both barriers."""
    buf = cuda.shared.array(8, float64)
    t = cuda.threadIdx.x
    if t < 8:
        buf[t] = x[t]
    cuda.syncthreads()
    if t < 8:
        v = buf[7 - t]
    cuda.syncthreads()
    if t < 8:
        out[t] = v


@pytest.mark.parametrize("schedule", simt.SCHEDULES)
def test_a_barrier_in_a_branch_some_threads_skip_is_an_error(schedule):
    """Issue 37: a cuda.syncthreads() inside `if t < step` is reached by part of the block's threads:
    undefined behaviour on a GPU (it can hang or let threads through early), the right answer in
    Numba's simulator; the engine names the line and how many threads reached it. At step 32 the
    upper warp skips the branch at every step and runs to its end: exited, it is not waited for;
    at step 16 the lower warp splits."""
    x = rng.random(64)
    line = halving_sum.py_func.__code__.co_firstlineno + 13    # the decorator's line + 13
    with pytest.raises(simt.DivergentBarrier, match=rf"the `cuda.syncthreads\(\)` at line {line} of halving_sum was "
                       r"reached by 16 of the block's 32 running threads \(the other 32 of its 64 have exited\); "
                       r"16 took a path that skips it \(thread \(16\) is one\)\. On a GPU .* undefined behaviour "
                       r"\(the block can hang"):
        simt.run(halving_sum, 1, 64, x, np.zeros(1), True, schedule=schedule, seed=2)
    # within one warp too (a block of 16: lanes 8-15 skip it), and whatever races= says
    with pytest.raises(simt.DivergentBarrier, match="reached by 8 of the block's 16 running threads"):
        simt.run(halving_sum, 1, 16, x, np.zeros(1), True, schedule=schedule, races="record")
    out = np.zeros(2)
    simt.run(halving_sum, 2, 64, rng.random(100), out, False, schedule=schedule, seed=2)   # the barrier outside


def test_two_barriers_on_the_two_sides_of_a_branch_are_an_error():
    with pytest.raises(simt.DivergentBarrier, match=r"reached by 32 of the block's 64 running threads; 32 wait at "
                                                     r"the `cuda.syncthreads\(\)` at line \d+ of sync_in_if_and_else "
                                                     r"instead"):
        simt.run(sync_in_if_and_else, 1, 64, rng.random(64), np.zeros(64))
    with pytest.raises(simt.DivergentBarrier, match="cuda.syncthreads_count"):
        simt.run(count_in_branch, 1, 32, rng.normal(size=32), np.zeros(32, np.int64))


@pytest.mark.parametrize("schedule", simt.SCHEDULES)
def test_threads_that_exited_are_not_waited_for(schedule):
    """As on a GPU since Volta (a barrier waits for the threads that have not exited): threads that
    returned before the barrier, a whole warp of them included, are no error, and neither is a warp
    that ends while the others sync again (the halving sum's upper warp in a block of 64)."""
    x = rng.random(40)
    out = np.zeros(40)
    simt.run(reverse_after_return, 1, 96, x, out, schedule=schedule, seed=4)   # warp 2 returns whole
    np.testing.assert_array_equal(out, x[::-1])
    out = np.zeros(8)
    simt.run(idle_threads_sync, 1, 64, x[:8], out, schedule=schedule, seed=4)
    np.testing.assert_array_equal(out, x[:8][::-1])


def test_negative_index_is_out_of_bounds():
    with pytest.raises(IndexError, match="out of bounds"):
        simt.run(negative_index, 1, 32, np.zeros(32), np.zeros(32))


def test_indices_that_wrap_past_2_to_the_64_or_are_huge_are_out_of_bounds_exactly():
    """Issue 35: bounds are checked on the index itself, never on a wrapped byte address: an
    unsigned index of 2**64 - 4 (element -4 as a wrapped pointer would read it) and an index of
    2**62 - 1 are refused, each named with its lane."""
    with pytest.raises(IndexError, match=r"index 18446744073709551612 in dimension 0 is out of bounds for an array "
                                         r"of shape \(32,\) \(lane 0;"):
        simt.run(wrapped_index, 1, 32, np.zeros(32), np.zeros(32))
    with pytest.raises(IndexError, match=r"index 4611686018427387903 in dimension 1 is out of bounds for an array "
                                         r"of shape \(32, 4\) \(lane 0;"):
        simt.run(huge_index, 1, 32, np.zeros((32, 4)), np.zeros(32))


def test_two_dimensional_blocks_with_partial_warps():
    a, b = rng.random((9, 3)).astype(np.float32), rng.random((3, 10)).astype(np.float32)
    c = np.zeros((9, 10), np.float32)
    result = simt.run(tiled, (3, 3), (T, T), a, b, c, True, True)    # 16 threads: one half-full warp
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)
    assert result.counts.threads == 9 * 16
    assert result.counts.total("global_writes") == 90


def test_schedules_make_a_race_show_in_the_values():
    """Without the barrier, the warp that runs first reads a slot the other warp has not written yet
    (poison): which output is spoiled depends on the schedule; the detector names the race under both."""
    x = rng.random(64)
    outs = {}
    for schedule in ("in_order", "reversed"):
        out = np.zeros(64)
        result = simt.run(pool3_no_sync_64, 1, 64, x, out, schedule=schedule, races="record")
        assert result.races
        outs[schedule] = out
    assert np.isnan(outs["in_order"][31]) and np.isfinite(outs["in_order"][32])
    assert np.isnan(outs["reversed"][32]) and np.isfinite(outs["reversed"][31])
    assert np.isfinite(np.delete(outs["in_order"], 31)).all()


def test_count_accesses_is_a_drop_in():
    x = rng.random(100)
    counts = simt.count_accesses(pool3, 4, P, x, np.zeros(100))
    assert counts.max_per_thread("global_reads") == 2 and counts.total("global_writes") == 100
    with pytest.raises(SharedMemoryRace):
        simt.count_accesses(pool3_no_sync, 4, P, x, np.zeros(100))


@cuda.jit
def pool3_no_sync_64(x, out):
    window = cuda.shared.array(66, float64)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    window[t + 1] = x[i] if i < x.size else 0.0
    if t == 0:
        window[0] = x[i - 1] if i > 0 else 0.0
    if t == 63:
        window[65] = x[i + 1] if i + 1 < x.size else 0.0
    if i < x.size:
        out[i] = window[t] + window[t + 1] + window[t + 2]


@cuda.jit
def keyword_arrays(out):
    buf = cuda.shared.array(shape=(2, 32), dtype=int32)
    tmp = cuda.local.array(shape=2, dtype=float64)
    t = cuda.threadIdx.x
    buf[0, t] = t
    buf[1, t] = 2 * t
    tmp[0] = t
    tmp[1] = 0.5
    cuda.syncthreads()
    out[t] = buf[0, 31 - t] + buf[1, t] + tmp[0] * tmp[1]


@cuda.jit
def calls_a_kernel(x, out):
    pool3(x, out)


def test_arrays_by_keyword_and_kernels_are_not_device_functions():
    out = np.zeros(32)
    result = simt.run(keyword_arrays, 1, 32, out)
    t = np.arange(32)
    np.testing.assert_array_equal(out, (31 - t) + 2 * t + 0.5 * t)
    assert result.shared_bytes == 2 * 32 * 4
    with pytest.raises(TypeError, match="device functions"):
        simt.run(calls_a_kernel, 1, 32, np.zeros(32), np.zeros(32))


@cuda.jit
def histogram_unzeroed(x, counts):
    bins = cuda.shared.array(4, int32)
    t = cuda.threadIdx.x
    cuda.atomic.add(bins, int(x[cuda.grid(1)] * 4), 1)
    cuda.syncthreads()
    if t < 4:
        cuda.atomic.add(counts, t, bins[t])


def test_integer_shared_memory_starts_at_a_sentinel():
    x = rng.random(64)
    counts = np.zeros(4, dtype=np.int64)
    result = simt.run(histogram_unzeroed, 1, 64, x, counts)
    expected = np.histogram(x, 4, (0, 1))[0]
    nonempty = expected > 0
    np.testing.assert_array_equal(counts[nonempty], np.iinfo(np.int32).min + expected[nonempty])
    assert result.uninitialised and result.uninitialised[0].array == "bins"
