"""Data for the training lessons (08-11): MNIST-like images, honest fallbacks, synthetic tensors.

Where the images come from, in order (the loader says which one it used):

1. IDX files of MNIST or Fashion-MNIST already in the cache folder, gzip-compressed or raw
   (``$COURSE_DATA_DIR``, default ``data/cache/`` in the repository);
2. the same files downloaded into that folder, when the network answers within a few seconds
   (never when ``COURSE_OFFLINE=1``);
3. scikit-learn's bundled handwritten digits (1,797 images of 8x8 pixels), resized to 28x28:
   real handwriting that ships inside a dependency, much smaller than MNIST.

``synthetic_dataset`` makes random tensors of any shape for timing demos, where the values do
not matter but the bytes moved do.
"""
from __future__ import annotations

import gzip
import os
import struct
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, TensorDataset

IDX_FILES = {
    ("train", "images"): "train-images-idx3-ubyte",
    ("train", "labels"): "train-labels-idx1-ubyte",
    ("test", "images"): "t10k-images-idx3-ubyte",
    ("test", "labels"): "t10k-labels-idx1-ubyte",
}
MIRRORS = {
    "mnist": ["https://ossci-datasets.s3.amazonaws.com/mnist/"],
    "fashion-mnist": ["http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"],
}
CLASSES = {
    "mnist": [str(d) for d in range(10)],
    "fashion-mnist": ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt",
                      "Sneaker", "Bag", "Ankle boot"],
}
# IDX type codes (third byte of the magic number) -> NumPy big-endian dtype
_IDX_DTYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def cache_dir() -> Path:
    """The folder holding downloaded data: ``$COURSE_DATA_DIR`` or ``data/cache`` of the repository."""
    env = os.environ.get("COURSE_DATA_DIR")
    if env:
        return Path(env).expanduser()
    repo_data = Path(__file__).resolve().parents[1] / "data"
    if repo_data.is_dir():
        return repo_data / "cache"
    return Path.home() / ".cache" / "course_lib"


# ---------------------------------------------------------------- the IDX format
def read_idx(path: str | os.PathLike) -> np.ndarray:
    """Read an IDX file (the MNIST format), gzip-compressed or raw, into a NumPy array.

    Layout: two zero bytes, a type code, the number of dimensions, one big-endian int32 size
    per dimension, then the values in C order.
    """
    raw = Path(path).read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] not in _IDX_DTYPES:
        raise ValueError(f"{path} is not an IDX file (magic bytes {raw[:4]!r})")
    ndim = raw[3]
    shape = struct.unpack(f">{ndim}i", raw[4:4 + 4 * ndim])
    dtype = np.dtype(_IDX_DTYPES[raw[2]])
    count = int(np.prod(shape, dtype=np.int64))
    offset = 4 + 4 * ndim
    if len(raw) - offset != count * dtype.itemsize:
        raise ValueError(f"{path}: header says shape {shape} but the file holds "
                         f"{len(raw) - offset} bytes of data")
    values = np.frombuffer(raw, dtype=dtype, count=count, offset=offset)
    return values.reshape(shape).astype(dtype.newbyteorder("="))


def write_idx(array: np.ndarray, path: str | os.PathLike, compress: bool | None = None) -> Path:
    """Write ``array`` as an IDX file; gzip it when ``compress`` (default: path ends in .gz)."""
    array = np.asarray(array)
    codes = {np.dtype(v).newbyteorder("="): k for k, v in _IDX_DTYPES.items()}
    code = codes.get(array.dtype.newbyteorder("="))
    if code is None:
        raise ValueError(f"IDX cannot store dtype {array.dtype}")
    header = bytes([0, 0, code, array.ndim]) + struct.pack(f">{array.ndim}i", *array.shape)
    payload = header + array.astype(_IDX_DTYPES[code]).tobytes()
    path = Path(path)
    if compress if compress is not None else path.suffix == ".gz":
        payload = gzip.compress(payload)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(payload)
    return path


def find_idx(name: str, split: str, kind: str, root: Path | None = None) -> Path | None:
    """Path of the cached IDX file of ``name`` ('mnist' or 'fashion-mnist'), ``split``
    ('train'/'test') and ``kind`` ('images'/'labels'), raw or .gz; None when absent."""
    folder = (root or cache_dir()) / name
    stem = IDX_FILES[(split, kind)]
    for candidate in (folder / stem, folder / (stem + ".gz")):
        if candidate.is_file():
            return candidate
    return None


