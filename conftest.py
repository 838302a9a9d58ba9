"""Test settings for tests/ and the notebooks (nbval): one thread for torch and BLAS (two threads
measured 20x slower), a non-interactive matplotlib backend, quiet kernels."""
import os

os.environ["OMP_NUM_THREADS"] = "1"
os.environ["MKL_NUM_THREADS"] = "1"
os.environ["OPENBLAS_NUM_THREADS"] = os.environ.get("OPENBLAS_NUM_THREADS", "1")
os.environ["MPLBACKEND"] = "Agg"
os.environ["PYTHONWARNINGS"] = "ignore"

import pytest  # noqa: E402


def pytest_configure(config):
    from course_tools.loopback import ensure_loopback

    ensure_loopback()  # notebook kernels and gloo talk over 127.0.0.1 (down under `unshare -n`)
    try:
        import torch

        torch.set_num_threads(1)
    except ImportError:
        pass


@pytest.fixture(scope="session")
def has_gpu():
    import torch

    return torch.cuda.is_available()
