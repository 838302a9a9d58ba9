"""GPU kernels a student wrote (Numba CUDA for lessons 03/04, Triton for 14/15), checked and
rebuilt inside the trusted checker: a kernel crosses from the student's process as its source
text, must pass a whitelist, and is compiled by the checker itself.

By language, each a whitelist and a rebuild:

- Numba CUDA: ``kernel_whitelist`` (the subset, ``CudaCheck``) and ``kernel_source`` (kernels
  rebuilt with the checker's ``cuda.jit``, and the ``Builder`` that resolves every kernel a test
  cell uses, handing Triton's to ``triton_source``);
- Triton: ``triton_whitelist`` (the subset, ``TritonCheck``), ``triton_library`` (the course
  library's own kernels refused) and ``triton_source`` (``check``, and kernels rebuilt under
  Triton's interpreter).

Shared by both: ``source_whitelist`` (one function, the allowed statements, refusals) and
``checked`` (``Checked``, a source that passed, and the plain values a kernel may take).

The checker runs as a plain script (``checker.py``, Python's ``-I`` mode) with this folder on
``sys.path``, so each module imports its siblings by a relative import when imported as part of
the package and by name otherwise.
"""
