import matplotlib
import pytest

from course_lib import roofline as rl

matplotlib.use("Agg")


def test_matmul_flops_counts_multiply_and_add():
    assert rl.matmul_flops(2) == 16
    assert rl.matmul_flops(2, 3, 4) == 2 * 2 * 3 * 4


def test_theoretical_peak():
    # 4 cores x 2 GHz x 8 float32 lanes (AVX2) x 2 (FMA) x 2 FMA units = 256 GFLOP/s
    assert rl.theoretical_peak_flops(4, 2e9, 256) == pytest.approx(256e9)
    assert rl.theoretical_peak_flops(1, 1e9, 512, dtype_bits=64, fma_units=1) == pytest.approx(16e9)


def test_intensity_ridge_and_attainable():
    assert rl.arithmetic_intensity(100, 50) == 2
    assert rl.ridge_point(1e12, 1e11) == 10
    assert rl.attainable_flops(1, 1e12, 1e11) == 1e11
    assert rl.attainable_flops(100, 1e12, 1e11) == 1e12
    roof = rl.Roofline("test", 1e12, 1e11)
    assert roof.ridge == 10
    assert roof.bound(0.25) == "memory-bound"
    assert roof.bound(50) == "compute-bound"
    assert roof.attainable(5) == 5e11


def test_measured_ceilings_are_plausible():
    peak, timing = rl.measure_peak_flops(256, repeat=3)
    assert 1e8 < peak < 1e15
    assert timing.median > 0
    bw, _ = rl.measure_bandwidth(16 * 2**20, repeat=3)
    assert 1e8 < bw < 1e13


def test_plot_draws_one_line_per_device():
    ax = rl.plot([rl.Roofline("a", 1e11, 2e10), rl.Roofline("b", 1e13, 1e12)],
                 kernels={"add": 1 / 12, "matmul": 100})
    assert len(ax.get_lines()) >= 2
    assert ax.get_xscale() == "log"
