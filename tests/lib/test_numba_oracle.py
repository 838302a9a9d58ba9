"""The oracle that proves the SIMT engine (tests/numba_oracle.py, on Numba's own simulator) is
itself right: per-thread counts match hand counts, shared-memory races are
found (and named) whatever order the simulator ran the threads in, every block gets fresh
zeroed shared memory, out-of-bounds indices raise, every atomic counts as an atomic and as the
read and the write it makes (issue 26). Test data is random."""
import inspect

import numpy as np
import pytest
from numba import float32, float64
from numba_oracle import count_accesses

from course_lib import hardware
from course_lib.simt.counts import ACCESS_KINDS, SharedMemoryRace

cuda = hardware.numba_cuda()   # before anything imports numba.cuda: it decides GPU or simulator
from numba.cuda.simulator.kernel import FakeCUDAKernel  # noqa: E402
from numba.cuda.simulator.kernelapi import FakeCUDAShared  # noqa: E402

rng = np.random.default_rng(11)
TPB = 32
WINDOW = TPB + 2   # a constant: Numba compiles shared array sizes as constants
TILE = 4


@cuda.jit
def pool3(x, out):
    """out[i] = x[i-1] + x[i] + x[i+1] (0 outside x), the block's slice and a one-element
    halo on each side staged in shared memory."""
    buf = cuda.shared.array(WINDOW, float64)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    if i < x.size:
        buf[t + 1] = x[i]
    if t == 0:
        buf[0] = x[i - 1] if i > 0 else 0.0
    if t == TPB - 1:
        buf[TPB + 1] = x[i + 1] if i + 1 < x.size else 0.0
    cuda.syncthreads()
    if i < x.size:
        out[i] = buf[t] + buf[t + 1] + buf[t + 2]


@cuda.jit
def pool3_no_sync(x, out):
    buf = cuda.shared.array(WINDOW, float64)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    if i < x.size:
        buf[t + 1] = x[i]
    if t == 0:
        buf[0] = x[i - 1] if i > 0 else 0.0
    if t == TPB - 1:
        buf[TPB + 1] = x[i + 1] if i + 1 < x.size else 0.0
    if i < x.size:
        out[i] = buf[t] + buf[t + 1] + buf[t + 2]


@cuda.jit
def pool3_no_guard(x, out):
    i = cuda.grid(1)
    out[i] = x[i - 1] + x[i] + x[i + 1]


@cuda.jit
def block_sum(x, partial, sync_each_step):
    buf = cuda.shared.array(TPB, float64)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    buf[t] = x[i] if i < x.size else 0.0
    cuda.syncthreads()
    stride = TPB // 2
    while stride > 0:
        if t < stride:
            buf[t] += buf[t + stride]
        if sync_each_step:
            cuda.syncthreads()
        stride //= 2
    if t == 0:
        partial[cuda.blockIdx.x] = buf[0]


@cuda.jit
def all_write_one_slot(x, out, atomic):
    buf = cuda.shared.array(1, float64)
    i = cuda.grid(1)
    if atomic:
        cuda.atomic.add(buf, 0, x[i])
    else:
        buf[0] = x[i]
    cuda.syncthreads()
    if cuda.threadIdx.x == 0:
        out[cuda.blockIdx.x] = buf[0]


@cuda.jit
def zero_then_add(x, out, sync):
    """Thread 0 zeroes a shared slot, every thread adds to it atomically."""
    acc = cuda.shared.array(1, float64)
    if cuda.threadIdx.x == 0:
        acc[0] = 0.0
    if sync:
        cuda.syncthreads()
    cuda.atomic.add(acc, 0, x[cuda.threadIdx.x])
    cuda.syncthreads()
    if cuda.threadIdx.x == 0:
        out[0] = acc[0]


@cuda.jit
def read_before_write(out):
    """Block 0 stores 7 in its shared slot; every block reports what its slot held first."""
    buf = cuda.shared.array(1, float64)
    out[cuda.blockIdx.x] = buf[0]
    if cuda.blockIdx.x == 0:
        buf[0] = 7.0


