import matplotlib
import numpy as np
import pytest

from course_lib import memory_hierarchy as mh

matplotlib.use("Agg")


def test_stride_sweep_rows():
    rows = mh.stride_sweep(strides=(1, 4, 16), nbytes=4 * 2**20, repeat=2)
    assert [r["stride"] for r in rows] == [1, 4, 16]
    assert rows[1]["elements"] == 2**20 // 4
    assert all(r["seconds"] > 0 and r["ns_per_element"] > 0 for r in rows)
    mh.plot_stride(rows)


def test_working_set_sweep_rows():
    rows = mh.working_set_sweep([2**14, 2**20], repeat=2)
    assert [r["bytes"] for r in rows] == [2**14, 2**20]
    assert all(r["bandwidth"] > 1e7 for r in rows)
    mh.plot_working_set(rows, {"L1d": 2**15, "L1i": 2**15, "L2": 2**20})


def test_false_sharing_reports_seconds_and_whether_threads_ran_together():
    r = mh.false_sharing(increments=100_000, repeat=2)
    for key in ("alone", "padded", "adjacent"):
        assert 0 < r[key] < 60, key  # seconds
    assert r["slowdown"] == r["adjacent"] / r["padded"]
    assert (r["gap_bytes"], r["counter_bytes"], r["increments"]) == (128, 8, 100_000)
    assert r["cores"] >= 1
    assert isinstance(r["ran_together"], bool)
    if r["cores"] < 2:
        assert not r["ran_together"]
    strict = mh.false_sharing(increments=1_000, repeat=1, together_factor=0.0)
    assert strict["ran_together"] is False  # no pair of threads takes 0x one thread's time


def test_false_sharing_counters_really_are_incremented():
    counters = np.zeros(64, dtype=np.int64)
    mh._bump()(counters, np.full(8, 3, dtype=np.int64), 1000)
    assert counters[3] == 1000 and counters.sum() == 1000


def test_false_sharing_rejects_a_gap_outside_the_counter_array():
    with pytest.raises(ValueError):
        mh.false_sharing(gap_bytes=8)
    with pytest.raises(ValueError):
        mh.false_sharing(gap_bytes=1024)
