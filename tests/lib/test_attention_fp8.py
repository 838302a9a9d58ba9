"""course_lib.attention_fp8: the e4m3 cast keeps the largest magnitude and a relative error of at
most 2^-4, the rotation is orthogonal and leaves attention unchanged, and on FlashAttention-3's
outlier inputs the rotation lowers the FP8 output's error while it changes nothing without outliers."""
import pytest
import torch

from course_lib import attention_fp8 as fp8


def test_cast_keeps_the_largest_magnitude_and_rounds_within_half_an_ulp():
    x = torch.randn(3, 40, 16, dtype=torch.float64) * 5
    for block in (None, 16):    # 40 rows: blocks of 16, 16 and a ragged 8
        y = fp8.cast_e4m3(x, block)
        assert y.shape == x.shape and y.dtype == torch.float64
        assert torch.allclose(y.abs().amax(dim=(-2, -1)), x.abs().amax(dim=(-2, -1)), rtol=1e-12)   # 448 is exact
        normal = x.abs() > x.abs().amax() / fp8.E4M3_MAX * 2 ** -6 * 4   # well above e4m3's subnormals
        rel = ((y - x).abs() / x.abs())[normal]
        assert rel.max() <= 2 ** -4 + 1e-12 and rel.max() > 2 ** -6   # 3 mantissa bits: half an ulp is 2^-4
    blocks = fp8.cast_e4m3(torch.cat([torch.full((1, 8, 4), 1e-3), torch.full((1, 8, 4), 1e3)], dim=1), 8)
    assert torch.allclose(blocks[0, :8], torch.full((8, 4), 1e-3, dtype=torch.float64))   # its own scale
    assert torch.equal(fp8.cast_e4m3(torch.zeros(1, 4, 4)), torch.zeros(1, 4, 4, dtype=torch.float64))


def test_the_rotation_is_orthogonal_and_leaves_attention_unchanged():
    m = fp8.random_hadamard(64, seed=3)
    assert torch.allclose(m @ m.T, torch.eye(64, dtype=torch.float64), atol=1e-12)
    assert set(m.abs().unique().tolist()) == {64 ** -0.5}
    q, k, v = fp8.outlier_qkv(2, 48, 64, seed=1)
    assert torch.allclose(fp8.attention(q @ m, k @ m, v), fp8.attention(q, k, v), atol=1e-10)
    with pytest.raises(ValueError, match="power of two"):
        fp8.random_hadamard(48)


def test_outlier_inputs_have_the_stated_share_of_large_entries():
    q, _, _ = fp8.outlier_qkv(4, 512, 64, seed=0)
    share = (q.abs() > 6).double().mean().item()   # N(0, 1) alone exceeds 6 once in 5e8 draws
    assert 3e-4 < share < 1.2e-3


def test_rotation_lowers_fp8_error_on_outliers_and_changes_nothing_without():
    rows = fp8.compare(*fp8.outlier_qkv(2, 256, 64, seed=0))
    assert rows["float16 inputs"] < rows["bfloat16 inputs"] < rows["FP8, one scale per tensor"]
    rotated = min(rows["FP8, per tensor, Q and K rotated"], rows["FP8, per 64 rows, Q and K rotated"])
    assert rotated * 1.3 < rows["FP8, one scale per tensor"], rows
    plain = fp8.compare(*fp8.outlier_qkv(2, 256, 64, seed=0, fraction=0.0))
    ratio = plain["FP8, per tensor, Q and K rotated"] / plain["FP8, one scale per tensor"]
    assert 0.85 < ratio < 1.15, plain
