"""Number formats, int8 quantization and low-precision matmul error."""
import math

import pytest
import torch

from course_lib import precision


def test_format_info_matches_ieee_layouts():
    info = {r["format"]: r for r in precision.format_table()}
    assert (info["float16"]["exponent_bits"], info["float16"]["mantissa_bits"]) == (5, 10)
    assert (info["bfloat16"]["exponent_bits"], info["bfloat16"]["mantissa_bits"]) == (8, 7)
    assert (info["float32"]["exponent_bits"], info["float32"]["mantissa_bits"]) == (8, 23)
    assert info["float16"]["max"] == 65504.0
    assert info["float16"]["smallest_subnormal"] == pytest.approx(2.0**-24)
    assert info["bfloat16"]["smallest_normal"] == info["float32"]["smallest_normal"]
    assert info["int8"]["max"] == 127 and info["int8"]["bits"] == 8
    with pytest.raises(ValueError):
        precision.format_info("float8")


def test_fits():
    assert precision.fits("float16", 1000.0, 1e-3)
    assert not precision.fits("float16", 1e5, 1.0)
    assert not precision.fits("float16", 1.0, 1e-6)
    assert precision.fits("bfloat16", 1e30, 1e-30)


def test_error_measures():
    exact = torch.tensor([3.0, 4.0])
    assert precision.relative_error(exact, exact) == 0.0
    assert precision.relative_error(torch.tensor([3.0, 0.0]), exact) == pytest.approx(0.8)
    assert precision.max_abs_error(torch.tensor([3.5, 4.0]), exact) == pytest.approx(0.5)


def test_quantize_int8_is_symmetric_and_round_trips():
    x = torch.tensor([-2.0, -0.5, 0.0, 0.25, 2.0])
    q, scale = precision.quantize_int8(x)
    assert q.dtype == torch.int8 and scale == pytest.approx(2.0 / 127)
    assert q.tolist() == [-127, -32, 0, 16, 127]
    assert precision.max_abs_error(precision.dequantize(q, scale), x) <= scale / 2 + 1e-9
    zeros, zscale = precision.quantize_int8(torch.zeros(3))
    assert zscale == 1.0 and zeros.tolist() == [0, 0, 0]


def test_int8_matmul_accumulates_without_overflow():
    a = torch.full((4, 512), 1.0)
    b = torch.full((512, 3), 1.0)
    # 512 products of 127 * 127 overflow int16 but not int32
    assert torch.allclose(precision.int8_matmul(a, b), torch.full((4, 3), 512.0))


@pytest.mark.parametrize("name,low,high", [("float32", 0, 1e-6), ("float16", 1e-4, 2e-3),
                                           ("bfloat16", 1e-3, 1e-2), ("int8", 3e-3, 5e-2)])
def test_matmul_error_orders_of_magnitude(name, low, high):
    gen = torch.Generator().manual_seed(1)
    a = torch.randn(64, 64, generator=gen, dtype=torch.float64)
    b = torch.randn(64, 64, generator=gen, dtype=torch.float64)
    err = precision.matmul_error(a, b, name)
    assert low <= err["relative_error"] <= high
    assert err["max_abs_error"] > 0


def test_error_sweep_and_plot():
    import matplotlib
    matplotlib.use("Agg")
    rows = precision.error_sweep(sizes=(8, 16), names=("float16", "int8"))
    assert [(r["n"], r["format"]) for r in rows] == [(8, "float16"), (8, "int8"),
                                                     (16, "float16"), (16, "int8")]
    ax = precision.plot_error_sweep(rows)
    assert len(ax.get_lines()) == 2


def test_overflow_and_underflow_examples():
    rows = {r["value"]: r for r in precision.overflow_underflow_examples()}
    assert math.isinf(rows[70000.0]["float16"]) and math.isfinite(rows[70000.0]["bfloat16"])
    assert rows[1e-8]["float16"] == 0.0 and rows[1e-8]["bfloat16"] > 0
    assert rows[1e-8 * 1024]["float16"] > 0
    assert rows[1.001]["bfloat16"] == 1.0
    assert precision.round_to(1.0 + 2**-11, "float16") == 1.0


def test_running_sum_stalls_in_float16():
    assert precision.running_sum([1.0] * 3000, "float16") == 2048.0
    assert precision.running_sum([1.0] * 3000, "float32") == 3000.0


def test_matmul_in_returns_the_format():
    a = torch.randn(4, 4)
    assert precision.matmul_in(a, a, "bfloat16").dtype == torch.bfloat16
    assert precision.matmul_in(a, a, "int8").dtype == torch.float32


def test_time_matmul_by_format_reports_seconds():
    rows = precision.time_matmul_by_format(32, names=("float32", "bfloat16"))
    assert [r["format"] for r in rows] == ["float32", "bfloat16"]
    assert all(r["seconds"] > 0 and r["flops_per_second"] > 0 for r in rows)


def test_low_precision_rates_cite_a_vendor_source_for_every_row():
    rows = precision.low_precision_rates()
    devices = {r["device"] for r in rows}
    for name in ("H100", "H200", "B200", "B300", "MI300X", "MI355X"):
        assert any(name in d for d in devices), name
    for r in rows:
        assert r["source_url"].startswith(("https://www.nvidia.com/", "https://www.amd.com/")), r
        assert r["document"] and r["derivation"] and r["dense_tflops"] > 0
        if not math.isnan(r["sparse_tflops"]):
            assert r["sparse_tflops"] >= r["dense_tflops"]
    table = precision.rates_table()
    # fp16 and bf16 share one tensor-core rate on the H100; every fp8 rate doubles its device's bf16 rate
    assert table["NVIDIA H100 SXM5"]["fp16"] == table["NVIDIA H100 SXM5"]["bf16"]
    for formats in table.values():
        assert formats["fp8"] == pytest.approx(2 * formats["bf16"], rel=0.01)
