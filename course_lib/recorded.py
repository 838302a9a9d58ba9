"""Figures recorded on a real GPU, shown beside what this machine measures (lessons 01, 04-08, 12, 14, 15).

Some effects exist only on a GPU: tensor cores making bfloat16 faster than float32, CUDA graphs
removing launch costs, copies overlapping compute, a GPU beating the CPU once a problem is large.
On a laptop without one, the lesson's own measurement shows the opposite or nothing. So a lesson
prints its local figure and, beside it, the figure its own cell printed on a real GPU, read from
``data/gpu_recorded.csv``: one row per figure with its value and unit, the device, driver, torch and
CUDA versions, the date and commit of the run, whether the notebook had the GPU to itself
(``sharing``: ``alone`` or e.g. ``4 notebooks at once``), what was measured (``setup``), and the
report file under ``reports/`` whose text contains the row's ``quote`` (the line the run printed).
Nothing here measures anything: every value is one a run printed.
"""
from __future__ import annotations

import csv
import functools
from dataclasses import dataclass
from pathlib import Path

from .hardware import DATA_DIR, describe_device

CSV_PATH = DATA_DIR / "gpu_recorded.csv"
ALONE = "alone"


@dataclass(frozen=True)
class Recorded:
    """One figure a lesson printed on a real GPU. ``value`` is in ``unit`` ("x" is a ratio,
    "us"/"ms"/"s" are seconds scaled, "GB/s" bytes per second / 1e9, "TFLOP/s" FLOPs per
    second / 1e12); ``text`` is the value as the run printed it."""

    key: str
    lesson: str
    value: float
    text: str
    unit: str
    device: str
    driver: str
    torch: str
    cuda: str
    date: str
    commit: str
    sharing: str
    setup: str
    source: str
    quote: str

    @property
    def shown(self) -> str:
        """The value with its unit: '9.6x', '2663 GB/s'."""
        return f"{self.text}{self.unit}" if self.unit in ("x", "%") else f"{self.text} {self.unit}"

    @property
    def label(self) -> str:
        """'recorded on NVIDIA H100 80GB HBM3, 2026-11-26 (4 notebooks at once)'; a run that had
        the GPU to itself gets no parenthesis."""
        shared = "" if self.sharing == ALONE else f" ({self.sharing})"
        return f"recorded on {self.device}, {self.date}{shared}"

    def __str__(self) -> str:
        return f"{self.label}: {self.shown}"


@functools.cache
def _load(path: str) -> dict[str, Recorded]:
    with Path(path).open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    out = {}
    for row in rows:
        if row["key"] in out:
            raise ValueError(f"{path}: key {row['key']!r} appears twice")
        out[row["key"]] = Recorded(value=float(row["value"]), text=row["value"],
                                   **{k: v for k, v in row.items() if k != "value"})
    return out


def figures(path: Path | str = CSV_PATH) -> dict[str, Recorded]:
    """Every recorded figure by key ('05.cuda_graph_speedup'); the key starts with its lesson."""
    return dict(_load(str(path)))


def figure(key: str, path: Path | str = CSV_PATH) -> Recorded:
    """The recorded figure ``key``; KeyError naming the file when it has no such row."""
    table = _load(str(path))
    if key not in table:
        raise KeyError(f"no recorded GPU figure {key!r} in {path}")
    return table[key]


def for_lesson(lesson: str, path: Path | str = CSV_PATH) -> list[Recorded]:
    """The recorded figures of one lesson ('05'), in file order."""
    return [f for f in _load(str(path)).values() if f.lesson == lesson]


def side_by_side(local: str, key: str, device="cpu", threads: int | None = None) -> str:
    """One line: the figure measured here (already formatted, e.g. '0.47x') and the recorded one,
    'measured here on Intel(R) Core(TM) ... (CPU, 2 threads of 8 logical cores): 0.47x;
    recorded on NVIDIA H100 80GB HBM3, 2026-11-23: 0.61x'."""
    return f"measured here on {describe_device(device, threads=threads)}: {local}; {figure(key)}"


def on_gpu(*keys: str, intro: str = "What a GPU showed") -> str:
    """Lines for a cell that cannot measure here: each figure as a real GPU printed it, what was
    measured and its label (the report file of each is in ``data/gpu_recorded.csv``)."""
    lines = [f"{intro} ({CSV_PATH.parent.name}/{CSV_PATH.name}):"]
    for key in keys:
        f = figure(key)
        lines.append(f"  {f.shown:>10}  {f.setup}; {f.label}")
    return "\n".join(lines)
