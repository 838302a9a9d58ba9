"""course_lib.simt's traffic model on kernels with known answers: sectors per warp access (coalesced
copy 4, stride-32 read 32), shared-memory bank conflicts (a column of a 32x32 float32 tile 32-way,
the padded tile 1, a broadcast 1), divergence (an even/odd branch leaves half the lanes idle), the
report's sentences, occupancy against the cited limits, and the predicted time's parts."""
import numpy as np
import pytest

from course_lib import hardware, simt
from course_lib.simt import occupancy
from course_lib.simt import prediction as predict

cuda = hardware.numba_cuda()   # before anything imports numba.cuda: it decides GPU or simulator
from numba import float32, float64  # noqa: E402

W = 32
PAD = W + 1


@cuda.jit
def copy(a, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[i]


@cuda.jit
def stride32(a, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[i * 32]


@cuda.jit
def transpose_naive(a, out):
    x, y = cuda.grid(2)
    if y < out.shape[0] and x < out.shape[1]:
        out[y, x] = a[x, y]


@cuda.jit
def tile_column(out, column):
    tile = cuda.shared.array((W, W), float32)
    t = cuda.threadIdx.x
    for r in range(W):
        tile[r, t] = r * W + t
    cuda.syncthreads()
    out[t] = tile[t, column]


@cuda.jit
def padded_column(out, column):
    tile = cuda.shared.array((W, PAD), float32)
    t = cuda.threadIdx.x
    for r in range(W):
        tile[r, t] = r * W + t
    cuda.syncthreads()
    out[t] = tile[t, column]


@cuda.jit
def broadcast(out):
    tile = cuda.shared.array((W, W), float32)
    t = cuda.threadIdx.x
    tile[0, t] = t
    cuda.syncthreads()
    out[t] = tile[0, 5]


@cuda.jit
def float64_rows(out):
    buf = cuda.shared.array(64, float64)
    t = cuda.threadIdx.x
    buf[t] = t
    cuda.syncthreads()
    out[t] = buf[t]


@cuda.jit
def even_odd(out):
    i = cuda.grid(1)
    if i % 2 == 0:
        out[i] = 1.0
    else:
        out[i] = 2.0


@cuda.jit
def halves(out):
    i = cuda.grid(1)
    if i < 32:
        out[i] = 1.0
    else:
        out[i] = 2.0


def site(result, array, how="reads"):
    found = [s for s in result.traffic.sites.values() if s.array == array and s.verb == how]
    assert len(found) == 1, found
    return found[0]


def test_a_coalesced_float32_copy_moves_4_sectors_per_warp_access():
    a = np.arange(256, dtype=np.float32)
    out = np.zeros(256, np.float32)
    result = simt.run(copy, 2, 128, a, out)
    np.testing.assert_array_equal(out, a)
    for s in (site(result, "a"), site(result, "out", "writes")):
        assert (s.sectors_per_access, s.ideal_per_access, s.efficiency) == (4, 4, 1.0)
        assert s.lines == s.warp_accesses == 8 and s.stride == 1
    assert result.traffic.global_efficiency == 1.0


def test_a_stride_32_read_moves_32_sectors_per_warp_access():
    a = np.arange(64 * 32, dtype=np.float32)
    out = np.zeros(64, np.float32)
    result = simt.run(stride32, 1, 64, a, out)
    np.testing.assert_array_equal(out, a[::32])
    s = site(result, "a")
    assert (s.sectors_per_access, s.ideal_per_access, s.stride) == (32, 4, 32)
    assert s.efficiency == pytest.approx(4 / 32)
    assert "32 sectors per warp where 4 would do" in s.sentence()


def test_the_report_names_line_array_and_pattern():
    a = np.arange(64 * 64, dtype=np.float32).reshape(64, 64)
    out = np.zeros_like(a)
    result = simt.run(transpose_naive, (2, 8), (32, 8), a, out)
    np.testing.assert_array_equal(out, a.T)
    line = transpose_naive.py_func.__code__.co_firstlineno + 4
    expected = (f"line {line} reads a[x, y]: 32 sectors per warp where 4 would do (12 % of the bytes moved "
                "are used): threads of a warp step along a column")
    assert expected in result.report()
    assert f"line {line} writes out[y, x]: 4 sectors per warp, as few as possible" in result.report()


def test_a_column_of_a_32x32_float32_tile_is_a_32_way_conflict():
    out = np.zeros(W, np.float32)
    result = simt.run(tile_column, 1, W, out, 3)
    np.testing.assert_array_equal(out, np.arange(W) * W + 3)
    write, read = site(result, "tile", "writes"), site(result, "tile")
    assert write.max_degree == 1 and write.efficiency == 1.0        # rows: one word per bank
    assert read.max_degree == 32 and read.wavefronts == 32 and read.ideal_wavefronts == 1
    assert read.pattern() == "threads of a warp step along a column"


def test_the_padded_tile_has_no_conflict():
    out = np.zeros(W, np.float32)
    result = simt.run(padded_column, 1, W, out, 3)
    np.testing.assert_array_equal(out, np.arange(W) * W + 3)
    read = site(result, "tile")
    assert read.max_degree == 1 and read.wavefronts == 1 and read.stride == PAD


def test_a_broadcast_is_no_conflict():
    out = np.zeros(W, np.float32)
    result = simt.run(broadcast, 1, W, out)
    assert (out == 5).all()
    read = site(result, "tile")
    assert read.max_degree == 1 and read.stride == 0 and "broadcast" in read.pattern()


def test_float64_rows_take_two_half_warp_passes_without_conflict():
    out = np.zeros(64)
    result = simt.run(float64_rows, 1, 64, out)
    read = site(result, "buf")
    assert read.max_degree == 1 and read.wavefronts == 2 * read.warp_accesses == read.ideal_wavefronts


def test_an_even_odd_branch_leaves_half_the_lanes_idle():
    result = simt.run(even_odd, 2, 64, np.zeros(128))
    (branch,) = result.traffic.divergent_branches()
    assert branch.divergent == branch.warps == 4 and branch.idle_fraction == 0.5
    assert "splits 4 of 4 warps; 50 % of the lanes are idle" in branch.sentence()
    whole_warps = simt.run(halves, 2, 64, np.zeros(128))
    assert not whole_warps.traffic.divergent_branches()              # i < 32 splits no warp
    assert whole_warps.traffic.idle_fraction == 0.0 < result.traffic.idle_fraction


def test_recording_can_be_switched_off():
    result = simt.run(copy, 2, 128, np.ones(256, np.float32), np.zeros(256, np.float32), traffic=False)
    assert result.traffic is None and result.counts.total("global_reads") == 256


def test_occupancy_against_the_cited_limits():
    assert occupancy.occupancy("NVIDIA H100 SXM5", 256).fraction == 1.0
    small = occupancy.occupancy("NVIDIA H100 SXM5", 32)
    assert (small.blocks_per_sm, small.fraction, small.limiter) == (32, 0.5, "blocks per SM")
    big = occupancy.occupancy("NVIDIA A100 SXM4 80GB", 1024, 100 * 1024)
    assert (big.blocks_per_sm, big.fraction, big.limiter) == (1, 0.5, "shared memory per SM")
    regs = occupancy.occupancy("NVIDIA GeForce RTX 4090", 256, 0, registers_per_thread=128)
    assert regs.limiter == "registers per SM" and regs.blocks_per_sm == 2
    assert "on an NVIDIA GeForce RTX 4090" in regs.sentence()
    assert all(r["source"] for r in occupancy.gpu_limits())


N = 8 * 1024


@pytest.fixture(scope="module")
def copies():
    """The coalesced and the stride-32 copy of N float32 values, 256 threads per block."""
    return (simt.run(copy, N // 256, 256, np.ones(N, np.float32), np.zeros(N, np.float32)),
            simt.run(stride32, N // 256, 256, np.ones(32 * N, np.float32), np.zeros(N, np.float32)))


@pytest.mark.parametrize("gpu", predict.GPUS)
def test_prediction_parts_follow_the_traffic(gpu, copies):
    n = N
    good, bad = predict.predict(copies[0], gpu), predict.predict(copies[1], gpu)
    assert good.moved_bytes == good.useful_bytes == good.cached_bytes == 2 * n * 4
    assert bad.moved_bytes == (32 + 4) * 32 * (n // 32)
    assert bad.transfers["DRAM"] / good.transfers["DRAM"] == pytest.approx(36 / 8)
    rates = predict.pipe_rates(gpu)
    assert good.transfers["DRAM"] == pytest.approx(good.moved_bytes / (rates["dram"] * good.sm_fraction))
    # one load per warp either way: the stride-32 copy has 8 times the bytes in flight, the same wait
    assert bad.bytes_in_flight_per_sm == 8 * good.bytes_in_flight_per_sm and bad.latency_s == good.latency_s
    assert good.memory_s == pytest.approx(good.transfers["DRAM"] + good.latency_s)
    assert good.pipes["L2"] == pytest.approx(good.uncached_bytes / (rates["l2"] * good.sm_fraction))
    assert (good.l1_lines, bad.l1_lines) == (2 * n // 32, (1 + 32) * n // 32)      # lines per warp: 1 + 1, 1 + 32
    assert good.shared_passes == bad.shared_passes == 0 and good.pipes["shared memory"] == 0
    # the launch cost is reported apart, never the kernel's own time
    assert good.launch_s == pytest.approx(10e-6) and good.bound != "launch overhead"
    assert good.seconds == max(good.pipes.values()) < good.launch_s
    assert good.with_launch_s == pytest.approx(good.seconds + good.launch_s)
    assert bad.seconds > good.seconds and gpu in good.sentence() and "to launch it" in good.sentence()


TILE = 32
ROWS = 8


@cuda.jit
def transpose_tiled(a, out):
    """Through a shared tile: both global accesses walk along rows."""
    tile = cuda.shared.array((TILE, TILE), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    x = cuda.blockIdx.x * TILE + tx
    y = cuda.blockIdx.y * TILE + ty
    for r in range(0, TILE, ROWS):
        tile[ty + r, tx] = a[y + r, x]
    cuda.syncthreads()
    x = cuda.blockIdx.y * TILE + tx
    y = cuda.blockIdx.x * TILE + ty
    for r in range(0, TILE, ROWS):
        out[y + r, x] = tile[tx, ty + r]


@cuda.jit
def transpose_padded(a, out):
    tile = cuda.shared.array((TILE, TILE + 1), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    x = cuda.blockIdx.x * TILE + tx
    y = cuda.blockIdx.y * TILE + ty
    for r in range(0, TILE, ROWS):
        tile[ty + r, tx] = a[y + r, x]
    cuda.syncthreads()
    x = cuda.blockIdx.y * TILE + tx
    y = cuda.blockIdx.x * TILE + ty
    for r in range(0, TILE, ROWS):
        out[y + r, x] = tile[tx, ty + r]


@cuda.jit
def reduce_interleaved(x, out):
    buf = cuda.shared.array(128, float64)
    t = cuda.threadIdx.x
    buf[t] = x[cuda.grid(1)]
    cuda.syncthreads()
    s = 1
    while s < 128:
        if t % (2 * s) == 0:
            buf[t] += buf[t + s]
        cuda.syncthreads()
        s *= 2
    if t == 0:
        out[cuda.blockIdx.x] = buf[0]


@cuda.jit
def reduce_sequential(x, out):
    buf = cuda.shared.array(128, float64)
    t = cuda.threadIdx.x
    buf[t] = x[cuda.grid(1)]
    cuda.syncthreads()
    s = 64
    while s > 0:
        if t < s:
            buf[t] += buf[t + s]
        cuda.syncthreads()
        s //= 2
    if t == 0:
        out[cuda.blockIdx.x] = buf[0]


def test_transposes_naive_tiled_and_padded():
    a = np.arange(64 * 64, dtype=np.float32).reshape(64, 64)
    results = {}
    for name, kernel, block in (("naive", transpose_naive, (32, 8)), ("tiled", transpose_tiled, (TILE, ROWS)),
                                ("padded", transpose_padded, (TILE, ROWS))):
        out = np.zeros_like(a)
        grid = (2, 8) if name == "naive" else (2, 2)
        results[name] = simt.run(kernel, grid, block, a, out).traffic.summary()
        np.testing.assert_array_equal(out, a.T)
    assert results["naive"]["global_sector_efficiency"] == pytest.approx((4 + 4) / (4 + 32))
    assert results["tiled"]["global_sector_efficiency"] == results["padded"]["global_sector_efficiency"] == 1.0
    assert results["tiled"]["max_bank_conflict"] == 32 and results["padded"]["max_bank_conflict"] == 1


def test_interleaved_reduction_diverges_where_sequential_does_not():
    x = np.arange(256, dtype=np.float64)
    found = {}
    for name, kernel in (("interleaved", reduce_interleaved), ("sequential", reduce_sequential)):
        out = np.zeros(2)
        found[name] = simt.run(kernel, 2, 128, x, out).traffic
        np.testing.assert_array_equal(out, x.reshape(2, 128).sum(axis=1))
    inter, seq = found["interleaved"].summary(), found["sequential"].summary()
    assert inter["divergent_warp_branches"] > seq["divergent_warp_branches"]
    assert inter["idle_lane_fraction"] > seq["idle_lane_fraction"]
    # sequential addressing splits warp 0 only, at s = 16, 8, 4, 2, 1 and at `if t == 0`: 6 per block
    assert seq["divergent_warp_branches"] == 2 * 6


def test_a_simulated_slice_predicts_the_full_size(copies):
    """Scaling a small launch: the 8k-element copy predicts a 64M-element one, bound by memory, and
    the stride-32 version of it moves 4.5 times the bytes through DRAM on every GPU, waiting as long."""
    scale = 64 * 2**20 / N
    for gpu in predict.GPUS:
        good, bad = (predict.predict(r, gpu, scale=scale) for r in copies)
        assert good.sm_fraction == 1.0 and good.bound == bad.bound == "DRAM"
        assert good.transfers["DRAM"] == pytest.approx(2 * 4 * 64 * 2**20 / predict.pipe_rates(gpu)["dram"])
        assert bad.transfers["DRAM"] / good.transfers["DRAM"] == pytest.approx(36 / 8)
        assert bad.latency_s == good.latency_s and bad.seconds == pytest.approx(bad.transfers["DRAM"] + bad.latency_s)
    with pytest.raises(ValueError):
        predict.predict(copies[0], predict.GPUS[0], scale=0.5)


def test_the_estimate_uses_the_cached_bound_only_when_the_footprint_fits_in_l2():
    a = np.arange(64 * 64, dtype=np.float32).reshape(64, 64)
    naive = simt.run(transpose_naive, (2, 8), (32, 8), a, np.zeros_like(a))
    small = predict.predict(naive, "NVIDIA H100 SXM5")
    assert small.cached_bytes == 2 * a.nbytes < small.uncached_bytes == (32 + 4) * 32 * (a.size // 32)
    assert small.moved_bytes == small.cached_bytes            # 32 KB fit in a 50 MB L2
    big = predict.predict(naive, "NVIDIA H100 SXM5", scale=(4096 / 64) ** 2)    # 2 x 64 MB do not
    assert big.moved_bytes == big.uncached_bytes > big.l2_bytes
    assert big.cached_seconds < big.seconds == big.uncached_seconds
