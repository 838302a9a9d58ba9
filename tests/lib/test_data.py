import gzip

import numpy as np
import pytest
import torch

from course_lib import data


@pytest.fixture
def tiny_mnist(tmp_path):
    """Four tiny IDX files (two raw, two gzip) laid out like the MNIST download."""
    rng = np.random.default_rng(0)
    folder = tmp_path / "mnist"
    arrays = {
        "train-images-idx3-ubyte.gz": rng.integers(0, 256, (12, 28, 28), dtype=np.uint8),
        "train-labels-idx1-ubyte": rng.integers(0, 10, 12, dtype=np.uint8),
        "t10k-images-idx3-ubyte": rng.integers(0, 256, (5, 28, 28), dtype=np.uint8),
        "t10k-labels-idx1-ubyte.gz": rng.integers(0, 10, 5, dtype=np.uint8),
    }
    for name, array in arrays.items():
        data.write_idx(array, folder / name)
    return tmp_path, arrays


def test_read_idx_parses_a_hand_written_header(tmp_path):
    # magic 0x00000803 (unsigned bytes, 3 dims), sizes 2, 2, 3 big-endian, then 12 values
    raw = bytes([0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 3]) + bytes(range(12))
    path = tmp_path / "images-idx3-ubyte"
    path.write_bytes(raw)
    np.testing.assert_array_equal(data.read_idx(path), np.arange(12, dtype=np.uint8).reshape(2, 2, 3))
    gz = tmp_path / "images-idx3-ubyte.gz"
    gz.write_bytes(gzip.compress(raw))
    np.testing.assert_array_equal(data.read_idx(gz), data.read_idx(path))


def test_read_idx_big_endian_ints(tmp_path):
    raw = bytes([0, 0, 0x0C, 1, 0, 0, 0, 2]) + (258).to_bytes(4, "big") + (-1).to_bytes(4, "big", signed=True)
    path = tmp_path / "ints"
    path.write_bytes(raw)
    np.testing.assert_array_equal(data.read_idx(path), [258, -1])


def test_read_idx_rejects_other_files_and_truncation(tmp_path):
    bad = tmp_path / "bad"
    bad.write_bytes(b"PK\x03\x04 not idx")
    with pytest.raises(ValueError, match="not an IDX"):
        data.read_idx(bad)
    short = tmp_path / "short"
    short.write_bytes(bytes([0, 0, 8, 1, 0, 0, 0, 5, 1, 2]))
    with pytest.raises(ValueError, match="header says"):
        data.read_idx(short)


@pytest.mark.parametrize("dtype", [np.uint8, np.int16, np.int32, np.float32, np.float64])
def test_write_then_read_round_trip(tmp_path, dtype):
    array = (np.arange(24).reshape(2, 3, 4) - 5).astype(dtype) if dtype != np.uint8 else np.arange(24, dtype=dtype)
    path = data.write_idx(array, tmp_path / "a.gz")
    back = data.read_idx(path)
    np.testing.assert_array_equal(back, array)
    assert back.dtype == array.dtype
    with pytest.raises(ValueError):
        data.write_idx(np.zeros(3, dtype=np.complex64), tmp_path / "c")


def test_find_idx_accepts_raw_and_gzip(tiny_mnist):
    root, _ = tiny_mnist
    assert data.find_idx("mnist", "train", "images", root).name.endswith(".gz")
    assert data.find_idx("mnist", "test", "images", root).name == "t10k-images-idx3-ubyte"
    assert data.find_idx("fashion-mnist", "train", "images", root) is None


def test_load_dataset_reads_cached_idx_files(tiny_mnist, capsys):
    root, arrays = tiny_mnist
    loaded = data.load_dataset("mnist", allow_download=False, root=root)
    assert loaded.name == "mnist"
    assert "IDX files" in capsys.readouterr().out
    x, y = loaded.train.tensors
    assert x.shape == (12, 1, 28, 28) and x.dtype == torch.float32
    np.testing.assert_array_equal(y.numpy(), arrays["train-labels-idx1-ubyte"])
    assert abs(float(x.mean())) < 1e-5 and abs(float(x.std()) - 1) < 1e-4
    # normalisation preserves the order of pixel values
    raw = arrays["train-images-idx3-ubyte.gz"].astype(np.float32)
    assert np.corrcoef(raw.ravel(), x.numpy().ravel())[0, 1] > 0.9999
    assert len(loaded.test) == 5


def test_cache_dir_honours_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("COURSE_DATA_DIR", str(tmp_path))
    assert data.cache_dir() == tmp_path
    monkeypatch.delenv("COURSE_DATA_DIR")
    assert data.cache_dir().name in ("cache", "course_lib")


