import os

import pytest

from course_lib import storage


def test_disk_reads_reports_rates_in_bytes_per_second_and_leaves_no_file(tmp_path):
    r = storage.disk_reads(file_bytes=2**20, chunk_bytes=2**16, page_bytes=4096, random_reads=50,
                           budget_s=0.2, folder=str(tmp_path), seed=1)
    assert (r["file_bytes"], r["chunk_bytes"], r["page_bytes"]) == (2**20, 2**16, 4096)
    for key in ("write_bytes_per_s", "sequential_bytes_per_s", "sequential_cached_bytes_per_s",
                "random_bytes_per_s", "random_seconds", "random_cached_seconds"):
        assert r[key] > 0, key
    assert r["random_bytes_per_s"] == pytest.approx(4096 / r["random_seconds"])
    assert r["random_seconds"] < 0.2 + 0.1  # one read never outlasts the budget by much
    assert 1 <= r["random_reads_done"] <= 50
    assert r["could_drop_cache"] == hasattr(os, "posix_fadvise")
    assert isinstance(r["disk"], str) and r["disk"]
    assert list(tmp_path.iterdir()) == []  # the temporary file is gone


def test_disk_reads_rejects_a_file_smaller_than_a_chunk(tmp_path):
    with pytest.raises(ValueError):
        storage.disk_reads(file_bytes=4096, chunk_bytes=2**20, folder=str(tmp_path))
    with pytest.raises(ValueError):
        storage.disk_reads(file_bytes=2**20 + 1, chunk_bytes=2**16, folder=str(tmp_path))


def test_disk_of_names_the_partition_of_a_path(tmp_path):
    label = storage.disk_of(str(tmp_path))
    assert " at /" in label or label.startswith("an unknown disk")


def test_checkpoint_size_and_time():
    assert storage.checkpoint_bytes(1_000) == 12_000  # float32 weights + two Adam moments
    assert storage.checkpoint_bytes(1_000, bytes_per_parameter=2) == 2_000
    assert storage.checkpoint_seconds(1e9, 2e8) == pytest.approx(60.0)
    assert storage.checkpoint_seconds(1e9, 2e8, bytes_per_parameter=4) == pytest.approx(20.0)
