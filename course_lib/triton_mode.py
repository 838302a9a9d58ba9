"""How Triton kernels run on this machine (lessons 14 and 15): compiled for a GPU, in Triton's
interpreter on the CPU (``TRITON_INTERPRET=1``), or not at all (no Linux wheel), chosen once before
any kernel is decorated (:func:`prepare`), and the lecture kernels' source for where they cannot run.
"""
from __future__ import annotations

import importlib.util
import os
import platform

_MODE: tuple[str, str] | None = None


def _gpu_reason() -> str | None:
    """None when torch sees a GPU Triton can compile for; else why not (one line)."""
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    acc = torch.accelerator.current_accelerator(check_available=True)
    if acc is None:
        return "torch sees no GPU (torch.accelerator found none)"
    if acc.type != "cuda":
        return f"torch's accelerator is {acc.type}, which this lesson's Triton does not compile for"
    return None


def prepare() -> tuple[str, str]:
    """Choose how Triton kernels run here, once, before any is decorated: ("gpu", why),
    ("interpreter", why) or ("unavailable", why). Sets ``TRITON_INTERPRET=1`` when there is
    Triton but no usable GPU (or keeps it when the user set it)."""
    global _MODE
    if _MODE is not None:
        return _MODE
    try:
        spec = importlib.util.find_spec("triton")
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        system = platform.system()
        why = (f"Triton publishes no wheels for {system}: its kernels are shown here but cannot run"
               if system in ("Darwin", "Windows") else "triton is not installed (scripts/setup.sh installs it)")
        _MODE = ("unavailable", why)
    elif os.environ.get("TRITON_INTERPRET") == "1":
        _MODE = ("interpreter", "TRITON_INTERPRET=1 was set before the lesson started")
    else:
        reason = _gpu_reason()
        if reason is None:
            _MODE = ("gpu", "kernels are compiled for this GPU")
        else:
            os.environ["TRITON_INTERPRET"] = "1"
            _MODE = ("interpreter", f"{reason}: kernels run in Triton's interpreter on the CPU (TRITON_INTERPRET=1)")
    return _MODE


def triton_mode() -> str:
    """'gpu', 'interpreter' or 'unavailable' (see :func:`prepare`)."""
    return prepare()[0]


def lecture_kernel_source(name: str, module: str = "triton_kernels") -> str:
    """The source of one function (decorator included) of ``course_lib.<module>`` (lesson 14's
    ``triton_kernels``, lesson 15's ``attention_kernels``) read from its file, without importing
    Triton: what the lessons show where Triton cannot be installed (macOS, Windows)."""
    import ast
    from pathlib import Path

    path = Path(__file__).with_name(f"{module}.py")
    text = path.read_text()
    for node in ast.parse(text).body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            return "\n".join(text.splitlines()[first - 1:node.end_lineno]) + "\n"
    raise KeyError(f"course_lib.{module} has no function {name!r}")
