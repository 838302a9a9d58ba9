"""course_lib: the helper library of the course "GPU computing for deep learning".

One module per concept of the lessons (``hardware``, ``timing``, ``roofline``, ``arrays``,
...). Importing the package is cheap; it only decides, before anything imports
``numba.cuda``, whether Numba's CUDA kernels will run on a GPU or in the simulator.
"""
from .hardware import prepare_numba_cuda as _prepare_numba_cuda

__version__ = "0.1.0"

_prepare_numba_cuda()
