"""course_lib.kernels: results equal NumPy's (also for sizes that are not multiples of the
block), and the simulated access counts match counts made by hand."""
import numpy as np
import pytest
from numba import float64

from course_lib import kernels
from course_lib.simt.counts import ACCESS_KINDS, SharedMemoryRace

rng = np.random.default_rng(42)


def test_blocks_and_grids():
    assert kernels.blocks_for(1000, 128) == 8
    assert kernels.blocks_for(1024, 128) == 8
    assert kernels.blocks_for(1, 128) == 1
    assert kernels.blocks_for(0, 128) == 1
    assert kernels.grid_1d(300, 64) == (5, 64)
    assert kernels.grid_2d(10, 13, (4, 4)) == ((4, 3), (4, 4))  # x over 13 columns, y over 10 rows
    with pytest.raises(ValueError):
        kernels.blocks_for(10, 0)


@pytest.mark.parametrize("n", [1, 127, 128, 300])
def test_vector_add(n):
    a, b = rng.random(n), rng.random(n)
    np.testing.assert_allclose(kernels.vector_add(a, b, threads_per_block=128), a + b)
    with pytest.raises(ValueError):
        kernels.vector_add(a, rng.random(n + 1))


@pytest.mark.parametrize("m,n,d", [(8, 8, 3), (13, 9, 3), (5, 17, 1), (3, 3, 6)])
def test_launch_squared_distance(m, n, d):
    x, y = rng.random((m, d)), rng.random((n, d))
    expected = ((x[:, None, :] - y[None, :, :]) ** 2).sum(-1)
    np.testing.assert_allclose(kernels.launch_squared_distance(x, y), expected, rtol=1e-12)
    np.testing.assert_allclose(kernels.launch_squared_distance(x), ((x[:, None] - x[None]) ** 2).sum(-1), atol=1e-12)
    with pytest.raises(ValueError):
        kernels.launch_squared_distance(x, rng.random((n, d + 1)))


def test_device_arrays_stay_on_the_device_and_out_is_reused():
    x = rng.random((12, 3))
    x_dev = kernels.cuda.to_device(x)
    out_dev = kernels.cuda.device_array((12, 12))
    got = kernels.launch_squared_distance(x_dev, x_dev, out=out_dev)
    assert got is out_dev                       # returned where it is: no copy to the host
    np.testing.assert_allclose(out_dev.copy_to_host(), ((x[:, None] - x[None]) ** 2).sum(-1), atol=1e-12)
    with pytest.raises(ValueError):
        kernels.launch_squared_distance(x_dev, x_dev, out=kernels.cuda.device_array((12, 5)))


cuda = kernels.cuda


@cuda.jit
def shift_left(x, out):
    buf = cuda.shared.array(16, float64)
    t = cuda.threadIdx.x
    buf[t] = x[t]
    out[t] = buf[(t + 1) % 16]          # reads a neighbour's slot with no barrier


def test_simulated_launches_are_checked_for_races_and_bounds():
    if kernels.numba_cuda_mode() != "simulator":
        pytest.skip("the checked launch is the simulator's")
    with pytest.raises(SharedMemoryRace, match="race in block"):
        kernels.launch(shift_left, 1, 16, (rng.random(16), np.zeros(16)))
    with pytest.raises(IndexError, match="out of bounds"):   # 32 threads, 16 elements, no guard
        kernels.launch(shift_left, 1, 32, (rng.random(16), np.zeros(16)))


@pytest.mark.parametrize("shape", [(8, 8, 8), (13, 11, 10), (1, 5, 1), (9, 3, 17)])
def test_naive_matmul_equals_numpy(shape):
    m, k, n = shape
    a = rng.random((m, k)).astype(np.float32)
    b = rng.random((k, n)).astype(np.float32)
    np.testing.assert_allclose(kernels.matmul_naive(a, b), a @ b, rtol=1e-5)
    with pytest.raises(ValueError):
        kernels.matmul_naive(a, rng.random((k + 1, n)))


