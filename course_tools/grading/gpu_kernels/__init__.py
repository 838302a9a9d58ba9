"""GPU kernels a student wrote (Numba CUDA for lessons 03/04, Triton for 14/15), checked and
rebuilt inside the trusted checker: a kernel crosses from the student's process as its source
text, must pass a whitelist, and is compiled by the checker itself.

- ``source_whitelist``: what both whitelists share (one function, the allowed statements, refusals);
- ``kernel_whitelist``: the Numba CUDA subset; ``kernel_source``: Numba kernels rebuilt (and the
  ``Builder`` that resolves every kernel a test cell uses, Triton's included);
- ``triton_source``: the Triton subset, rebuilt under Triton's interpreter.

The checker runs as a plain script (``checker.py``, Python's ``-I`` mode) with this folder on
``sys.path``, so each module imports its siblings by a relative import when imported as part of
the package and by name otherwise.
"""
