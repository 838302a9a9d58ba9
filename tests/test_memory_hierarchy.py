import matplotlib

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
