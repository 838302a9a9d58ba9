"""Lesson 07: the dependency graph of one training step of a two-layer network, and the
schedule of that graph on two devices (the GPU's compute engine and its copy engine),
drawn as a Gantt chart. The gradient of layer 2 is ready before that of layer 1, so its
copy runs while the GPU still computes layer 1's gradient: the overlap the lesson is about."""
from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

ALT = ("Left: the dependency graph of one training step, forward F1 then F2, backward B2 then "
       "B1, with the copy of each layer's gradient (C2 after B2, C1 after B1) and the update U "
       "after both copies. Right: its schedule on two devices as a Gantt chart, where copy C2 "
       "runs on the copy engine while the GPU computes B1, so the step takes 11 time units "
       "instead of the 13 it would take one task after another.")

# task: (duration in time units, dependencies, device, colour)
TASKS = {
    "F1": (2, (), "GPU compute", "tab:blue"),
    "F2": (1, ("F1",), "GPU compute", "tab:blue"),
    "B2": (2, ("F2",), "GPU compute", "tab:orange"),
    "B1": (4, ("B2",), "GPU compute", "tab:orange"),
    "C2": (2, ("B2",), "copy engine", "tab:green"),
    "C1": (1, ("B1",), "copy engine", "tab:green"),
    "U": (1, ("C1", "C2"), "GPU compute", "tab:purple"),
}
# where each node sits in the graph panel (x, y)
LAYOUT = {"F1": (0.6, 3.4), "F2": (1.9, 3.4), "B2": (3.2, 3.4), "B1": (3.2, 1.9),
          "C2": (4.5, 3.4), "C1": (4.5, 1.9), "U": (5.6, 1.9)}


def schedule() -> dict[str, tuple[float, float]]:
    """{task: (start, end)}: each task starts when its dependencies are done and its device is
    free, in the order of ``TASKS`` (a valid list schedule of this small graph)."""
    times, free = {}, {}
    for name, (seconds, deps, device, _) in TASKS.items():
        start = max([free.get(device, 0.0)] + [times[d][1] for d in deps])
        times[name] = (start, start + seconds)
        free[device] = start + seconds
    return times


def _graph(ax):
    ax.set_xlim(0, 6.1)
    ax.set_ylim(0, 4.1)
    ax.axis("off")
    ax.set_title("dependency graph", fontsize=14)
    for name, (x, y) in LAYOUT.items():
        colour = TASKS[name][3]
        ax.add_patch(FancyBboxPatch((x - 0.38, y - 0.3), 0.76, 0.6, boxstyle="round,pad=0.03",
                                    facecolor=colour, alpha=0.3, edgecolor=colour, linewidth=1.5))
        ax.text(x, y, name, ha="center", va="center", fontsize=14, weight="bold")
    for name, (_, deps, _, _) in TASKS.items():
        for dep in deps:
            (x0, y0), (x1, y1) = LAYOUT[dep], LAYOUT[name]
            ax.add_patch(FancyArrowPatch((x0, y0), (x1, y1), arrowstyle="-|>", mutation_scale=15,
                                         shrinkA=20, shrinkB=20, linewidth=1.4, color="black"))
    ax.text(0.1, 0.9, "F forward\nB backward\nC copy gradient\nU update", fontsize=12, va="center")


def _gantt(ax, times):
    lanes = ["copy engine", "GPU compute"]
    for name, (start, end) in times.items():
        lane = lanes.index(TASKS[name][2])
        ax.barh(lane, end - start, left=start, height=0.6, color=TASKS[name][3], alpha=0.45,
                edgecolor="black")
        ax.text((start + end) / 2, lane, name, ha="center", va="center", fontsize=13, weight="bold")
    makespan = max(end for _, end in times.values())
    serial = sum(seconds for seconds, *_ in TASKS.values())
    ax.axvline(makespan, color="black", linestyle="--", linewidth=1)
    ax.set_yticks(range(len(lanes)), lanes, fontsize=13)
    ax.set_xlabel("time (units)", fontsize=13)
    ax.set_xlim(0, serial)
    ax.tick_params(axis="x", labelsize=12)
    ax.set_title(f"schedule: {makespan:g} units (one after another: {serial:g})", fontsize=14)


def draw() -> plt.Figure:
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4.2), width_ratios=[1, 1.25])
    _graph(left)
    _gantt(right, schedule())
    fig.tight_layout()
    return fig
