"""What both languages' checks share: ``Checked``, a GPU kernel's source that passed its
language's whitelist, and what a kernel may take from outside the checker's own names as a
plain value (``is_number``; for Numba CUDA also ``is_cuda_plain``).

Stdlib only (the checker imports it before the instructor's setup has run).
"""
from __future__ import annotations

import ast
import sys


class Checked:
    """A kernel's (or helper's) source that passed its language's whitelist: its tree, the name
    of its ``def``, the names it takes from outside ({name: called?}) and, for Numba CUDA,
    whether it is a device function (a Triton helper is never one)."""

    def __init__(self, name: str, source: str, tree: ast.Module, func: str, free: dict, device: bool = False):
        self.name, self.source, self.tree, self.func, self.free, self.device = name, source, tree, func, free, device


def is_number(value) -> bool:
    """A bool, int or float itself (no subclass): a number any kernel may take from outside."""
    return type(value) in (bool, int, float)


def is_cuda_plain(value, depth: int = 0) -> bool:
    """What a Numba CUDA kernel may take from outside: a number (complex too), a Numba type, or
    a short tuple of those (at most 16 items, nested at most 3 deep)."""
    if is_number(value) or type(value) is complex:
        return True
    if type(value) is tuple:
        return depth < 3 and len(value) <= 16 and all(is_cuda_plain(v, depth + 1) for v in value)
    numba_types = sys.modules.get("numba.core.types")
    return numba_types is not None and isinstance(value, numba_types.Type)
