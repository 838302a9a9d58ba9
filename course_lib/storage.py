"""Disks from Python: sequential against random reads, the page cache, write bandwidth (lesson 01).

* :func:`disk_reads` writes a temporary file (and waits for ``fsync``), then reads it in large
  chunks in order and in small pieces at random places, each once from the device (after asking
  the operating system to drop the file from its page cache) and once from that cache (RAM).
* :func:`checkpoint_bytes` and :func:`checkpoint_seconds` turn a parameter count and a write
  bandwidth into the size and time of a training checkpoint.

Units: bytes, seconds, bytes per second. Dropping the cache uses ``os.posix_fadvise`` (Linux);
where it is missing every pass may come from the cache, which the result says
(``could_drop_cache``). On a virtual machine the "device" is a disk image the host may cache.
"""
from __future__ import annotations

import os
import tempfile
import time

import numpy as np
import psutil


def _drop_from_cache(fd: int) -> bool:
    """Ask the OS to forget the file's cached pages; False where it cannot be asked."""
    if not hasattr(os, "posix_fadvise"):
        return False
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    return True


def _sequential_read(fd: int, file_bytes: int, chunk_bytes: int) -> float:
    """Bytes per second of reading the whole file in order, ``chunk_bytes`` at a time."""
    start, offset = time.perf_counter(), 0
    while offset < file_bytes:
        got = len(os.pread(fd, chunk_bytes, offset))
        if got == 0:
            raise OSError(f"file ended at byte {offset} of {file_bytes}")
        offset += got
    return file_bytes / (time.perf_counter() - start)


def _random_reads(fd: int, offsets, page_bytes: int, budget_s: float) -> tuple[float, int]:
    """(seconds per read, reads done): ``page_bytes`` at each offset in turn, stopping once
    ``budget_s`` seconds have passed (a hard disk needs about 10 ms per random read)."""
    start, done = time.perf_counter(), 0
    for offset in offsets:
        os.pread(fd, page_bytes, int(offset))
        done += 1
        if time.perf_counter() - start > budget_s:
            break
    return (time.perf_counter() - start) / done, done


def disk_of(path: str) -> str:
    """The partition holding ``path``: 'device (filesystem) at mount point', from psutil."""
    path = os.path.realpath(path)
    parts = [p for p in psutil.disk_partitions(all=True)
             if path == p.mountpoint or path.startswith(p.mountpoint.rstrip(os.sep) + os.sep)]
    if not parts:
        return f"an unknown disk holding {path}"
    part = max(parts, key=lambda p: len(p.mountpoint))
    return f"{part.device} ({part.fstype}) at {part.mountpoint}"


def disk_reads(file_bytes: int = 32 * 2**20, chunk_bytes: int = 2**20, page_bytes: int = 4096,
               random_reads: int = 2000, budget_s: float = 1.0, folder: str | None = None,
               seed: int = 0) -> dict:
    """Write a ``file_bytes`` file of random bytes in ``folder`` (default: the system's temporary
    folder), fsync it, read it back, delete it. Returns a dict:

    * ``write_bytes_per_s``: write + fsync bandwidth (bytes/s);
    * ``sequential_bytes_per_s`` / ``sequential_cached_bytes_per_s``: reading the whole file in
      ``chunk_bytes`` chunks from the device / from the page cache (bytes/s);
    * ``random_seconds`` / ``random_cached_seconds``: seconds per ``page_bytes`` read at a random
      page-aligned offset, device / cache; ``random_reads_done``: device reads done within
      ``budget_s`` seconds (at most ``random_reads``); ``random_bytes_per_s`` the device's rate;
    * ``file_bytes``, ``chunk_bytes``, ``page_bytes`` (bytes); ``could_drop_cache`` (False: the
      "device" figures may be cache hits too); ``disk``: the partition the file was on.

    With the defaults it takes about 1 to 3 seconds: the random reads stop after ``budget_s``.
    """
    if file_bytes < max(chunk_bytes, page_bytes) or file_bytes % page_bytes:
        raise ValueError("file_bytes must be a multiple of page_bytes and at least one chunk")
    rng = np.random.default_rng(seed)
    with tempfile.TemporaryDirectory(dir=folder) as tmp:
        path = os.path.join(tmp, "blob.bin")
        start = time.perf_counter()
        with open(path, "wb") as fh:
            fh.write(rng.integers(0, 256, file_bytes, dtype=np.uint8).tobytes())
            fh.flush()
            os.fsync(fh.fileno())  # on the device, not only in the page cache
        write_bw = file_bytes / (time.perf_counter() - start)
        offsets = rng.integers(0, file_bytes // page_bytes, random_reads) * page_bytes
        fd = os.open(path, os.O_RDONLY)
        try:
            dropped = _drop_from_cache(fd)
            seq_cold = _sequential_read(fd, file_bytes, chunk_bytes)
            seq_cached = _sequential_read(fd, file_bytes, chunk_bytes)
            dropped = _drop_from_cache(fd) and dropped
            rand_cold, done = _random_reads(fd, offsets, page_bytes, budget_s)
            rand_cached, _ = _random_reads(fd, offsets[:max(1, random_reads // 4)], page_bytes,
                                           budget_s)
        finally:
            os.close(fd)
        disk = disk_of(tmp)
    return {"file_bytes": file_bytes, "chunk_bytes": chunk_bytes, "page_bytes": page_bytes,
            "write_bytes_per_s": write_bw, "sequential_bytes_per_s": seq_cold,
            "sequential_cached_bytes_per_s": seq_cached, "random_seconds": rand_cold,
            "random_cached_seconds": rand_cached, "random_reads_done": done,
            "random_bytes_per_s": page_bytes / rand_cold, "could_drop_cache": dropped,
            "disk": disk}


def checkpoint_bytes(parameters: float, bytes_per_parameter: int = 12) -> float:
    """Bytes of a checkpoint: by default float32 weights plus Adam's two float32 moments
    (3 x 4 = 12 bytes per parameter)."""
    return parameters * bytes_per_parameter


def checkpoint_seconds(parameters: float, write_bytes_per_s: float,
                       bytes_per_parameter: int = 12) -> float:
    """Seconds to write :func:`checkpoint_bytes` at ``write_bytes_per_s`` (bytes/s), e.g. the
    ``write_bytes_per_s`` of :func:`disk_reads`."""
    return checkpoint_bytes(parameters, bytes_per_parameter) / write_bytes_per_s
