"""`course doctor`: what this machine has (CPU, caches, RAM, CUDA GPUs, CuPy, Numba CUDA real or
simulated and why, torch.distributed backends) and which fallbacks the lessons will use."""
from __future__ import annotations

import json
from pathlib import Path

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


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def cgroup_info() -> dict:
    """Which cgroup hierarchy this machine mounts ("v2", "v1", "hybrid" or "none") and the v2
    controllers (or v1 hierarchies) present."""
    root = Path("/sys/fs/cgroup")
    v2 = _read(str(root / "cgroup.controllers"))
    v1 = sorted(p.name for p in root.iterdir() if p.is_dir() and (p / "cgroup.procs").exists()
                and p.name != "unified") if root.is_dir() and v2 is None else []
    if v2 is not None:
        return {"version": "v2", "controllers": v2.split()}
    if v1:
        return {"version": "hybrid" if (root / "unified" / "cgroup.controllers").exists() else "v1",
                "controllers": v1}
    return {"version": "none", "controllers": []}


def sandbox_info() -> dict:
    """What ``course grade``'s sandbox depends on here: bubblewrap (installed, and able to make
    the namespaces grading asks for), user namespaces, cgroups, and what bounds each sandbox's
    memory and processes (a systemd scope, else rlimits plus the grader's watchdog)."""
    import os
    import shutil
    import subprocess

    from course_tools.grading import sandbox

    bwrap = shutil.which("bwrap")
    version = None
    if bwrap:
        try:
            version = subprocess.run([bwrap, "--version"], capture_output=True, text=True,
                                     timeout=10).stdout.strip().split()[-1]
        except (OSError, subprocess.TimeoutExpired, IndexError):
            version = None
    usable = bool(sandbox.bubblewrap())
    unprivileged = _read("/proc/sys/kernel/unprivileged_userns_clone")  # Debian's switch, where it exists
    max_userns = _read("/proc/sys/user/max_user_namespaces")
    scope = bool(sandbox.systemd_scope())
    return {
        "bubblewrap": bwrap, "bubblewrap_version": version, "bubblewrap_usable": usable,
        "why_not": None if usable else sandbox.why_no_sandbox(),
        "root": os.geteuid() == 0,
        "user_namespaces": {"max_user_namespaces": int(max_userns) if (max_userns or "").isdigit() else None,
                            "unprivileged_userns_clone": None if unprivileged is None else unprivileged == "1"},
        "cgroups": cgroup_info(),
        "limits": ("systemd scope (cgroups: MemoryMax, TasksMax) per sandbox, rlimits per process" if scope else
                   "the grader's watchdog per sandbox (memory, processes, disk; systemd cannot start scopes "
                   "here), rlimits per process"),
    }


def _sandbox_lines(box: dict) -> list[str]:
    ns = box["user_namespaces"]
    if ns["max_user_namespaces"] == 0 or ns["unprivileged_userns_clone"] is False:
        userns = ("user namespaces: off for unprivileged users"
                  + (" (bubblewrap runs as root here, so grading is unaffected)" if box["root"] else ""))
    else:
        userns = f"user namespaces: on (up to {ns['max_user_namespaces']})" if ns["max_user_namespaces"] else \
            "user namespaces: unknown"
    cg = box["cgroups"]
    lines = [
        "sandbox " + (f"bubblewrap {box['bubblewrap_version'] or ''} at {box['bubblewrap']}: "
                      f"{'usable' if box['bubblewrap_usable'] else 'NOT usable'}" if box["bubblewrap"]
                      else "bubblewrap not installed"),
        f"        {userns}; cgroups {cg['version']}"
        + (f" ({', '.join(cg['controllers'][:8])})" if cg["controllers"] else ""),
        f"        limits: {box['limits']}",
    ]
    if box["bubblewrap_usable"]:
        lines.append("        course grade runs every submission in this sandbox"
                     + (", each as a user id of its own" if box["root"] else ""))
    else:
        lines.append(f"        course grade refuses to grade (exit 2): {box['why_not']}")
    return lines


def cmd_doctor(args) -> int:
    """Print what this machine has (``args.json``: as JSON) and which fallbacks apply; exit 0."""
    info = describe()
    info["triton"] = triton_info()
    info["sandbox"] = sandbox_info()
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
    for line in _sandbox_lines(info["sandbox"]):
        print(line)
    for fb in info["fallbacks"]:
        print(f"fallback: {fb}")
    return 0
