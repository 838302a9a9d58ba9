"""The course's own warp-aware SIMT engine for Numba CUDA kernels, with a traffic model and a
predicted time on named GPUs (lessons 03 and 04).

Numba's CUDA simulator runs one OS thread per CUDA thread and has no warps; this engine runs the
same ``@cuda.jit`` source (the whitelisted subset of Python a graded kernel may use) with the 32
lanes of a warp advancing together under an active mask, so that it can say *how* a kernel touches
memory: sectors per warp access, bank conflicts, divergent branches, and what that would cost on an
H100, an A100 or a consumer card.

    from course_lib import simt
    result = simt.run(kernel, grid, block, *args)          # like kernel[grid, block](*args)
    result.counts.max_per_thread("global_reads")           # reads per thread, GPU-Puzzles' count
    print(result.report())                                 # sectors, conflicts, divergence, by line
    print(simt.predict(result, "NVIDIA H100 SXM5").sentence())  # a predicted time, pipe by pipe

Where the model differs from a GPU (NVIDIA's CUDA C++ Programming Guide,
https://docs.nvidia.com/cuda/cuda-c-programming-guide/, sections "SIMT Architecture", "Device Memory
Accesses", "Shared Memory" of compute capability 5.x and later, "Technical Specifications per Compute
Capability"; CUDA C++ Best Practices Guide, https://docs.nvidia.com/cuda/cuda-c-best-practices-guide/,
"Coalesced Access to Global Memory", "Shared Memory and Memory Banks", "L2 Cache", "Occupancy"):

- lanes run in lock-step here; since Volta each thread has its own program counter and the lanes of a
  warp may interleave (independent thread scheduling). Results of correct kernels do not depend on
  it; the race detector assumes no lock-step, so warp-synchronous code without ``syncwarp`` is a race;
- no L1 or L2 cache is simulated: the traffic model counts every sector of every warp access. The
  predicted time is the slowest of five pipes at measured or datasheet rates: DRAM (each distinct sector
  once when the working set fits in L2, every sector otherwise), L2 sectors, L1 lines, shared-memory
  passes and compute; a memory latency is added to DRAM's (Little's law: the loads a launch's resident
  warps have in flight, waiting a measured latency wave after wave), and the launch cost is reported
  apart. It is a model with stated limits (:mod:`~course_lib.simt.prediction`), checked against
  published measurements, not a simulation of caches or schedulers;
- an instruction is a Python statement, not a SASS instruction; FLOPs are the float ``+ - * / **``;
- 8- and 16-byte shared accesses are modelled as two and four passes of half and quarter warps;
- global-memory races (two threads writing one element without an atomic) are not reported, as in
  Numba's simulator; a GPU's memory allocator's alignment is taken as 256 bytes;
- arithmetic follows NumPy like Numba's simulator (a Python float accumulator that meets float32 stays
  float32), not the GPU's compiled types (where it would be float64).

Modules: :mod:`~course_lib.simt.kernel_source` (the kernel's syntax tree), :mod:`~course_lib.simt.memory`
(global, shared and local arrays), :mod:`~course_lib.simt.warp` (one warp executing under a mask, made of
:mod:`~course_lib.simt.values`, :mod:`~course_lib.simt.statements`, :mod:`~course_lib.simt.expressions`,
:mod:`~course_lib.simt.elements`, :mod:`~course_lib.simt.calls`, :mod:`~course_lib.simt.intrinsics`,
:mod:`~course_lib.simt.atomics` and :mod:`~course_lib.simt.shuffles`), :mod:`~course_lib.simt.launch`
(blocks, barriers, schedules; :func:`run`), :mod:`~course_lib.simt.barriers` (every running thread of a
block at the same ``syncthreads``), :mod:`~course_lib.simt.races` (the race detector),
:mod:`~course_lib.simt.counts` (what is counted), :mod:`~course_lib.simt.traffic` (the traffic model),
:mod:`~course_lib.simt.occupancy` and :mod:`~course_lib.simt.prediction` (occupancy and a predicted time on named GPUs).
"""
from . import occupancy
from .barriers import DivergentBarrier
from .counts import ACCESS_KINDS, AccessCounts, SharedMemoryRace
from .launch import SCHEDULES, Result, Schedule, count_accesses, run
from .prediction import GPUS, Prediction, predict
from .shuffles import InactiveLane
from .values import Unsupported

__all__ = ["ACCESS_KINDS", "GPUS", "SCHEDULES", "AccessCounts", "DivergentBarrier", "InactiveLane", "Prediction",
           "Result", "Schedule", "SharedMemoryRace", "Unsupported", "count_accesses", "occupancy", "predict", "run"]
