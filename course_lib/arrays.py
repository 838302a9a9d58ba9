"""The NumPy/CuPy switch: array code written once runs on a GPU when there is one (lessons 00, 04).

CuPy mirrors NumPy's API, so most code only needs to know *which module* to call.
``xp()`` answers that for new arrays, ``get_array_module(x)`` for existing ones.
"""
from __future__ import annotations

import functools

import numpy

from .hardware import cupy_usable


@functools.lru_cache(maxsize=1)
def _cupy_or_none():
    if not cupy_usable():
        return None
    import cupy  # lazy: optional, installed only on machines with a GPU

    return cupy


def xp(prefer_gpu: bool = True):
    """The array module to create arrays with: CuPy when a GPU is usable and wanted, else NumPy."""
    cupy = _cupy_or_none() if prefer_gpu else None
    return cupy if cupy is not None else numpy


def backend_name(prefer_gpu: bool = True) -> str:
    """'cupy' or 'numpy': which module :func:`xp` returns here."""
    return xp(prefer_gpu).__name__


def get_array_module(*arrays):
    """The module (CuPy or NumPy) that owns ``arrays``, like ``cupy.get_array_module``."""
    cupy = _cupy_or_none()
    if cupy is not None:
        return cupy.get_array_module(*arrays)
    return numpy


def asnumpy(array) -> numpy.ndarray:
    """A NumPy copy of ``array`` (a device-to-host copy for CuPy arrays; no copy for NumPy)."""
    if isinstance(array, numpy.ndarray):
        return array
    if hasattr(array, "get"):  # cupy.ndarray
        return array.get()
    return numpy.asarray(array)
