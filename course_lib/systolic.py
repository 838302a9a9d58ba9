"""Systolic arrays, simulated cycle by cycle: how a TPU-like chip multiplies matrices (lesson 12).

A systolic array is a grid of ``rows x cols`` processing elements (PEs). Every PE does
at most one multiply-accumulate (MAC) per clock cycle and passes its operands to its
neighbours: values move **one PE per cycle**, to the right or downwards. Nothing goes
back to memory in between, which is the whole point: each value read from memory is
reused by a whole row or column of PEs.

``C = A @ B`` with ``A`` of shape ``(M, K)`` and ``B`` of shape ``(K, N)``. Three
*dataflows* differ in which operand stays put in the PEs:

``"output"`` (output stationary)
    PE ``(i, j)`` keeps the accumulator of ``C[i, j]``. Row ``i`` of ``A`` enters from
    the left edge delayed by ``i`` cycles, column ``j`` of ``B`` enters from the top
    delayed by ``j`` cycles (the classic *skew*), so ``A[i, k]`` and ``B[k, j]`` meet
    in PE ``(i, j)`` at cycle ``i + j + k``.
``"weight"`` (weight stationary, the TPU v1 design)
    PE ``(k, j)`` keeps the weight ``B[k, j]``. ``A[i, k]`` enters row ``k`` at cycle
    ``i + k`` and moves right; partial sums of ``C[i, j]`` move down column ``j`` and
    leave the bottom edge complete.
``"input"`` (input stationary)
    PE ``(k, i)`` keeps the input ``A[i, k]``; columns of ``B`` stream in from the left
    and partial sums move down. It is the weight-stationary array computing
    ``C.T = B.T @ A.T``, which is how it is simulated here.

Cycle conventions (every count below is produced by the simulator and matches
:func:`cycle_count`; cycles are numbered from 0):

* **compute** cycles of one tile: from the cycle the first operand enters the array to
  the cycle of the last MAC (output stationary) or the cycle the last partial sum
  leaves the bottom edge (weight/input stationary). For a tile that uses ``m`` rows,
  ``n`` columns and a reduction of length ``k`` this is ``m + n + k - 2`` for every
  dataflow, where the *streamed* dimension is not limited by the array size.
  An ``n x n`` by ``n x n`` product on an ``n x n`` output-stationary array: ``3n - 2``.
* **drain** (output stationary only): after the last MAC the accumulators shift down
  one row per cycle and leave through the bottom edge: one cycle per used row.
* **load** (weight and input stationary only): before computing, the stationary
  operand shifts in from the top edge, one row per cycle: one cycle per used row.
* **tiling**: operands larger than the array are cut into tiles that run one after
  the other, without overlap (real chips overlap loading the next tile with
  computing this one; this simulator keeps the phases apart so they can be seen).
  Weight and input stationary tiles over the reduction dimension produce partial
  results that are added in accumulators outside the array (as in the TPU).
"""
from __future__ import annotations

import html
import math
from dataclasses import dataclass, field

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np

DATAFLOWS = ("output", "weight", "input")

#: What the three registers of each PE hold, per dataflow (for labels and the widget).
REGISTER_ROLES = {
    "output": {"horizontal": "A (moves right)", "vertical": "B (moves down)",
               "stationary": "accumulator of C"},
    "weight": {"horizontal": "A (moves right)", "vertical": "partial sum of C (moves down)",
               "stationary": "weight B"},
    "input": {"horizontal": "B (moves right)", "vertical": "partial sum of C (moves down)",
              "stationary": "input A"},
}


@dataclass
class Snapshot:
    """The state of every PE at the end of one cycle. Empty registers hold NaN.

    ``horizontal`` and ``vertical`` are the values in flight (moving right and down),
    ``stationary`` the value each PE keeps, ``mac`` marks the PEs that did a
    multiply-accumulate in this cycle. ``phase`` is ``"load"``, ``"compute"`` or
    ``"drain"``; ``tile`` numbers the tile (0, 1, ...) and ``cycle`` counts from the
    start of the whole run.
    """
    cycle: int
    tile: int
    phase: str
    horizontal: np.ndarray
    vertical: np.ndarray
    stationary: np.ndarray
    mac: np.ndarray


@dataclass
class CycleCount:
    """Cycles of a (possibly tiled) systolic matmul, by phase."""
    tiles: int
    load: int
    compute: int
    drain: int

    @property
    def total(self) -> int:
        return self.load + self.compute + self.drain


