"""The systolic-array simulator: results equal NumPy, cycles equal the closed forms."""
import numpy as np
import pytest

from course_lib import systolic

SHAPES = [(1, 1, 1), (4, 4, 4), (3, 5, 2), (7, 9, 6), (10, 3, 11), (2, 8, 1)]


@pytest.mark.parametrize("dataflow", systolic.DATAFLOWS)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("size", [1, 3, 4, 8])
def test_simulate_equals_numpy_and_closed_form(dataflow, shape, size):
    m, k, n = shape
    rng = np.random.default_rng(m * 100 + k * 10 + n)
    a, b = rng.standard_normal((m, k)), rng.standard_normal((k, n))
    run = systolic.simulate(a, b, dataflow, rows=size, record=False)
    np.testing.assert_allclose(run.result, a @ b, rtol=1e-12, atol=1e-12)
    assert run.counts == systolic.cycle_count(dataflow, m, k, n, size)
    assert run.macs == m * k * n
    assert 0 < run.utilization <= 1


@pytest.mark.parametrize("n", [1, 2, 4, 6])
def test_output_stationary_square_takes_3n_minus_2_compute_cycles(n):
    a = np.arange(n * n, dtype=float).reshape(n, n)
    run = systolic.simulate(a, np.eye(n), "output", rows=n)
    assert run.counts.compute == 3 * n - 2
    assert run.counts.drain == n and run.counts.load == 0
    assert run.cycles == 4 * n - 2 == len(run.snapshots)


def test_weight_and_input_stationary_load_then_compute():
    for dataflow in ("weight", "input"):
        counts = systolic.cycle_count(dataflow, 5, 5, 5, 5)
        assert (counts.load, counts.compute, counts.drain) == (5, 13, 0)


def test_rectangular_array_and_tiling_counts():
    counts = systolic.cycle_count("output", 10, 7, 6, rows=4, cols=3)
    # row tiles 4, 4, 2; column tiles 3, 3
    assert counts.tiles == 6
    assert counts.compute == sum(r + c + 7 - 2 for r in (4, 4, 2) for c in (3, 3))
    assert counts.drain == 2 * (4 + 4 + 2)
    run = systolic.simulate(np.ones((10, 7)), np.ones((7, 6)), "output", rows=4, cols=3,
                            record=False)
    assert run.counts == counts
    np.testing.assert_allclose(run.result, np.full((10, 6), 7.0))


def test_weight_stationary_streams_long_batches_efficiently():
    short = systolic.utilization("weight", 4, 4, 4, 4)
    long = systolic.utilization("weight", 400, 4, 4, 4)
    assert long > 0.9 > short


def test_skew_meets_operands_in_the_right_pe():
    a = np.arange(1, 10, dtype=float).reshape(3, 3)
    b = np.arange(10, 19, dtype=float).reshape(3, 3)
    run = systolic.simulate(a, b, "output", rows=3)
    first = run.snapshots[0]
    assert first.mac.sum() == 1 and first.mac[0, 0]
    assert first.horizontal[0, 0] == a[0, 0] and first.vertical[0, 0] == b[0, 0]
    # cycle 2: PE (1, 1) multiplies A[1, 0] by B[0, 1] (k = t - i - j = 0)
    snap = run.snapshots[2]
    assert snap.horizontal[1, 1] == a[1, 0] and snap.vertical[1, 1] == b[0, 1]
    assert run.active_pes().tolist()[:7] == [1, 3, 6, 7, 6, 3, 1]


def test_snapshots_record_phases_and_stationary_weights():
    a, b = np.ones((2, 3)), np.arange(9, dtype=float).reshape(3, 3)
    run = systolic.simulate(a, b, "weight", rows=3)
    phases = [s.phase for s in run.snapshots]
    assert phases[:3] == ["load"] * 3 and set(phases[3:]) == {"compute"}
    np.testing.assert_array_equal(run.snapshots[2].stationary, b)


def test_bad_inputs_raise():
    with pytest.raises(ValueError):
        systolic.simulate(np.ones((2, 3)), np.ones((2, 3)))
    with pytest.raises(ValueError):
        systolic.simulate(np.ones((2, 2)), np.ones((2, 2)), "diagonal")
    with pytest.raises(ValueError):
        systolic.cycle_count("row", 2, 2, 2, 2)


def test_peak_ops_per_second_of_tpu_v1():
    # Jouppi et al. 2017: 256 x 256 MACs at 700 MHz, "92 TOPS"
    assert systolic.peak_ops_per_second(256 * 256, 700e6) == pytest.approx(91.75e12, rel=1e-3)


def test_snapshot_html_and_widget():
    run = systolic.simulate(np.ones((2, 2)), np.ones((2, 2)), "output", rows=2)
    html = systolic.snapshot_html(run, 1)
    assert html.count("<td") == 4 and "cycle 1" in html and "compute" in html
    box = systolic.widget(run)
    slider = box.children[0].children[1]
    slider.value = run.cycles - 1
    assert "drain" in box.children[1].value
    with pytest.raises(ValueError):
        systolic.widget(systolic.simulate(np.ones((2, 2)), np.ones((2, 2)), record=False))


def test_plot_activity():
    import matplotlib
    matplotlib.use("Agg")
    runs = {d: systolic.simulate(np.ones((3, 3)), np.ones((3, 3)), d, rows=3)
            for d in systolic.DATAFLOWS}
    axes = systolic.plot_activity(runs)
    assert len(axes) == 3
    assert [len(ax.containers[0]) for ax in axes] == [r.cycles for r in runs.values()]