def test_download_returns_false_offline_without_network(monkeypatch, tmp_path):
    monkeypatch.setenv("COURSE_OFFLINE", "1")
    assert data.download("mnist", root=tmp_path) is False


def test_download_gives_up_on_an_unreachable_mirror(monkeypatch, tmp_path):
    monkeypatch.delenv("COURSE_OFFLINE", raising=False)
    monkeypatch.setitem(data.MIRRORS, "mnist", ["http://127.0.0.1:9/"])
    assert data.download("mnist", timeout=1.0, root=tmp_path) is False
    assert not list((tmp_path / "mnist").glob("*ubyte*"))


def test_download_uses_the_mirror_and_validates(monkeypatch, tmp_path):
    source = tmp_path / "mirror"
    for stem in data.IDX_FILES.values():
        data.write_idx(np.zeros((2, 28, 28) if "images" in stem else 2, dtype=np.uint8),
                       source / (stem + ".gz"))
    monkeypatch.delenv("COURSE_OFFLINE", raising=False)
    monkeypatch.setitem(data.MIRRORS, "mnist", [source.as_uri() + "/"])
    cache = tmp_path / "cache"
    assert data.download("mnist", root=cache) is True
    loaded = data.load_dataset("mnist", allow_download=False, root=cache, verbose=False)
    assert len(loaded.train) == 2


def test_fallback_to_sklearn_digits_says_so(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("COURSE_OFFLINE", "1")
    loaded = data.load_dataset("fashion-mnist", root=tmp_path)
    out = capsys.readouterr().out
    assert "sklearn-digits" in out and "fashion-mnist was not found" in out
    x, y = loaded.train.tensors
    assert x.shape[1:] == (1, 28, 28)
    assert len(loaded.train) + len(loaded.test) == 1797
    assert set(y.tolist()) == set(range(10))


def test_unknown_dataset_is_refused():
    with pytest.raises(ValueError, match="unknown dataset"):
        data.load_dataset("cifar")


def test_synthetic_dataset_shape_and_determinism():
    a = data.synthetic_dataset((3, 8, 8), size=10, num_classes=4, seed=1)
    b = data.synthetic_dataset((3, 8, 8), size=10, num_classes=4, seed=1)
    assert a.tensors[0].shape == (10, 3, 8, 8)
    assert int(a.tensors[1].max()) < 4
    assert torch.equal(a.tensors[0], b.tensors[0])


def test_slow_dataset_waits_per_item(monkeypatch):
    slept = []
    monkeypatch.setattr(data.time, "sleep", slept.append)
    slow = data.SlowDataset(data.synthetic_dataset(size=4), seconds_per_item=0.25)
    assert len(slow) == 4
    x, y = slow[2]
    assert x.shape == (1, 28, 28) and slept == [0.25]


def test_loaders_batch_size_and_workers():
    base = data.synthetic_dataset(size=10)
    loader = data.make_loader(base, batch_size=4, num_workers=0)
    assert [len(y) for _, y in loader] == [4, 4, 2]
    assert loader.num_workers == 0
    assert data.make_loader(base, batch_size=4, num_workers=2).num_workers == 2
    images = data.ImageData("synthetic", base, data.synthetic_dataset(size=6), ["a"], "test")
    train, test = data.make_loaders(images, batch_size=5, test_batch_size=3)
    assert len(train) == 2 and len(test) == 2
    first = torch.cat([y for _, y in test])
    assert torch.equal(first, images.test.tensors[1])  # the test loader keeps the order


def test_loader_with_worker_processes_yields_everything():
    base = data.synthetic_dataset(size=8)
    loader = data.make_loader(base, batch_size=3, num_workers=1, shuffle=False)
    assert torch.equal(torch.cat([y for _, y in loader]), base.tensors[1])


def test_make_loader_pins_only_for_a_cuda_run(monkeypatch):
    base = data.synthetic_dataset(size=8)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert not data.make_loader(base, batch_size=4).pin_memory
    assert not data.make_loader(base, batch_size=4, device="cpu").pin_memory
    assert data.make_loader(base, batch_size=4, device="cuda").pin_memory
    assert not data.make_loader(base, batch_size=4, device="cuda", pin_memory=False).pin_memory
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert not data.make_loader(base, batch_size=4, device="cuda").pin_memory


def test_the_digits_fallback_is_scikit_learns_own_digits_read_without_importing_it():
    import subprocess
    import sys

    from sklearn.datasets import load_digits

    images, labels = data._sklearn_digits()
    reference = load_digits()
    assert np.array_equal(images, reference.images) and np.array_equal(labels, reference.target)
    probe = "import sys; from course_lib import data; data.load_digits_28(); print('sklearn' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.strip() \
        == "False"