@pytest.mark.parametrize("n,bins", [(200, 7), (129, 1), (500, 16)])
def test_histogram_equals_numpy(n, bins):
    v = rng.normal(size=n)
    v[0] = 2.0  # exactly the upper edge: counted in the last bin, like NumPy
    np.testing.assert_array_equal(kernels.histogram(v, bins, -2.0, 2.0), np.histogram(v, bins, (-2.0, 2.0))[0])
    with pytest.raises(ValueError):
        kernels.histogram(v, bins, 1.0, 1.0)


def test_naive_matmul_counts_match_hand_count():
    a = rng.random((16, 16)).astype(np.float32)
    b = rng.random((16, 16)).astype(np.float32)
    c, counts = kernels.matmul_naive(a, b, count=True)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)
    assert counts.threads == 256
    # one output each: a row of a (16) and a column of b (16) read, one write
    assert counts.max_per_thread("global_reads") == 32 == kernels.matmul_global_reads_per_thread(16, tiled=False)
    assert counts.total("global_reads") == 256 * 32
    assert counts.total("global_writes") == 256
    assert counts.total("shared_reads") == counts.total("shared_writes") == 0


def test_hand_counts_of_the_tiled_matmul():
    # the lecture's tiled kernel (and tests/lib/test_numba_oracle.py) check these against counts
    assert kernels.matmul_global_reads_per_thread(16, tiled=True) == 4
    assert kernels.matmul_global_reads_per_thread(17, tiled=True, tile=8) == 6
    assert kernels.matmul_global_reads_per_thread(16, tiled=False) == 32


def test_counts_are_deterministic_and_skip_idle_threads():
    x, y = rng.random((5, 3)), rng.random((3, 3))
    runs = [kernels.launch_squared_distance(x, y, count=True)[1] for _ in range(2)]
    assert runs[0].per_thread == runs[1].per_thread
    counts = runs[0]
    assert counts.threads == 64                         # one 8 x 8 block
    assert counts.total("global_writes") == 15          # 5 x 3 outputs
    assert counts.max_per_thread("global_reads") == 6   # 2 d
    assert counts.of_thread((0, 0), (7, 7)) == dict.fromkeys(ACCESS_KINDS, 0)
    with pytest.raises(KeyError):
        counts.total("texture_reads")


def test_histogram_counts_atomics_as_reads_and_writes():
    v = rng.random(100)
    h, hcounts = kernels.histogram(v, 4, 0.0, 1.0, count=True)
    assert hcounts.total("atomics") == 100 == h.sum()
    assert hcounts.total("global_writes") == 100   # each atomic writes its bin once ...
    assert hcounts.total("global_reads") == 200    # ... and reads it, besides the read of x[i]


def test_warp_models():
    assert kernels.warp_passes([i % 2 for i in range(64)]) == 4
    assert kernels.warp_passes([i // 32 for i in range(64)]) == 2
    assert kernels.warp_sectors([4 * t for t in range(32)]) == 4       # 128 bytes, all used
    assert kernels.warp_sectors([8 * t for t in range(32)]) == 8       # every other float32: half used
    assert kernels.warp_sectors([8 * t for t in range(32)], access_bytes=8) == 8   # float64: all used
    assert kernels.warp_sectors([2 + 4 * t for t in range(32)]) == 5   # misaligned: one more sector


def test_a_column_read_wastes_8x_in_sectors_not_32x_in_lines():
    """A warp reading down a column of a row-major float32 matrix moves 32 sectors of 32 bytes for
    its 128 useful bytes: 1,024 bytes, 8x the need. Counting whole 128-byte lines (the old helper)
    said 4,096 bytes, 32x: the waste overstated 4x."""
    column = [4096 * t for t in range(32)]
    moved = 32 * kernels.warp_sectors(column)
    assert moved == 1024 and moved // (32 * 4) == 8
    assert 128 * 32 // moved == 4
    import numpy as np

    from course_lib.simt.traffic import access_shape
    lanes = np.arange(32)
    for addrs in ([4 * t for t in range(32)], column, [8 * t for t in range(32)]):
        assert access_shape("global", 4, lanes, np.array(addrs))[2] == kernels.warp_sectors(addrs)


def test_summary_has_every_kind():
    _, counts = kernels.vector_add(rng.random(10), rng.random(10), count=True)
    summary = counts.summary()
    assert set(summary) == set(ACCESS_KINDS)
    assert summary["global_reads"] == {"max": 2, "mean": 20 / 128, "total": 20}
