"""course_lib.distance and course_lib.crossover: every backend agrees, chunking respects
its budget, sweeps never time the simulator, the plot labels cited figures."""
import math
import tracemalloc

import numpy as np
import pytest
from scipy.spatial.distance import cdist

from course_lib import crossover, distance

rng = np.random.default_rng(7)


@pytest.mark.parametrize("backend", [b for b in distance.BACKENDS if b != "cupy"])
@pytest.mark.parametrize("m,n,d", [(9, 9, 3), (12, 5, 2), (1, 4, 1)])
def test_backends_agree_with_scipy(backend, m, n, d):
    x, y = rng.random((m, d)), rng.random((n, d))
    got = distance.squared_distances(x, y, backend=backend)
    np.testing.assert_allclose(got, cdist(x, y, "sqeuclidean"), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(distance.distances(x, y, backend=backend), cdist(x, y), rtol=1e-10, atol=1e-6)


def test_default_y_is_x_and_diagonal_is_zero():
    x = rng.random((30, 3)) + 1e4  # far from the origin: the matmul form must not go negative
    for backend in ("numpy-broadcast", "numpy-matmul", "numba-cpu"):
        sq = distance.squared_distances(x, backend=backend)
        assert sq.shape == (30, 30)
        assert sq.min() >= 0.0
        assert not np.isnan(distance.distances(x, backend=backend)).any()


def test_numba_cpu_parallel_path_and_out_and_no_coordinates():
    x = rng.random((2100, 3))  # 4.4 million outputs: above PARALLEL_MIN_OUTPUT, the parallel loop
    assert x.shape[0] ** 2 >= distance.PARALLEL_MIN_OUTPUT
    out = np.empty((2100, 2100))
    assert distance.sqdist_numba_cpu(x, out=out) is out
    np.testing.assert_allclose(out, cdist(x, x, "sqeuclidean"), rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(distance.sqdist_numba_cpu(np.zeros((3, 0)), np.zeros((2, 0))), np.zeros((3, 2)))


def test_integer_input_and_bad_shapes():
    xi = np.array([[0, 0], [3, 4]])
    np.testing.assert_allclose(distance.squared_distances(xi), [[0, 25], [25, 0]])
    with pytest.raises(ValueError):
        distance.squared_distances(rng.random((3, 2)), rng.random((3, 3)))
    with pytest.raises(ValueError):
        distance.squared_distances(rng.random((3, 2)), backend="fortran")


def test_numba_cuda_backend_keeps_device_arrays_on_the_device():
    from course_lib import kernels

    x = rng.random((9, 2))
    x_dev = kernels.cuda.to_device(x)
    out_dev = kernels.cuda.device_array((9, 9))
    assert distance.sqdist_numba_cuda(x_dev, x_dev, out=out_dev) is out_dev
    np.testing.assert_allclose(out_dev.copy_to_host(), cdist(x, x, "sqeuclidean"), atol=1e-12)


def test_available_backends_and_cupy_without_gpu():
    available = distance.available_backends()
    assert {"numpy-broadcast", "numpy-matmul", "numba-cpu", "numba-cuda"} <= set(available)
    from course_lib.hardware import cupy_usable

    if not cupy_usable():
        assert "cupy" not in available
        with pytest.raises(RuntimeError):
            distance.sqdist_cupy(rng.random((3, 2)))


def test_memory_estimates():
    assert distance.temporary_bytes("numpy-broadcast", 10, 20, 3) == 2 * 10 * 20 * 3 * 8
    assert distance.temporary_bytes("numpy-matmul", 10, 20, 3) == 30 * 8
    assert distance.temporary_bytes("numba-cpu", 10, 20, 3) == 0
    assert distance.peak_bytes("numba-cpu", 10, 20, 3, itemsize=4) == (30 * 3 + 200) * 4
    # one row against 100 rows of y in 3-D: 2 x 100 x 3 x 8 temporaries + 100 x 8 result = 5600 bytes
    assert distance.rows_per_chunk(100, 3, 5600 * 7) == 7
    assert distance.rows_per_chunk(100, 3, 10) == 1


@pytest.mark.parametrize("backend", ["numpy-broadcast", "numpy-matmul"])
def test_chunked_equals_whole(backend):
    x, y = rng.random((53, 3)), rng.random((21, 3))
    got = distance.chunked_squared_distances(x, y, budget_bytes=2000, backend=backend)
    np.testing.assert_allclose(got, cdist(x, y, "sqeuclidean"), rtol=1e-10, atol=1e-12)


def test_chunked_stays_under_budget():
    x = rng.random((600, 3))
    budget = 2**18
    tracemalloc.start()
    out = distance.chunked_squared_distances(x, budget_bytes=budget)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak <= out.nbytes + 1.5 * budget
    tracemalloc.start()
    distance.sqdist_broadcast(x)
    whole_peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert whole_peak > out.nbytes + 1.5 * budget  # the unchunked version would not fit


def test_time_matmul_form_steps():
    steps = distance.time_matmul_form_steps(rng.random((64, 3)), repeat=2)
    assert len(steps) == 3 and all(s.median > 0 for s in steps.values())
    assert all(s.measured_on().startswith("measured here on: ") and s.device == "cpu" for s in steps.values())


def test_sweep_never_times_the_simulator():
    from course_lib.hardware import numba_cuda_mode

    result = crossover.sweep([16, 32], repeat=2)
    assert result.sizes == [16, 32]
    assert "numpy-matmul" in result.seconds and len(result.seconds["numpy-matmul"]) == 2
    if numba_cuda_mode() == "simulator":
        assert "numba-cuda" not in result.seconds
        assert "simulator" in result.not_timed["numba-cuda"]
    only = crossover.sweep([16], backends=["numba-cpu", "cupy"], repeat=1)
    assert set(only.seconds) <= {"numba-cpu", "cupy"}
    # every timed backend carries the label of the device its own timings ran on
    assert set(result.measured_on) == set(result.seconds)
    assert result.measured_on["numpy-matmul"].startswith("measured here on: ")
    assert "cuda" not in result.measured_on["numpy-matmul"].lower() or numba_cuda_mode() == "real"


def test_sweep_stops_slow_backends():
    result = crossover.sweep([8, 16, 32], backends=["numpy-broadcast"], repeat=1, max_seconds_per_call=0.0)
    secs = result.seconds["numpy-broadcast"]
    assert secs[0] > 0 and math.isnan(secs[1]) and math.isnan(secs[2])


def test_cited_figures_and_plot_labels():
    import matplotlib

    matplotlib.use("Agg")
    figures = {f["figure"]: f for f in crossover.cited_gpu_figures()}
    assert figures["cupy_speedup_over_numpy"]["value"] == 4.0
    assert all(f["source"].startswith("ETH Zurich Scientific IT Services") for f in figures.values())
    result = crossover.Sweep([16, 32], {"numpy-matmul": [1e-4, 2e-4], "numba-cpu": [5e-5, 6e-5]},
                             measured_on={"numpy-matmul": "measured here on: test CPU",
                                          "numba-cpu": "measured here on: test CPU"},
                             not_timed={"numba-cuda": "simulator, not timed"})
    left, right = crossover.plot(result)
    labels = [t.get_text() for t in right.get_legend().get_texts()]
    assert any("cited" in label and "ETH" in label for label in labels)
    assert "measured here on: test CPU" in left.get_title()
    assert "simulator, not timed" in right.get_title()