@cuda.jit
def tiled_matmul(a, b, c):
    sa = cuda.shared.array((TILE, TILE), float32)
    sb = cuda.shared.array((TILE, TILE), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    col, row = cuda.grid(2)
    total = 0.0
    for p in range((a.shape[1] + TILE - 1) // TILE):
        sa[ty, tx] = a[row, p * TILE + tx] if row < a.shape[0] and p * TILE + tx < a.shape[1] else 0.0
        sb[ty, tx] = b[p * TILE + ty, col] if p * TILE + ty < b.shape[0] and col < b.shape[1] else 0.0
        cuda.syncthreads()
        for k in range(TILE):
            total += sa[ty, k] * sb[k, tx]
        cuda.syncthreads()
    if row < c.shape[0] and col < c.shape[1]:
        c[row, col] = total


def expected_pool(x):
    padded = np.concatenate([[0.0], x, [0.0]])
    return padded[:-2] + padded[1:-1] + padded[2:]


def test_pooling_with_syncthreads_is_right_and_counted():
    x = rng.random(75)
    out = np.zeros(75)
    counts = count_accesses(pool3, 3, TPB, x, out)
    np.testing.assert_allclose(out, expected_pool(x))
    assert counts.races == []
    assert counts.threads == 3 * TPB
    assert counts.total("global_writes") == 75
    assert counts.max_per_thread("global_reads") == 2            # own element + one halo element
    assert counts.of_thread((1,), (5,)) == {"global_reads": 1, "global_writes": 1, "shared_reads": 3,
                                            "shared_writes": 1, "atomics": 0, "shared_atomics": 0}


def test_pooling_without_syncthreads_fails_with_a_race_message():
    x = rng.random(75)
    with pytest.raises(SharedMemoryRace) as info:
        count_accesses(pool3_no_sync, 3, TPB, x, np.zeros(75))
    message = str(info.value)
    assert "shared-memory race in block (0)" in message
    assert "thread (0) writes buf[1] and thread (1) reads it" in message
    assert "cuda.syncthreads()" in message
    # the same report every time, whatever order the OS ran the simulated threads in
    again = count_accesses(pool3_no_sync, 3, TPB, x, np.zeros(75), races="record").races
    assert str(again[0]) in message and len(again) > 1


def test_reduction_missing_a_barrier_races_and_correct_one_matches_hand_count():
    v = rng.random(50)
    with pytest.raises(SharedMemoryRace, match=r"buf\[\d+\]"):
        count_accesses(block_sum, 2, TPB, v, np.zeros(2), False)
    partial = np.zeros(2)
    counts = count_accesses(block_sum, 2, TPB, v, partial, True)
    np.testing.assert_allclose(partial, [v[:32].sum(), v[32:].sum()])
    # thread 0: 1 global read, 1 shared write; 5 halving steps of 2 shared reads + 1 write;
    # 1 shared read and 1 global write at the end
    assert counts.of_thread((0,), (0,)) == {"global_reads": 1, "global_writes": 1, "shared_reads": 11,
                                            "shared_writes": 6, "atomics": 0, "shared_atomics": 0}
    assert counts.of_thread((1,), (31,))["global_reads"] == 0    # past the end of v: reads nothing


def test_write_write_conflict_unless_atomic():
    x = rng.random(8)
    with pytest.raises(SharedMemoryRace, match=r"thread \(0\) writes buf\[0\] and thread \(1\) also writes it.*atomic"):
        count_accesses(all_write_one_slot, 1, 8, x, np.zeros(1), False)
    out = np.zeros(1)
    counts = count_accesses(all_write_one_slot, 1, 8, x, out, True)
    assert out[0] == pytest.approx(x.sum())
    assert counts.total("shared_atomics") == 8 and counts.total("atomics") == 0 and counts.races == []


def test_atomics_mixed_with_a_plain_write_race():
    x = rng.random(8)
    with pytest.raises(SharedMemoryRace, match=r"thread \(1\) updates acc\[0\] atomically and thread \(0\) writes it"):
        count_accesses(zero_then_add, 1, 8, x, np.zeros(1), False)
    out = np.zeros(1)
    count_accesses(zero_then_add, 1, 8, x, out, True)
    assert out[0] == pytest.approx(x.sum())


def test_every_block_gets_fresh_zeroed_shared_memory_unlike_the_plain_simulator():
    out = np.full(3, -1.0)
    count_accesses(read_before_write, 3, 1, out)
    np.testing.assert_array_equal(out, [0.0, 0.0, 0.0])
    # numba 0.68's plain simulator: one shared array per launch and source line, handed to
    # every block in turn (blocks run one after another), allocated with np.empty
    plain = np.full(3, -1.0)
    FakeCUDAKernel(read_before_write.py_func, device=False)[3, 1](plain)
    np.testing.assert_array_equal(plain[1:], [7.0, 7.0])
    assert "np.empty(shape, dtype)" in inspect.getsource(FakeCUDAShared.array)


def test_out_of_bounds_index_raises_even_when_negative():
    x = rng.random(40)
    with pytest.raises(IndexError, match=r"index \(-1,\) is out of bounds"):
        count_accesses(pool3_no_guard, 2, TPB, x, np.zeros(40))


def test_tiled_matmul_counts_match_the_hand_count():
    a = rng.random((8, 12)).astype(np.float32)
    b = rng.random((12, 8)).astype(np.float32)
    c = np.zeros((8, 8), dtype=np.float32)
    counts = count_accesses(tiled_matmul, (2, 2), (TILE, TILE), a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)
    phases = 12 // TILE
    assert counts.of_thread((1, 0), (3, 2)) == {"global_reads": 2 * phases, "global_writes": 1,
                                                "shared_reads": 2 * TILE * phases,
                                                "shared_writes": 2 * phases, "atomics": 0, "shared_atomics": 0}
    assert counts.races == []


def test_bad_arguments():
    with pytest.raises(ValueError):
        count_accesses(pool3, 1, TPB, rng.random(4), np.zeros(4), races="ignore")
    counts = count_accesses(pool3, 1, TPB, rng.random(4), np.zeros(4))
    with pytest.raises(KeyError):
        counts.total("texture_reads")
    assert set(counts.summary()) == set(ACCESS_KINDS)


@cuda.jit
def row_total_through_a_slice(a, out):
    """Sums row i of ``a`` through a slice view: accesses the counter would not see."""
    i = cuda.grid(1)
    if i < a.shape[0]:
        row = a[i]
        total = 0.0
        for j in range(a.shape[1]):
            total += row[j]
        out[i] = total


def test_a_slice_is_refused_rather_than_left_uncounted():
    a = rng.random((4, 3))
    with pytest.raises(TypeError, match="slice; read one element at a time"):
        count_accesses(row_total_through_a_slice, 1, 4, a, np.zeros(4))


@cuda.jit
def read_through_atomics(x, out):
    """out[i] = x[i], read with an atomic add of 0 (issue 26: an atomic is not a free read)."""
    i = cuda.grid(1)
    if i < x.size:
        out[i] = cuda.atomic.add(x, i, 0.0)


@cuda.jit
def shared_max_of_block(x, out):
    """Every thread updates one shared slot with atomic.max, thread 0 publishes it."""
    best = cuda.shared.array(1, float64)
    t = cuda.threadIdx.x
    if t == 0:
        best[0] = -1.0
    cuda.syncthreads()
    cuda.atomic.max(best, 0, x[t])
    cuda.syncthreads()
    if t == 0:
        out[0] = best[0]


def test_an_atomic_counts_as_a_read_and_a_write_of_its_slot():
    x = rng.random(40)
    out = np.zeros(40)
    counts = count_accesses(read_through_atomics, 1, 64, x, out)
    np.testing.assert_array_equal(out, x)
    assert counts.of_thread((0,), (3,)) == {"global_reads": 1, "global_writes": 2, "shared_reads": 0,
                                            "shared_writes": 0, "atomics": 1, "shared_atomics": 0}
    assert counts.total("global_reads") == 40 and counts.total("atomics") == 40
    assert counts.of_thread((0,), (50,))["global_reads"] == 0          # past the end: nothing


def test_every_atomic_op_is_counted_and_is_no_race_among_atomics():
    x = rng.random(16)
    out = np.zeros(1)
    counts = count_accesses(shared_max_of_block, 1, 16, x, out)
    assert out[0] == x.max() and counts.races == []
    assert counts.total("shared_atomics") == 16
    assert counts.of_thread((0,), (5,)) == {"global_reads": 1, "global_writes": 0, "shared_reads": 1,
                                            "shared_writes": 1, "atomics": 0, "shared_atomics": 1}
