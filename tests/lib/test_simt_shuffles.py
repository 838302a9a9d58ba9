"""course_lib.simt's warp shuffles as lesson 03's exercise 8 grades them: each shuffle a warp runs is
counted for that warp (a reduction of 32 values takes 5, a broadcast loop 32), an active lane outside a
shuffle's mask or a lane reading one that does not take part is an error (undefined on a GPU) that the
grading checks report in one line, and a shuffle within a half-warp mask among its own lanes runs."""
import numpy as np
import pytest

from course_lib import hardware, simt
from course_lib.checks import CheckFailed
from course_lib.checks.traffic import launch_traffic

cuda = hardware.numba_cuda()   # before anything imports numba.cuda: it decides GPU or simulator

FULL = 0xFFFFFFFF
HALF = 0xFFFF


@cuda.jit
def tree_sum(x, out):
    """out[w] = sum of warp w's 32 values, shfl_down_sync in five steps."""
    i = cuda.grid(1)
    v = x[i] if i < x.size else 0.0
    offset = 16
    while offset > 0:
        v += cuda.shfl_down_sync(FULL, v, offset)
        offset //= 2
    if i % 32 == 0:
        out[i // 32] = v


@cuda.jit
def broadcast_sum(x, out):
    """The same sums, every lane gathering all 32 values with a broadcast shuffle each."""
    i = cuda.grid(1)
    v = x[i] if i < x.size else 0.0
    total = 0.0
    for k in range(32):
        total += cuda.shfl_sync(FULL, v, k)
    if i % 32 == 0:
        out[i // 32] = total


@cuda.jit
def half_mask(x, out):
    """All 32 lanes call a shuffle whose mask names only lanes 0-15."""
    i = cuda.grid(1)
    out[i] = cuda.shfl_xor_sync(HALF, x[i], 1)


@cuda.jit
def half_warp_xor(x, out):
    """Lanes 0-15 only, a mask of those lanes, exchanging among themselves: allowed."""
    i = cuda.grid(1)
    if i % 32 < 16:
        out[i] = cuda.shfl_xor_sync(HALF, x[i], 1)


@cuda.jit
def tree_in_branch(x, out):
    """The shared-memory tree's `if lane < offset` around the shuffle: lanes read lanes that sit out."""
    i = cuda.grid(1)
    v = x[i]
    offset = 16
    while offset > 0:
        if i % 32 < offset:
            v += cuda.shfl_down_sync(FULL, v, offset)
        offset //= 2
    if i % 32 == 0:
        out[i // 32] = v


def test_shuffles_are_counted_per_warp():
    x = np.random.default_rng(0).random(100)
    out = np.zeros(4)
    result = simt.run(tree_sum, 2, 64, x, out)
    np.testing.assert_allclose(out, [x[:32].sum(), x[32:64].sum(), x[64:96].sum(), x[96:].sum()])
    assert result.traffic.shuffles == {((b, 0, 0), w): 5 for b in range(2) for w in range(2)}
    assert result.traffic.max_shuffles_per_warp == 5
    broadcast = simt.run(broadcast_sum, 2, 64, x, np.zeros(4))
    assert broadcast.traffic.max_shuffles_per_warp == 32
    assert simt.run(tree_sum, 1, 32, x[:32], np.zeros(1), traffic=False).traffic is None


def test_a_lane_outside_the_mask_or_reading_a_lane_that_sits_out_is_an_error():
    x = np.arange(64.0)
    with pytest.raises(simt.InactiveLane, match=r"lane 16 calls it but is not in its mask 0x0000ffff"):
        simt.run(half_mask, 1, 64, x, np.zeros(64))
    with pytest.raises(simt.InactiveLane, match=r"cuda.shfl_down_sync: lane 0 reads lane 16, which is not active"):
        simt.run(tree_in_branch, 1, 32, x[:32], np.zeros(1))
    out = np.zeros(64)
    simt.run(half_warp_xor, 1, 64, x, out)
    expected = np.where(np.arange(64) % 32 < 16, x[np.arange(64) ^ 1], 0.0)
    np.testing.assert_array_equal(out, expected)


def test_the_grading_checks_report_a_bad_shuffle_in_one_line():
    with pytest.raises(CheckFailed) as failed:
        launch_traffic(tree_in_branch, 1, 32, (np.arange(32.0), np.zeros(1)))
    message = str(failed.value)
    assert message.startswith("tree_in_branch: expected every lane a shuffle names or reads taking part in it, got: ")
    assert "\n" not in message and "reads lane 16" in message