@dataclass
class SystolicRun:
    """What :func:`simulate` returns: the product, the cycles it took, per-cycle state."""
    dataflow: str
    rows: int
    cols: int
    result: np.ndarray
    counts: CycleCount
    macs: int
    snapshots: list[Snapshot] = field(default_factory=list, repr=False)

    @property
    def cycles(self) -> int:
        """Total cycles (load + compute + drain, all tiles)."""
        return self.counts.total

    @property
    def utilization(self) -> float:
        """Fraction of PE-cycles that did a MAC: ``macs / (cycles * rows * cols)``."""
        return self.macs / (self.cycles * self.rows * self.cols)

    def active_pes(self) -> np.ndarray:
        """Number of PEs doing a MAC in each recorded cycle (needs ``record=True``)."""
        return np.array([int(s.mac.sum()) for s in self.snapshots])


# ----------------------------------------------------------------- one tile
class _Recorder:
    """Collects snapshots (or nothing when recording is off) and counts cycles."""
    def __init__(self, record: bool, rows: int, cols: int):
        self.record, self.rows, self.cols = record, rows, cols
        self.snapshots: list[Snapshot] = []
        self.cycle = 0
        self.tile = 0

    def step(self, phase, horizontal, vertical, stationary, mac):
        if self.record:
            self.snapshots.append(Snapshot(self.cycle, self.tile, phase, horizontal.copy(),
                                           vertical.copy(), stationary.copy(), mac.copy()))
        self.cycle += 1


def _empty(rows: int, cols: int) -> np.ndarray:
    return np.full((rows, cols), np.nan)


def _output_stationary_tile(a, b, rec: _Recorder):
    """One output-stationary tile: ``a`` (m, K) and ``b`` (K, n) with m, n within the array.

    Returns (product (m, n), compute cycles, drain cycles, MACs done).
    """
    m, depth = a.shape
    n = b.shape[1]
    rows, cols = rec.rows, rec.cols
    h, v = _empty(rows, cols), _empty(rows, cols)
    acc = _empty(rows, cols)
    acc[:m, :n] = 0.0
    macs = 0
    compute = m + n + depth - 2
    for t in range(compute):
        h[:, 1:] = h[:, :-1].copy()            # A moves one PE to the right
        v[1:, :] = v[:-1, :].copy()            # B moves one PE down
        h[:, 0] = np.nan
        v[0, :] = np.nan
        for i in range(m):                     # row i of A enters skewed by i cycles
            if 0 <= t - i < depth:
                h[i, 0] = a[i, t - i]
        for j in range(n):                     # column j of B enters skewed by j cycles
            if 0 <= t - j < depth:
                v[0, j] = b[t - j, j]
        mac = ~np.isnan(h) & ~np.isnan(v)
        acc[mac] += h[mac] * v[mac]
        macs += int(mac.sum())
        rec.step("compute", h, v, acc, mac)
    out = np.zeros((m, n))
    no_mac = np.zeros((rows, cols), dtype=bool)
    h[:], v[:] = np.nan, np.nan
    for d in range(m):                         # results leave through the bottom edge
        out[m - 1 - d] = acc[m - 1, :n]
        acc[1:m] = acc[:m - 1].copy()
        acc[0] = np.nan
        rec.step("drain", h, v, acc, no_mac)
    return out, compute, m, macs


def _weight_stationary_tile(a, w, rec: _Recorder):
    """One weight-stationary tile: ``a`` (M, k) streams, weights ``w`` (k, n) stay.

    Returns (product (M, n), load cycles, compute cycles, MACs done).
    """
    rows_a, k = a.shape
    n = w.shape[1]
    rows, cols = rec.rows, rec.cols
    h, p = _empty(rows, cols), _empty(rows, cols)
    weights = _empty(rows, cols)
    no_mac = np.zeros((rows, cols), dtype=bool)
    for s in range(k):                         # weights shift in from the top, last row first
        weights[1:k] = weights[:k - 1].copy()
        weights[0, :n] = w[k - 1 - s]
        rec.step("load", h, p, weights, no_mac)
    out = np.full((rows_a, n), np.nan)
    macs = 0
    compute = rows_a + n + k - 2
    for t in range(compute):
        h[:, 1:] = h[:, :-1].copy()            # inputs move one PE to the right
        h[:, 0] = np.nan
        for r in range(k):                     # column r of A enters row r skewed by r
            if 0 <= t - r < rows_a:
                h[r, 0] = a[t - r, r]
        incoming = np.vstack([np.zeros((1, cols)), p[:-1]])   # partial sums from above
        mac = ~np.isnan(h) & ~np.isnan(weights)
        p = np.where(mac, np.nan_to_num(incoming) + np.nan_to_num(h * weights), np.nan)
        macs += int(mac.sum())
        for j in range(n):                     # a finished C[i, j] leaves the bottom row
            i = t - (k - 1) - j
            if 0 <= i < rows_a:
                out[i, j] = p[k - 1, j]
        rec.step("compute", h, p, weights, mac)
    return out, k, compute, macs