# ---------------------------------------------------------------- downloading
def _fetch(url: str, target: Path, timeout: float) -> None:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        data = response.read()
    part = target.with_suffix(target.suffix + ".part")
    part.write_bytes(data)
    read_idx(part)  # refuse anything that is not a well-formed IDX file
    part.replace(target)


def download(name: str, timeout: float = 5.0, root: Path | None = None) -> bool:
    """Try to download the four IDX files of ``name`` into the cache; True when all are there.

    Gives up after ``timeout`` seconds per file (name lookup included: each fetch runs in a
    background thread that is abandoned when late), and at once when ``COURSE_OFFLINE=1``.
    """
    if os.environ.get("COURSE_OFFLINE", "") not in ("", "0"):
        return False
    folder = (root or cache_dir()) / name
    folder.mkdir(parents=True, exist_ok=True)
    for (split, kind), stem in IDX_FILES.items():
        if find_idx(name, split, kind, root):
            continue
        fetched = False
        for mirror in MIRRORS[name]:
            errors: list[BaseException] = []
            target = folder / (stem + ".gz")

            # bound here: a thread abandoned late reports into its own mirror's list, not the next one's
            def attempt(url=mirror + stem + ".gz", target=target, errors=errors):
                try:
                    _fetch(url, target, timeout)
                except BaseException as exc:  # reported through `errors`
                    errors.append(exc)

            worker = threading.Thread(target=attempt, daemon=True)
            worker.start()
            worker.join(timeout * 4)  # the socket timeout bounds each read; this bounds DNS too
            if not worker.is_alive() and not errors and target.is_file():
                fetched = True
                break
        if not fetched:
            return False
    return True


# ---------------------------------------------------------------- datasets
@dataclass
class ImageData:
    """Train and test sets of images (N, 1, 28, 28) float32, normalised, with int64 labels."""

    name: str
    train: TensorDataset
    test: TensorDataset
    classes: list[str]
    source: str

    @property
    def notice(self) -> str:
        """One sentence saying which data this is and where it came from."""
        return (f"Dataset: {self.name} ({len(self.train)} training and {len(self.test)} test "
                f"images of {tuple(self.train.tensors[0].shape[1:])}) - {self.source}")


