"""course_lib.checks.traffic, the checks lesson 03's exercises grade with (run in the trusted checker):
the reference solutions pass and the wrong answers a student would write fail, with a message that
states the target and names the source line: the uncoalesced transpose on sectors per warp access,
the unpadded tile on bank conflicts, the interleaved reduction on divergent warp branches."""
import re

import numpy as np
import pytest
import simt_lessons as lessons

from course_lib import kernels
from course_lib.checks import CheckFailed
from course_lib.checks.traffic import (
    check_bank_conflicts,
    check_divergence,
    check_sectors,
    divergent_per_block,
    launch_traffic,
)
from course_lib.simt.races import WRITE

SOURCES = lessons.solution_cells("03")
WRONG = lessons.wrong_answers("03")
# exercise 7's stored wrong answer with the unpadded tile (coalesced, a 32-way bank conflict)
UNPADDED = next(n for n, edit in enumerate(WRONG["ex7_tiled"]) if "(TILE, TILE), float32" in str(edit))


def kernel(gid: str, name: str, wrong: int = -1):
    source = SOURCES[gid] if wrong < 0 else lessons.apply(SOURCES[gid], WRONG[gid][wrong])
    assert source is not None, f"{gid} wrong answer {wrong} no longer applies"
    return lessons.build("03", source, name, f"<test traffic {gid} {wrong}>")


def transpose(k, rows=40, cols=72):
    a = np.random.default_rng(3).random((rows, cols)).astype(np.float32)
    grid, block = kernels.grid_2d(rows, cols, (32, 32))
    out, result = launch_traffic(k, grid, block, (a, np.zeros((cols, rows), np.float32)))
    np.testing.assert_array_equal(out, a.T)
    return result


def test_the_tiled_transpose_is_coalesced_and_the_naive_one_is_not():
    check_sectors("tiled", transpose(kernel("ex7_tiled", "transpose_tiled_kernel")))
    uncoalesced = transpose(kernel("ex7_tiled", "transpose_tiled_kernel", wrong=0))
    with pytest.raises(CheckFailed) as failed:
        check_sectors("uncoalesced", uncoalesced)
    message = str(failed.value)
    assert re.search(r"expected <= 5 sectors per warp \(4 hold the bytes this warp asks for at this line, .* got 32 "
                     r"at line \d+ \(writes out\[out_row, out_col\]: threads of a warp step along a column",
                     message), message
    with pytest.raises(CheckFailed, match="got 32 at line"):
        check_sectors("naive", transpose(kernel("ex7_naive", "transpose_naive_kernel")))


DILUTED = """@cuda.jit
def transpose_naive_kernel(a, out):
    col, row = cuda.grid(2)
    if row < a.shape[0] and col < a.shape[1]:
        reps = 1
        if row == 0 and col == 0:
            reps = 3000
        for r in range(reps):
            out[col, row] = a[row, col]
"""


SERIALIZED = """@cuda.jit
def transpose_naive_kernel(a, out):
    col, row = cuda.grid(2)
    if row < a.shape[0] and col < a.shape[1]:
        for k in range(32):
            if cuda.laneid == k:
                out[col, row] = a[row, col]
"""


def test_a_diluted_uncoalesced_access_is_judged_by_its_worst_warp():
    """Issue 35: the naive transpose with one lane rewriting one element 3000 times: each rewrite is
    1 sector where 1 would do, which summed over the site hid the 120 column writes of up to 32
    sectors (within ideal + 1 per access); its warps each move 32 sectors for 128 bytes, the one
    with the rewrites 3031."""
    result = transpose(lessons.build("03", DILUTED, "transpose_naive_kernel", "<test traffic diluted>"))
    write = next(s for s in result.traffic.global_sites() if s.how == WRITE)
    assert write.sectors <= write.ideal_sectors + write.warp_accesses     # the sum is padded
    assert (write.worst_cost, write.worst_ideal, write.worst_accesses) == (32 + 2999, 4, 3000)
    assert "the worst warp 3031 where 4 would do: one warp ran this line 3000 times" in write.sentence()
    with pytest.raises(CheckFailed, match=r"expected <= 5 sectors per warp .* got 3031 at line 9 \(writes "
                                          r"out\[col, row\]: one warp ran this line 3000 times; 0 % of the bytes"):
        check_sectors("diluted", result)


def test_a_warp_that_goes_one_lane_at_a_time_is_judged_on_all_it_moved():
    """The naive transpose with each lane in its own turn (`if cuda.laneid == k`): every warp access
    is 1 sector where 1 would do, but each warp moves 32 sectors for its 128 bytes, on its write
    (down a column) and on its read too (a row, one sector per lane)."""
    result = transpose(lessons.build("03", SERIALIZED, "transpose_naive_kernel", "<test traffic serialized>"))
    for site in result.traffic.global_sites():
        assert site.sectors == site.ideal_sectors                        # per access: as few as possible
        assert (site.worst_cost, site.worst_ideal, site.worst_accesses) == (32, 4, 32)
    with pytest.raises(CheckFailed, match=r"got 32 at line 7 \(reads a\[row, col\]: one warp ran this line 32 "
                                          r"times; 12 % of the bytes moved are used\)"):
        check_sectors("serialized", result)


def test_a_row_not_starting_on_a_sector_gets_one_sector_of_slack():
    check_sectors("37 columns", transpose(kernel("ex7_tiled", "transpose_tiled_kernel"), rows=33, cols=37))