def _check_operands(a, b, dataflow, rows, cols):
    if dataflow not in DATAFLOWS:
        raise ValueError(f"dataflow must be one of {DATAFLOWS}, got {dataflow!r}")
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"need A (M, K) and B (K, N), got {a.shape} and {b.shape}")
    if min(a.shape + b.shape) < 1 or rows < 1 or cols < 1:
        raise ValueError("matrices and array must be non-empty")
    return a, b


def simulate(a, b, dataflow: str = "output", rows: int = 4, cols: int | None = None,
             record: bool = True) -> SystolicRun:
    """Multiply ``a @ b`` on a ``rows x cols`` systolic array, one clock cycle at a time.

    Matrices larger than the array are tiled (see the module docstring for the order
    and the cycle conventions). ``record=False`` skips the per-cycle snapshots (use it
    for large runs). The result is computed by the simulated PEs only, in float64.
    """
    cols = rows if cols is None else cols
    a, b = _check_operands(a, b, dataflow, rows, cols)
    rec = _Recorder(record, rows, cols)
    m_total, depth = a.shape
    n_total = b.shape[1]
    result = np.zeros((m_total, n_total))
    load = compute = drain = macs = tiles = 0
    if dataflow == "output":
        for i0 in range(0, m_total, rows):
            for j0 in range(0, n_total, cols):
                out, c, d, done = _output_stationary_tile(
                    a[i0:i0 + rows], b[:, j0:j0 + cols], rec)
                result[i0:i0 + rows, j0:j0 + cols] = out
                compute, drain, macs, tiles = compute + c, drain + d, macs + done, tiles + 1
                rec.tile += 1
    else:
        # input stationary = weight stationary on C.T = B.T @ A.T
        stream, stay = (a, b) if dataflow == "weight" else (b.T, a.T)
        partial = np.zeros((stream.shape[0], stay.shape[1]))
        for k0 in range(0, depth, rows):
            for j0 in range(0, stay.shape[1], cols):
                out, ld, c, done = _weight_stationary_tile(
                    stream[:, k0:k0 + rows], stay[k0:k0 + rows, j0:j0 + cols], rec)
                partial[:, j0:j0 + cols] += out      # accumulators outside the array
                load, compute, macs, tiles = load + ld, compute + c, macs + done, tiles + 1
                rec.tile += 1
        result = partial if dataflow == "weight" else partial.T
    counts = CycleCount(tiles=tiles, load=load, compute=compute, drain=drain)
    return SystolicRun(dataflow, rows, cols, result, counts, macs, rec.snapshots)


# ----------------------------------------------------------------- closed forms
def _tile_sizes(total: int, size: int) -> list[int]:
    """Sizes of the pieces when ``total`` is cut into chunks of at most ``size``."""
    return [min(size, total - start) for start in range(0, total, size)]


def cycle_count(dataflow: str, m: int, k: int, n: int, rows: int,
                cols: int | None = None) -> CycleCount:
    """Closed-form cycles of ``(m, k) @ (k, n)`` on a ``rows x cols`` array, by phase.

    Per tile using ``r`` rows and ``c`` columns (see the module docstring):

    * output stationary: compute ``r + c + k - 2``, drain ``r``; tiles over (m, n);
    * weight stationary: load ``r``, compute ``m + c + r - 2``; tiles over (k, n);
    * input stationary:  load ``r``, compute ``n + c + r - 2``; tiles over (k, m).
    """
    cols = rows if cols is None else cols
    if dataflow not in DATAFLOWS:
        raise ValueError(f"dataflow must be one of {DATAFLOWS}, got {dataflow!r}")
    load = compute = drain = tiles = 0
    if dataflow == "output":
        for r in _tile_sizes(m, rows):
            for c in _tile_sizes(n, cols):
                compute += r + c + k - 2
                drain += r
                tiles += 1
    else:
        streamed, across = (m, n) if dataflow == "weight" else (n, m)
        for r in _tile_sizes(k, rows):
            for c in _tile_sizes(across, cols):
                load += r
                compute += streamed + c + r - 2
                tiles += 1
    return CycleCount(tiles=tiles, load=load, compute=compute, drain=drain)


