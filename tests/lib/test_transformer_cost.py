"""course_lib.transformer_cost: known answers worked out by hand."""

import pytest

from course_lib import transformer_cost as tc


def test_training_flops_is_six_per_parameter_and_token():
    # GPT-3: 175e9 parameters, 300e9 tokens -> 6 * 175e9 * 300e9 = 3.15e23 FLOPs
    assert tc.training_flops(175e9, 300e9) == pytest.approx(3.15e23, rel=1e-12)
    assert tc.training_flops(10, 2) == 120


def test_peak_flops_reads_the_precision_column():
    spec = {"device": "toy GPU", "fp32_tflops": 10.0, "bf16_tensor_tflops": 160.0, "fp8_tensor_tflops": float("nan")}
    assert tc.peak_flops(spec, "fp32") == 10e12
    assert tc.peak_flops(spec, "bf16") == 160e12
    with pytest.raises(ValueError, match="no fp8 peak"):
        tc.peak_flops(spec, "fp8")
    with pytest.raises(ValueError, match="choose one of"):
        tc.peak_flops(spec, "int4")


def test_h100_peaks_come_from_the_table():
    h100 = tc.gpu_spec("H100")
    assert tc.peak_flops(h100, "fp32") == h100["fp32_tflops"] * 1e12
    # tensor cores: bf16 more than ten times the CUDA cores' fp32, fp8 twice bf16
    assert tc.peak_flops(h100, "bf16") > 10 * tc.peak_flops(h100, "fp32")
    assert tc.peak_flops(h100, "fp8") == pytest.approx(2 * tc.peak_flops(h100, "bf16"))
    with pytest.raises(KeyError, match="known:"):
        tc.gpu_spec("no such GPU")


def test_training_seconds():
    # 1e18 FLOPs on 4 GPUs of 100 TFLOP/s at half their peak: 1e18 / (4 * 1e14 * 0.5) = 5000 s
    assert tc.training_seconds(1e18, 1e14, gpus=4, utilisation=0.5) == pytest.approx(5000.0)
    assert tc.training_seconds(3e12, 1e12) == pytest.approx(3.0)
    with pytest.raises(ValueError):
        tc.training_seconds(1.0, 1.0, utilisation=0.0)


def test_kv_cache_bytes():
    # 2 (K and V) x 32 layers x batch 1 x 4096 tokens x 32 heads x 128 dims x 2 bytes = 2 GiB
    assert tc.kv_cache_bytes(32, 1, 4096, 32, 128) == 2 * 2**30
    # grouped-query attention with 8 key/value heads: a quarter of that
    assert tc.kv_cache_bytes(32, 1, 4096, 8, 128) == 2**29
    # linear in batch and context
    assert tc.kv_cache_bytes(2, 3, 5, 1, 7, bytes_per_value=4) == 2 * 2 * 3 * 5 * 1 * 7 * 4
