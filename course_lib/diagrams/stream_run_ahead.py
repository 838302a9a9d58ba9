"""Lesson 06: the CPU runs ahead of the GPU. The Python thread (the frontend) enqueues kernels
into a CUDA stream in microseconds each and goes on; the GPU (the backend) executes them in
order, each as soon as it is queued and the previous one is done, so it runs behind. At a
synchronization point (``loss.item()``) the CPU stops and waits until the GPU has finished
the kernel that produces the value; after it, the queue is empty and the GPU idles until the
CPU enqueues again."""
from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch

ALT = ("Two timelines. Top, the CPU: short launch boxes for kernels k1 to k5, then a long hatched "
       "box where loss.item() waits, then launches of k6 and k7. Bottom, the GPU: k1 to k5 run "
       "one after another, each starting later than its launch, so the GPU runs behind the CPU; "
       "the wait ends when k5 finishes, and the GPU idles until k6 is launched.")

LAUNCH, KERNEL = 0.35, 1.6      # time units: issuing a kernel, running it (schematic)


def _schedule():
    """(launch start times, kernel (start, end) times, the sync interval) of the picture."""
    launches, kernels, t = [], [], 0.0
    for _ in range(5):
        launches.append(t)
        t += LAUNCH
    gpu_free = 0.0
    for start in launches:
        begin = max(start + LAUNCH, gpu_free)
        kernels.append((begin, begin + KERNEL))
        gpu_free = begin + KERNEL
    sync = (t, gpu_free)                       # .item() waits for k5
    t = gpu_free + 0.15
    for _ in range(2):
        launches.append(t)
        begin = max(t + LAUNCH, kernels[-1][1])
        kernels.append((begin, begin + KERNEL))
        t += LAUNCH
    return launches, kernels, sync


def draw() -> plt.Figure:
    launches, kernels, (sync_start, sync_end) = _schedule()
    fig, ax = plt.subplots(figsize=(10, 3.6))
    cpu, gpu = 1.0, 0.0
    for k, (start, (k_start, k_end)) in enumerate(zip(launches, kernels), start=1):
        ax.barh(cpu, LAUNCH, left=start, height=0.45, color="tab:blue", alpha=0.6, edgecolor="black")
        ax.barh(gpu, k_end - k_start, left=k_start, height=0.45, color="tab:orange", alpha=0.6,
                edgecolor="black")
        ax.text((k_start + k_end) / 2, gpu, f"k{k}", ha="center", va="center", fontsize=13, weight="bold")
        ax.add_patch(FancyArrowPatch((start + LAUNCH / 2, cpu - 0.23), (k_start + 0.1, gpu + 0.23),
                                     arrowstyle="-|>", mutation_scale=11, color="gray", linewidth=1))
    ax.barh(cpu, sync_end - sync_start, left=sync_start, height=0.45, color="white", hatch="//",
            edgecolor="tab:red")
    ax.text((sync_start + sync_end) / 2, cpu + 0.36, "loss.item(): the CPU waits for k5",
            ha="center", fontsize=13, color="tab:red")
    ax.axvline(sync_end, color="tab:red", ls="--", lw=1.3)
    ax.text(launches[0], cpu + 0.36, "launches k1–k5", ha="left", fontsize=12, color="tab:blue")
    idle_end = kernels[5][0]
    ax.text((sync_end + idle_end) / 2, gpu - 0.42, "idle", ha="center", fontsize=12, color="dimgray")
    ax.text(kernels[1][0] + 0.2, gpu - 0.42, "the GPU runs behind: k2–k5 wait in the stream",
            fontsize=12, color="saddlebrown")
    ax.set_yticks([gpu, cpu], ["GPU\n(backend)", "CPU\n(frontend)"], fontsize=13)
    ax.set_xticks([])
    ax.set_xlabel("time →", fontsize=13)
    ax.set_ylim(-0.65, 1.6)
    ax.set_xlim(-0.2, kernels[-1][1] + 0.3)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    fig.tight_layout()
    return fig
