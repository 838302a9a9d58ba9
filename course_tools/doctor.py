"""`course doctor`: what this machine has (CPU, caches, RAM, CUDA GPUs, CuPy, Numba CUDA real or
simulated and why, torch.distributed backends) and which fallbacks the lessons will use."""
from __future__ import annotations

import json

from course_lib.hardware import describe


def _gib(n: float) -> str:
    return f"{n / 2**30:.1f} GiB"


def triton_info() -> dict:
    """Lesson 14's Triton: {"version": installed version or None, "mode": "gpu" | "interpreter" |
    "unavailable", "reason": why}, without compiling anything."""
    from importlib import metadata

    from course_lib.triton_traffic import prepare

    try:
        version = metadata.version("triton")
    except metadata.PackageNotFoundError:
        version = None
    mode, reason = prepare()
    return {"version": version, "mode": mode, "reason": reason}


def cmd_doctor(args) -> int:
    """Print what this machine has (``args.json``: as JSON) and which fallbacks apply; exit 0."""
    info = describe()
    info["triton"] = triton_info()
    if info["triton"]["mode"] != "gpu":
        info["fallbacks"] = [*info["fallbacks"], "Triton kernels (lesson 14) " + (
            "run in Triton's interpreter on the CPU" if info["triton"]["mode"] == "interpreter"
            else "are shown but cannot run: " + info["triton"]["reason"])]
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    cpu = info["cpu"]
    caches = ", ".join(f"{k} {v // 1024} KiB" for k, v in cpu["caches"].items())
    print(f"Python {info['python']}, torch {info['torch']}, NumPy {info['numpy']}")
    print(f"CPU     {cpu['model']} ({cpu['arch']}), {cpu['physical_cores']} cores / "
          f"{cpu['logical_cores']} threads, up to {cpu['max_clock_hz'] / 1e9:.2f} GHz")
    print(f"SIMD    {', '.join(cpu['simd']) or 'none detected'}")
    print(f"caches  {caches or 'unknown'}")
    print(f"RAM     {_gib(info['ram_bytes'])}")
    if info["cuda_gpus"]:
        for g in info["cuda_gpus"]:
            print(f"GPU {g['index']}   {g['name']}, {_gib(g['memory_bytes'])}, "
                  f"compute capability {g['compute_capability']}, {g['multiprocessors']} SMs")
    else:
        print("GPU     no CUDA GPU usable by torch")
    print(f"arrays  {info['array_module']} (CuPy usable: {'yes' if info['cupy_usable'] else 'no'})")
    print(f"kernels Numba CUDA: {info['numba_cuda']}"
          + ("" if info["numba_cuda"] == "real" else f", because {info['numba_cuda_reason']}"))
    tri = info["triton"]
    print(f"Triton  {tri['version'] or 'not installed'} ({tri['mode']}): {tri['reason']}")
    print(f"torch.distributed backends: {', '.join(info['distributed_backends']) or 'none'}")
    for fb in info["fallbacks"]:
        print(f"fallback: {fb}")
    return 0