def test_the_padded_tile_has_no_bank_conflict_and_the_unpadded_one_32_way():
    padded = transpose(kernel("ex7_tiled", "transpose_tiled_kernel"), 64, 64)
    check_bank_conflicts("padded", padded)
    check_sectors("padded", padded)
    unpadded = transpose(kernel("ex7_tiled", "transpose_tiled_kernel", wrong=UNPADDED), 64, 64)
    check_sectors("unpadded", unpadded)
    with pytest.raises(CheckFailed, match=r"expected no bank conflict \(degree 1\), got a 32-way conflict at line \d+ "
                                          r"\(reads tile\[tx, ty\]"):
        check_bank_conflicts("unpadded", unpadded)


def test_bank_conflicts_are_judged_by_the_worst_warp_access_and_the_worst_warp():
    """The unpadded tile's 32-way conflicting read, with one lane reading one word 3000 times more
    (3000 conflict-free passes, 2.3 passes per warp access on average): its worst warp access is
    still 32-way. The padded tile read one lane at a time: no access conflicts, but each warp takes
    32 passes where its 32 words need 1."""
    unpadded = lessons.apply(SOURCES["ex7_tiled"], WRONG["ex7_tiled"][UNPADDED])
    diluted = unpadded.replace("        out[out_row, out_col] = tile[tx, ty]",
                               "        reps = 3000 if out_row == 0 and out_col == 0 else 1\n"
                               "        for r in range(reps):\n            out[out_row, out_col] = tile[tx, ty]")
    assert diluted != unpadded
    result = transpose(lessons.build("03", diluted, "transpose_tiled_kernel", "<test traffic diluted tile>"), 64, 64)
    read = next(s for s in result.traffic.shared_sites() if s.how != WRITE)
    assert read.wavefronts / read.warp_accesses < 3 and read.max_degree == 32
    with pytest.raises(CheckFailed, match=r"got a 32-way conflict at line \d+ \(reads tile\[tx, ty\]"):
        check_bank_conflicts("diluted", result)
    padded = SOURCES["ex7_tiled"]
    serialized = padded.replace("        out[out_row, out_col] = tile[tx, ty]",
                                "        for k in range(32):\n            if cuda.laneid == k:\n"
                                "                out[out_row, out_col] = tile[tx, ty]")
    assert serialized != padded
    result = transpose(lessons.build("03", serialized, "transpose_tiled_kernel", "<test traffic serial tile>"), 64, 64)
    assert max(s.max_degree for s in result.traffic.shared_sites()) == 1
    with pytest.raises(CheckFailed, match=r"expected no bank conflict \(degree 1\), and no warp taking more passes at "
                                          r"a line than 1 x what its words need, got 32 passes at line \d+ \(reads "
                                          r"tile\[tx, ty\]: one warp ran this line 32 times, where its words need 1\)"):
        check_bank_conflicts("serialized", result)


def test_sequential_addressing_keeps_warps_together_and_interleaved_splits_them():
    rng = np.random.default_rng(4)
    x, y = rng.random(300), rng.random(300)
    runs = {}
    for wrong in (-1, 4):
        partial, runs[wrong] = launch_traffic(kernel("ex4_dot", "dot_kernel", wrong), 3, 128, (x, y, np.zeros(3)))
        assert np.isclose(partial.sum(), x @ y)
    assert divergent_per_block(runs[-1]) == 6       # 5 steps inside warp 0, and `if t == 0`
    assert divergent_per_block(runs[4]) == 24       # 4 warps x 5 steps, 2 + 1 at strides 32 and 64, `t == 0`
    check_divergence("sequential", runs[-1], 7, "budget")
    with pytest.raises(CheckFailed, match=r"at most 7 divergent warp branches per block \(budget\), got 24; the worst: "
                                          r"line \d+ `if t % \(2 \* step\) == 0`"):
        check_divergence("interleaved", runs[4], 7, "budget")


def test_inputs_must_come_back_unchanged():
    source = SOURCES["ex7_naive"].replace("out[col, row] = a[row, col]",
                                          "out[col, row] = a[row, col]\n        a[row, col] = 0.0")
    bad = lessons.build("03", source, "transpose_naive_kernel", "<test traffic writes input>")
    with pytest.raises(CheckFailed, match="changed its input `a`"):
        transpose(bad)


def test_a_barrier_only_part_of_a_block_reaches_fails_in_one_line():
    """Issue 37: the tree reduction with its cuda.syncthreads() inside `if t < half` computes the right sum
    in the engine and in Numba's simulator, but is undefined behaviour on a GPU: the check fails in one
    line naming the barrier's line and how many of the block's running threads reached it."""
    old = "products[t] += products[t + half]\n        cuda.syncthreads()\n"
    assert SOURCES["ex4_dot"].count(old) == 1
    source = SOURCES["ex4_dot"].replace(old, "products[t] += products[t + half]\n            cuda.syncthreads()\n")
    bad = lessons.build("03", source, "dot_kernel", "<test traffic barrier in a branch>")
    x, y = np.random.default_rng(5).random((2, 300))
    with pytest.raises(CheckFailed, match=r"^dot_kernel: expected every running thread of a block at each "
                       r"cuda\.syncthreads\(\), got: barrier reached by part of block \(0\): the "
                       r"`cuda\.syncthreads\(\)` at line \d+ of dot_kernel was reached by 16 of the block's 32 "
                       r"running threads \(the other 96 of its 128 have exited\)") as info:
        launch_traffic(bad, 3, 128, (x, y, np.zeros(3)))
    assert "\n" not in str(info.value)
