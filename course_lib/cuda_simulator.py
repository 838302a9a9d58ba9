"""Numba CUDA on the GPU, or in Numba's CUDA simulator, and the sentence saying why (lessons 00,
03, 04; re-exported by :mod:`course_lib.hardware`).

Numba reads ``NUMBA_ENABLE_CUDASIM`` once, when ``numba.cuda`` is first imported, so the choice
is made before that import (``import course_lib`` does it). Real only after a one-thread probe
kernel compiled and ran on the GPU: the probe runs in a child process, so that a numba-cuda that
cannot compile here (numba-cuda 0.30.4 with NumPy 2.5: ``np.row_stack`` is gone) still lets this
process switch to the simulator. The decision is made once per process and written to the
environment, where child processes (notebook kernels, worker processes) find it.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import subprocess
import sys
from importlib import metadata


@functools.lru_cache(maxsize=1)
def _driver_sees_gpu() -> bool:
    """True when the CUDA driver library loads and reports at least one device.

    Cheap and torch-free, so it can run before ``numba.cuda`` is imported.
    """
    name = ctypes.util.find_library("cuda") or ("libcuda.so.1" if sys.platform == "linux" else None)
    if not name:
        return False
    try:
        lib = ctypes.CDLL(name)
        count = ctypes.c_int(0)
        return lib.cuInit(0) == 0 and lib.cuDeviceGetCount(ctypes.byref(count)) == 0 and count.value > 0
    except OSError:
        return False


_SIM_NOTICE = ("course_lib: Numba CUDA kernels run in the CUDA simulator (correct results, one CPU "
               "thread per GPU thread, not timed): {reason}")
_notice_shown = False
_DECISION_VAR = "COURSE_NUMBA_CUDA"  # 'real' or 'simulator: <reason>', inherited by child processes
PROBE_TIMEOUT = 180.0  # seconds for the probe: import numba.cuda, compile one kernel, launch it

_PROBE_KERNEL = """
import sys
try:
    import numpy as np
    from numba import cuda
    @cuda.jit
    def probe(out):
        out[0] = 42.0
    out = cuda.to_device(np.zeros(1, dtype=np.float32))
    probe[1, 1](out)
    cuda.synchronize()
    got = out.copy_to_host()[0]
    assert got == 42.0, f"the probe kernel wrote {got}, not 42.0"
except Exception as exc:
    sys.exit("probe failed: " + type(exc).__name__ + ": " + " ".join(str(exc).split()))
print("probe kernel ok")
"""


def _versions() -> str:
    """'numba-cuda X, numba Y, NumPy Z' as installed (read from package metadata, no import)."""
    def version(dist: str) -> str:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return "not installed"

    return ", ".join(f"{name} {version(dist)}" for dist, name in
                     (("numba-cuda", "numba-cuda"), ("numba", "numba"), ("numpy", "NumPy")))


def probe_numba_cuda_kernel(timeout: float = PROBE_TIMEOUT) -> str:
    """Compile and launch a one-thread Numba CUDA kernel on the GPU; '' when it ran, else why not.

    Runs in a child Python process with the simulator off: a numba-cuda that cannot compile
    (e.g. numba-cuda 0.30.4 with NumPy 2.5, ``np.row_stack`` removed) fails there, and this
    process can still switch its own Numba to the simulator before importing ``numba.cuda``.
    """
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0")
    env.pop(_DECISION_VAR, None)
    try:
        done = subprocess.run([sys.executable, "-c", _PROBE_KERNEL], capture_output=True, text=True,
                              env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"the probe kernel did not finish within {timeout:.0f} s"
    if done.returncode == 0 and "probe kernel ok" in done.stdout:
        return ""
    lines = [line.strip() for line in done.stderr.splitlines() if line.strip()]
    said = [line[len("probe failed: "):] for line in lines if line.startswith("probe failed: ")]
    return (said or lines or [f"the probe process exited with status {done.returncode}"])[-1]


def _decide_numba_cuda() -> tuple[bool, str]:
    """(simulated, reason) for this process, before ``numba.cuda`` is imported.

    In order: a decision inherited from the parent process; the user's NUMBA_ENABLE_CUDASIM=1;
    no GPU seen by the driver; a probe kernel that fails. Real only when the probe kernel ran.
    """
    inherited = os.environ.get(_DECISION_VAR, "")
    user = os.environ.get("NUMBA_ENABLE_CUDASIM")
    if inherited == "real" and user == "0":
        return False, ""
    if inherited.startswith("simulator: ") and user == "1":
        return True, inherited[len("simulator: "):]
    if user == "1":
        return True, "NUMBA_ENABLE_CUDASIM=1 is set in the environment."
    if not _driver_sees_gpu():
        return True, "no CUDA GPU is usable here: the CUDA driver is missing or reports no device."
    error = probe_numba_cuda_kernel()
    if error:
        return True, (f"a one-thread probe kernel failed on the GPU with: {error} ({_versions()}; "
                      "the gpu extra in pyproject.toml pins a pair that compiles).")
    return False, ""


_decision: tuple[bool, str] | None = None


def prepare_numba_cuda() -> bool:
    """Decide whether Numba CUDA kernels run on the GPU or in the simulator; True if simulated.

    Must run before ``numba.cuda`` is first imported: Numba reads ``NUMBA_ENABLE_CUDASIM``
    once, at that import. The decision (see :func:`numba_cuda_reason`) is made once per process
    and written to the environment, where child processes find it. If ``numba.cuda`` was
    imported before, the choice made then stands.
    """
    global _decision
    if _decision is not None:
        return _decision[0]
    if "numba.cuda" in sys.modules:  # too late to switch: probe what was imported
        from numba.core import config  # lazy: numba is imported already; `import course_lib` skips it

        if config.ENABLE_CUDASIM:
            _decision = (True, "numba.cuda was imported before course_lib, with the simulator on.")
        else:
            error = probe_numba_cuda_kernel()
            _decision = (False, error and f"numba.cuda was imported before course_lib, so no "
                         f"simulator; a one-thread probe kernel failed with: {error} ({_versions()}).")
        return _decision[0]
    simulated, reason = _decide_numba_cuda()
    _decision = (simulated, reason)
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1" if simulated else "0"
    os.environ[_DECISION_VAR] = f"simulator: {reason}" if simulated else "real"
    if "numba" in sys.modules:  # numba read its config at import: make it read it again
        from numba.core import config  # lazy: numba is imported already; `import course_lib` skips it

        config.reload_config()
    return simulated


def numba_cuda():
    """Return the ``numba.cuda`` module, real or simulated, printing a one-line notice once
    when it is the simulator."""
    global _notice_shown
    simulated = prepare_numba_cuda()
    from numba import cuda  # lazy: only after prepare_numba_cuda() has chosen GPU or simulator

    if simulated and not _notice_shown:
        print(_SIM_NOTICE.format(reason=numba_cuda_reason()))
        _notice_shown = True
    return cuda


def numba_cuda_mode() -> str:
    """'real' when a one-thread probe kernel compiled and ran on the GPU, 'simulator' when Numba
    CUDA kernels run in the simulator, 'broken' when real ``numba.cuda`` was imported before
    course_lib and its probe kernel failed (no fallback is possible then)."""
    simulated = prepare_numba_cuda()
    if simulated:
        return "simulator"
    return "broken" if numba_cuda_reason() else "real"


def numba_cuda_reason() -> str:
    """The sentence saying why Numba CUDA kernels do not run on a GPU here ('' when they do)."""
    prepare_numba_cuda()
    return _decision[1] if _decision else ""
