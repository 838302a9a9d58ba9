"""course_lib.microscaling: the MX scale rule, MX and NVFP4 round trips, per tensor against per block.

Element codes are checked against torch's saturating float8_e4m3fn cast and ml_dtypes' fp4 and
fp6 casts of the scaled values, independently of course_lib.formats.
"""
import ml_dtypes
import numpy as np
import pytest
import torch

from course_lib import formats, microscaling


def test_scale_rule_by_hand():
    x = np.zeros((4, 32), np.float32)
    x[1, :] = 0.05
    x[1, 5] = 1.0          # amax 1: floor(log2 1) - 2 = -2
    x[2, :] = 6.0
    x[2, 7] = 7.9          # amax 7.9: exponent 0, and 7.9 clamps to 6
    x[3, 3] = -2.0 ** -130  # a tiny block: exponent kept at -127
    t = microscaling.mx_quantize(x, "e2m1")
    assert t.scales.ravel().tolist() == [0, 125, 127, 0]
    assert t.codes[1, 5] == 6 and t.codes[1, 0] == 0          # 1.0 / 0.25 = 4 (code 6); 0.05 / 0.25 = 0.2 rounds to 0
    assert t.dequantize()[2, 7] == 6.0
    assert microscaling.shared_exponent([4.0, 3.99, 2.0 ** 200, 0.0], "e4m3").tolist() == [-6, -7, 127, -127]
    assert (microscaling.emax("e2m1"), microscaling.emax("e4m3"), microscaling.emax("e5m2")) == (2, 8, 15)


def test_a_block_with_nan_or_inf_gets_the_nan_scale():
    x = np.ones((2, 32), np.float32)
    x[0, 3] = np.nan
    x[1, 0] = np.inf
    t = microscaling.mx_quantize(x.ravel(), "e4m3")
    assert t.scales.tolist() == [0xFF, 0xFF]
    assert np.isnan(t.dequantize()).all()


@pytest.mark.parametrize("element,cast", [("e4m3", None), ("e2m1", ml_dtypes.float4_e2m1fn),
                                          ("e2m3", ml_dtypes.float6_e2m3fn), ("e3m2", ml_dtypes.float6_e3m2fn)])
def test_mx_elements_match_independent_casts(element, cast):
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((64, 256)) * np.exp(rng.normal(0, 3, (64, 1)))).astype(np.float32)
    t = microscaling.mx_quantize(x, element)
    exponent = np.floor(np.log2(np.abs(x.reshape(64, 8, 32)).max(axis=-1))) - microscaling.emax(element)
    assert np.array_equal(t.scales, exponent.astype(np.int64) + 127)
    scaled = (x.reshape(64, 8, 32) / np.exp2(exponent)[..., None]).astype(np.float32).reshape(64, 256)
    if cast is None:      # torch saturates e4m3
        theirs = torch.from_numpy(scaled).to(torch.float8_e4m3fn).view(torch.uint8).numpy()
    else:                 # fp4 and fp6 always saturate
        theirs = scaled.astype(cast).view(np.uint8)
    assert np.array_equal(t.codes, theirs.astype(np.int64))


def test_mx_round_trip_error_within_half_a_step_below_the_clamp():
    x = np.random.default_rng(4).standard_normal(32 * 100).astype(np.float32)
    t = microscaling.mx_quantize(x, "e2m1")
    scale = formats.decode(t.scales, "e8m0").repeat(32)
    error = np.abs(t.dequantize() - x)
    inside = np.abs(x) / scale <= 6
    # e2m1's steps: 0.5 up to 2, 1 up to 4, 2 up to 6
    step = np.where(np.abs(x) / scale < 2, 0.5, np.where(np.abs(x) / scale < 4, 1.0, 2.0)) * scale
    assert (error[inside] <= step[inside] / 2 + 1e-12).all()
    assert (t.dequantize()[~inside] == np.sign(x[~inside]) * 6 * scale[~inside]).all()


def test_nvfp4_scales_and_round_trip():
    x = np.random.default_rng(5).standard_normal((8, 64)).astype(np.float32) * 3
    t = microscaling.nvfp4_quantize(x)
    assert t.tensor_scale == pytest.approx(np.abs(x).max() / (6 * 448), rel=1e-6)
    block_amax = np.abs(x.reshape(8, 4, 16)).max(axis=-1)
    wanted = torch.from_numpy((block_amax / np.float32(6) / np.float32(t.tensor_scale)).astype(np.float32))
    assert np.array_equal(t.scales, wanted.to(torch.float8_e4m3fn).view(torch.uint8).numpy().astype(np.int64))
    # at most half of e2m1's largest step (2) times the block scale, amax / 6 within e4m3's rounding
    error = np.abs(t.dequantize() - x).reshape(8, 4, 16).max(axis=-1)
    assert (error <= block_amax / 6 * (1 + 2.0 ** -4)).all()
    assert microscaling.nvfp4_quantize(np.zeros(16, np.float32)).dequantize().tolist() == [0.0] * 16


def test_block_scales_survive_outliers_that_one_scale_does_not():
    x, ordinary = microscaling.with_outliers()
    rows = {r["method"]: r for r in microscaling.error_vs_bytes(x, ordinary=ordinary)}
    assert rows["fp4 e2m1, one scale"]["relative_error"] > 0.9       # ordinary values all round to 0
    assert rows["MXFP4"]["relative_error"] < 0.3 and rows["NVFP4"]["relative_error"] < rows["MXFP4"]["relative_error"]
    assert rows["bf16"]["relative_error"] < rows["MXFP8 e4m3"]["relative_error"] < rows["MXFP6 e2m3"]["relative_error"]
    assert rows["MXFP4"]["bytes_per_value"] == 0.5 + 1 / 32 and rows["NVFP4"]["bytes_per_value"] > 0.5625
    with pytest.raises(ValueError):
        microscaling.mx_quantize(np.ones(33, np.float32))