def utilization(dataflow: str, m: int, k: int, n: int, rows: int, cols: int | None = None) -> float:
    """Fraction of PE-cycles doing useful MACs, from :func:`cycle_count` (no simulation)."""
    cols = rows if cols is None else cols
    return m * k * n / (cycle_count(dataflow, m, k, n, rows, cols).total * rows * cols)


def peak_ops_per_second(macs_per_cycle: int, clock_hz: float) -> float:
    """Peak operations per second of a MAC array: 2 operations (multiply, add) per MAC."""
    return 2.0 * macs_per_cycle * clock_hz


# ----------------------------------------------------------------- pictures
def _fmt(value: float) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return f"{value:.3g}"


def snapshot_html(run: SystolicRun, index: int) -> str:
    """An HTML table of the PE grid at recorded cycle ``index`` of ``run``.

    Each PE shows the stationary value (bold), the value moving right (→) and the
    value moving down (↓); PEs doing a MAC in this cycle are shaded.
    """
    snap = run.snapshots[index]
    roles = REGISTER_ROLES[run.dataflow]
    head = (f"<div><b>{run.dataflow} stationary</b>, {run.rows}x{run.cols} PEs · "
            f"cycle {snap.cycle} of {len(run.snapshots)} · tile {snap.tile} · "
            f"phase <b>{snap.phase}</b> · MACs this cycle: {int(snap.mac.sum())}</div>")
    legend = (f"<div style='font-size:85%'>bold: {html.escape(roles['stationary'])}; "
              f"→ {html.escape(roles['horizontal'])}; ↓ {html.escape(roles['vertical'])}</div>")
    cells = []
    for i in range(run.rows):
        tds = []
        for j in range(run.cols):
            shade = "#ffd27f" if snap.mac[i, j] else "#f4f4f4"
            right, down = _fmt(snap.horizontal[i, j]), _fmt(snap.vertical[i, j])
            body = (f"<b>{_fmt(snap.stationary[i, j])}</b><br>"
                    f"<span style='color:#1f5fbf'>{'→' + right if right else '&nbsp;'}</span><br>"
                    f"<span style='color:#b03030'>{'↓' + down if down else '&nbsp;'}</span>")
            tds.append(f"<td style='background:{shade};border:1px solid #999;width:4.5em;"
                       f"height:4.2em;text-align:center;font-family:monospace'>{body}</td>")
        cells.append("<tr>" + "".join(tds) + "</tr>")
    return head + legend + "<table style='border-collapse:collapse'>" + "".join(cells) + "</table>"


def widget(run: SystolicRun):
    """A step-through widget: a play button and a slider over the cycles of ``run``.

    Returns an ``ipywidgets.VBox``; display it as the last expression of a cell.
    """
    if not run.snapshots:
        raise ValueError("the run has no snapshots: simulate it with record=True")
    last = len(run.snapshots) - 1
    slider = widgets.IntSlider(value=0, min=0, max=last, description="cycle",
                               continuous_update=True)
    play = widgets.Play(value=0, min=0, max=last, interval=600, description="play")
    widgets.jslink((play, "value"), (slider, "value"))
    view = widgets.HTML(value=snapshot_html(run, 0))

    def show(change):
        view.value = snapshot_html(run, change["new"])

    slider.observe(show, names="value")
    return widgets.VBox([widgets.HBox([play, slider]), view])


def plot_activity(runs: dict[str, SystolicRun], axes=None):
    """Active PEs per cycle, one panel per run (``{label: run}``), sharing the cycle axis.

    Returns the array of matplotlib axes.
    """
    if axes is None:
        _, axes = plt.subplots(len(runs), 1, figsize=(7, 1.3 + 1.1 * len(runs)),
                               sharex=True, sharey=True, squeeze=False)
        axes = axes[:, 0]
    for ax, (label, run) in zip(axes, runs.items()):
        active = run.active_pes()
        shades = {"load": "tab:green", "drain": "tab:red"}
        for cycle, snap in enumerate(run.snapshots):
            if snap.phase in shades:
                ax.axvspan(cycle - 0.5, cycle + 0.5, color=shades[snap.phase], alpha=0.15, lw=0)
        ax.bar(np.arange(len(active)), active, width=0.9, color="tab:blue")
        ax.set_title(f"{label}: {run.cycles} cycles ({run.counts.load} load, "
                     f"{run.counts.compute} compute, {run.counts.drain} drain)",
                     fontsize=8, loc="left")
        ax.set_ylabel("MACs")
        ax.grid(alpha=0.3, axis="y")
    axes[-1].set_xlabel("cycle (shaded green: load, shaded red: drain)")
    return axes
