"""Interactive plots for lesson 11: sliders drive the communication cost models.

Each ``*_widget`` function returns an ``ipywidgets`` box; the plotting functions underneath
take plain numbers, so they also work (and are tested) without a browser.
"""
from __future__ import annotations

import ipywidgets as w
import matplotlib.pyplot as plt
import numpy as np

from . import collectives, kvstore

# Link bandwidths (bytes per second, one direction): PCIe and Ethernet as in A. Zhang et al.,
# *Dive into Deep Learning*, 2023, section 12.7; NVLink 2.0 from NVIDIA's "NVIDIA Tesla V100 GPU
# Architecture" whitepaper, 2017 (25 GB/s per link and direction, 6 links per V100).
LINKS = {
    "PCIe 3.0 x16 (16 GB/s)": 16e9,
    "NVLink 2.0, one link (25 GB/s)": 25e9,
    "NVLink 2.0, 3 links of a V100 ring (75 GB/s)": 75e9,
    "100 GbE (10 GB/s)": 10e9,
    "10 GbE (1 GB/s)": 1e9,
}


def plot_strategies(nbytes: float = 160e6, n: int = 4, bandwidth: float = 16e9,
                    latency: float = 0.0, ax=None):
    """Bar chart of :func:`collectives.strategy_seconds` in milliseconds."""
    times = collectives.strategy_seconds(nbytes, n, bandwidth, latency)
    ax = ax or plt.subplots(figsize=(7, 3))[1]
    names = list(times)
    ax.barh(names, [times[k] * 1e3 for k in names], color="tab:blue")
    for i, k in enumerate(names):
        ax.text(times[k] * 1e3, i, f" {times[k] * 1e3:.3g} ms", va="center")
    ax.set_xlabel("synchronization time (ms)")
    ax.set_title(f"{nbytes / 1e6:g} MB on {n} GPUs, {bandwidth / 1e9:g} GB/s links, "
                 f"{latency * 1e6:g} us latency")
    ax.invert_yaxis()
    return ax


def plot_scaling(nbytes: float = 160e6, bandwidth: float = 16e9, latency: float = 0.0,
                 max_n: int = 16, ax=None):
    """Modelled time of every strategy against the number of GPUs (milliseconds)."""
    ns = np.arange(2, max_n + 1)
    ax = ax or plt.subplots(figsize=(6, 3.5))[1]
    for name, fn in collectives.STRATEGIES.items():
        ax.plot(ns, [fn(nbytes, int(n), bandwidth, latency) * 1e3 for n in ns], marker=".",
                label=name)
    ax.set_xlabel("number of GPUs")
    ax.set_ylabel("ms")
    ax.set_title(f"{nbytes / 1e6:g} MB at {bandwidth / 1e9:g} GB/s")
    ax.legend(fontsize=8)
    return ax


def plot_servers(nbytes: float = 160e6, workers: int = 8, bandwidth: float = 1e9,
                 max_servers: int = 8, ax=None):
    """Push time against the number of parameter servers: ``O(m / n)``."""
    servers = np.arange(1, max_servers + 1)
    ax = ax or plt.subplots(figsize=(5, 3))[1]
    ax.plot(servers, [kvstore.push_seconds(nbytes, workers, int(s), bandwidth) for s in servers],
            marker="o")
    ax.set_xlabel("parameter servers")
    ax.set_ylabel("seconds to receive all pushes")
    ax.set_title(f"{workers} workers push {nbytes / 1e6:g} MB each")
    return ax


def strategies_widget():
    """Sliders (GPUs, message size, link, latency) driving :func:`plot_strategies` and
    :func:`plot_scaling`."""
    n = w.IntSlider(value=4, min=2, max=16, description="GPUs")
    size = w.FloatLogSlider(value=160, base=10, min=-1, max=4, description="MB")
    link = w.Dropdown(options=list(LINKS), value="PCIe 3.0 x16 (16 GB/s)", description="link")
    latency = w.FloatLogSlider(value=5, base=10, min=-1, max=3, description="latency us")

    def draw(n, size, link, latency):
        fig, (a, b) = plt.subplots(1, 2, figsize=(12, 3.5))
        plot_strategies(size * 1e6, n, LINKS[link], latency * 1e-6, ax=a)
        plot_scaling(size * 1e6, LINKS[link], latency * 1e-6, max_n=max(16, n), ax=b)
        fig.tight_layout()
        plt.show()

    out = w.interactive_output(draw, {"n": n, "size": size, "link": link, "latency": latency})
    return w.VBox([w.HBox([n, size]), w.HBox([link, latency]), out])


def servers_widget():
    """Sliders (workers, message size, bandwidth) driving :func:`plot_servers`."""
    workers = w.IntSlider(value=8, min=1, max=64, description="workers")
    size = w.FloatLogSlider(value=160, base=10, min=-1, max=4, description="MB")
    bandwidth = w.FloatLogSlider(value=1, base=10, min=-1, max=2, description="GB/s")

    def draw(workers, size, bandwidth):
        plot_servers(size * 1e6, workers, bandwidth * 1e9)
        plt.show()

    out = w.interactive_output(draw, {"workers": workers, "size": size, "bandwidth": bandwidth})
    return w.VBox([w.HBox([workers, size, bandwidth]), out])


def ring_step_widget(n: int = 4):
    """Step through :func:`collectives.ring_schedule`: which chunk each rank holds, summed."""
    steps = collectives.ring_schedule(n)
    step = w.IntSlider(value=0, min=0, max=len(steps), description="step")
    ranks = w.IntSlider(value=n, min=2, max=8, description="ranks")

    def draw(step, ranks):
        plot_ring_state(ranks, min(step, 2 * (ranks - 1)))
        plt.show()

    out = w.interactive_output(draw, {"step": step, "ranks": ranks})
    ranks.observe(lambda change: setattr(step, "max", 2 * (change["new"] - 1)), names="value")
    return w.VBox([w.HBox([ranks, step]), out])


def ring_state(n: int, after_steps: int) -> np.ndarray:
    """``state[rank, chunk]`` = how many ranks' contributions that chunk holds on that rank
    after the first ``after_steps`` steps of the ring (``n`` means finished)."""
    state = np.ones((n, n), dtype=int)
    for number, step in enumerate(collectives.ring_schedule(n)[:after_steps]):
        new = state.copy()
        for src, dst, c in step:
            new[dst, c] = state[dst, c] + state[src, c] if number < n - 1 else state[src, c]
        state = new
    return state


def plot_ring_state(n: int, after_steps: int, ax=None):
    """Heat map of :func:`ring_state`."""
    state = ring_state(n, after_steps)
    ax = ax or plt.subplots(figsize=(4, 3))[1]
    ax.imshow(state, vmin=1, vmax=n, cmap="Greens")
    for r in range(n):
        for c in range(n):
            ax.text(c, r, str(state[r, c]), ha="center", va="center")
    phase = "reduce-scatter" if after_steps <= n - 1 else "all-gather"
    ax.set_title(f"after {after_steps} steps\n({phase})", fontsize=10)  # two short lines: fits a panel
    ax.set_xlabel("chunk")
    ax.set_ylabel("rank")
    return ax