def _normalise(train_x: torch.Tensor, test_x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    mean, std = train_x.mean(), train_x.std()
    return (train_x - mean) / std, (test_x - mean) / std


def _from_idx(name: str, root: Path | None) -> ImageData | None:
    paths = {key: find_idx(name, *key, root=root) for key in IDX_FILES}
    if not all(paths.values()):
        return None
    arrays = {key: read_idx(path) for key, path in paths.items()}
    train_x = torch.from_numpy(arrays[("train", "images")].astype(np.float32) / 255.0).unsqueeze(1)
    test_x = torch.from_numpy(arrays[("test", "images")].astype(np.float32) / 255.0).unsqueeze(1)
    train_x, test_x = _normalise(train_x, test_x)
    train_y = torch.from_numpy(arrays[("train", "labels")].astype(np.int64))
    test_y = torch.from_numpy(arrays[("test", "labels")].astype(np.int64))
    folder = paths[("train", "images")].parent
    return ImageData(name, TensorDataset(train_x, train_y), TensorDataset(test_x, test_y),
                     CLASSES[name], f"IDX files in {folder}")


def _sklearn_digits() -> tuple[np.ndarray, np.ndarray]:
    """(images of shape (1797, 8, 8) in grey levels 0-16, labels): the file scikit-learn ships
    (``sklearn/datasets/data/digits.csv.gz``), read as ``sklearn.datasets.load_digits`` reads it
    but without importing scikit-learn (1.6 s of CPU on the course's 2-core machine, 30 ms here)."""
    import importlib.util  # noqa: PLC0415

    spec = importlib.util.find_spec("sklearn")   # finds the package without importing it
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("scikit-learn is not installed: its bundled digits are the last fallback")
    path = Path(next(iter(spec.submodule_search_locations))) / "datasets" / "data" / "digits.csv.gz"
    table = np.loadtxt(path, delimiter=",")
    return table[:, :-1].reshape(-1, 8, 8), table[:, -1].astype(np.int64)


def load_digits_28(test_fraction: float = 1 / 6, seed: int = 0) -> ImageData:
    """scikit-learn's 1,797 handwritten digits (8x8, 17 grey levels) resized to 28x28 by
    bilinear interpolation, split into train and test sets with a fixed shuffle."""
    pixels, target = _sklearn_digits()
    images = torch.from_numpy(pixels.astype(np.float32) / 16.0).unsqueeze(1)
    images = torch.nn.functional.interpolate(images, size=(28, 28), mode="bilinear",
                                             align_corners=False)
    labels = torch.from_numpy(target.astype(np.int64))
    order = torch.randperm(len(labels), generator=torch.Generator().manual_seed(seed))
    n_test = int(round(len(labels) * test_fraction))
    test_idx, train_idx = order[:n_test], order[n_test:]
    train_x, test_x = _normalise(images[train_idx], images[test_idx])
    return ImageData("sklearn-digits-28x28", TensorDataset(train_x, labels[train_idx]),
                     TensorDataset(test_x, labels[test_idx]), CLASSES["mnist"],
                     "scikit-learn's bundled 8x8 digits resized to 28x28 (MNIST was not found "
                     "and could not be downloaded)")


def load_dataset(name: str = "mnist", allow_download: bool = True, timeout: float = 5.0,
                 root: Path | None = None, verbose: bool = True) -> ImageData:
    """MNIST or Fashion-MNIST from the cache, else downloaded, else the resized sklearn digits.

    Prints (when ``verbose``) a notice naming the data actually returned.
    """
    if name not in MIRRORS:
        raise ValueError(f"unknown dataset {name!r}; choose from {sorted(MIRRORS)}")
    data = _from_idx(name, root)
    if data is None and allow_download and download(name, timeout=timeout, root=root):
        data = _from_idx(name, root)
        if data is not None:
            data.source = f"downloaded into {(root or cache_dir()) / name}"
    if data is None:
        data = load_digits_28()
        if name != "mnist":
            data.source = data.source.replace("MNIST", name)
    if verbose:
        print(data.notice)
    return data


def synthetic_dataset(shape: tuple[int, ...] = (1, 28, 28), size: int = 1024,
                      num_classes: int = 10, seed: int = 0) -> TensorDataset:
    """``size`` random float32 samples of ``shape`` with random labels: for timing only."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn((size, *shape), generator=gen)
    y = torch.randint(0, num_classes, (size,), generator=gen)
    return TensorDataset(x, y)


class SlowDataset(Dataset):
    """Wraps a dataset and waits ``seconds_per_item`` in every ``__getitem__``.

    Stands in for the real per-sample cost of a data pipeline (reading a file, decoding a
    JPEG, augmenting) so that a lesson can show an accelerator starved by its loader, and
    how loader worker processes hide the cost.
    """

    def __init__(self, base: Dataset, seconds_per_item: float = 1e-3):
        self.base = base
        self.seconds_per_item = seconds_per_item

    def __len__(self) -> int:
        return len(self.base)

    def __getitem__(self, index):
        time.sleep(self.seconds_per_item)
        return self.base[index]


def make_loader(dataset: Dataset, batch_size: int = 64, num_workers: int = 0,
                shuffle: bool = True, seed: int = 0, device=None, **kwargs) -> DataLoader:
    """A ``DataLoader`` over ``dataset`` with a seeded shuffle.

    ``num_workers`` worker processes prepare batches while the model trains (0: the training
    process loads every batch itself, in between steps). ``device`` is where the batches will
    be used: only when it is a usable CUDA GPU are they put in pinned (page-locked) host memory,
    which lets the copy to the GPU run asynchronously (lesson 07). A CPU run is never pinned,
    even on a machine that has a GPU: pinning would cost time and CUDA memory for nothing.
    """
    on_cuda = device is not None and torch.device(device).type == "cuda"
    kwargs.setdefault("pin_memory", on_cuda and torch.cuda.is_available())
    if num_workers > 0:
        kwargs.setdefault("persistent_workers", False)
    return DataLoader(dataset, batch_size=batch_size, shuffle=shuffle, num_workers=num_workers,
                      generator=torch.Generator().manual_seed(seed), **kwargs)


def make_loaders(data: ImageData, batch_size: int = 64, num_workers: int = 0,
                 test_batch_size: int = 1000, device=None) -> tuple[DataLoader, DataLoader]:
    """Shuffled training loader and ordered test loader of ``data``; ``device`` is where the
    training batches go (pinned host memory only for a CUDA run, see :func:`make_loader`)."""
    return (make_loader(data.train, batch_size, num_workers, device=device),
            make_loader(data.test, test_batch_size, 0, shuffle=False))
