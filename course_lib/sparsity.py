"""2:4 structured sparsity, which hardware can use, and why zeros alone are not enough (lesson 12).

Setting half of a weight matrix to zero halves its multiply-adds only if the hardware
can skip them. Arbitrary (unstructured) zeros defeat vector units and tensor cores;
NVIDIA's Sparse Tensor Cores (Ampere, 2020, and later) skip the zeros of one pattern:
in every group of 4 consecutive weights at most 2 are non-zero (*2:4 sparsity*). The
hardware stores the 2 values and a 2-bit index for each, and does half the work.
"""
from __future__ import annotations

import warnings

import torch
from torch.sparse import to_sparse_semi_structured

from .devices import default_device
from .timing import Timing, benchmark


def prune_2_4(w: torch.Tensor) -> torch.Tensor:
    """Keep the 2 largest-magnitude values in every group of 4 along the last dimension.

    The other 2 of each group become zero. The last dimension must be a multiple of 4.
    Returns a new tensor with ``w``'s shape and dtype.
    """
    if w.shape[-1] % 4:
        raise ValueError(f"last dimension {w.shape[-1]} is not a multiple of 4")
    groups = w.reshape(-1, 4)
    keep = groups.abs().topk(2, dim=1).indices
    mask = torch.zeros(groups.shape, dtype=torch.bool, device=w.device).scatter_(1, keep, True)
    return torch.where(mask, groups, torch.zeros_like(groups)).reshape(w.shape)


def is_2_4_sparse(w: torch.Tensor) -> bool:
    """True when every group of 4 along the last dimension has at most 2 non-zeros."""
    if w.shape[-1] % 4:
        return False
    return bool(((w.reshape(-1, 4) != 0).sum(dim=1) <= 2).all())


def kept_energy(w: torch.Tensor, pruned: torch.Tensor) -> float:
    """Fraction of ``w``'s squared Frobenius norm that survives pruning (0..1)."""
    return float(pruned.double().pow(2).sum() / w.double().pow(2).sum())


def random_prune(w: torch.Tensor, fraction: float = 0.5, seed: int = 0) -> torch.Tensor:
    """Zero a random ``fraction`` of ``w``'s entries (unstructured sparsity, for comparison)."""
    gen = torch.Generator().manual_seed(seed)
    mask = torch.rand(w.shape, generator=gen) >= fraction
    return w * mask.to(w.device, w.dtype)


def time_dense_vs_csr(n: int = 512, fraction: float = 0.5, seed: int = 0, device=None) -> dict:
    """Time ``W @ x`` with a half-zero ``n x n`` ``W`` stored dense and as CSR (sparse).

    ``x`` is ``n x n``; ``device`` defaults to CUDA when available. Returns
    ``{"dense": Timing, "csr": Timing, "speedup": dense/csr}`` (seconds per product).
    At 50% zeros a general sparse format is usually *slower* than dense: the index
    bookkeeping costs more than the skipped multiply-adds save.
    """
    device = default_device(device)
    gen = torch.Generator().manual_seed(seed)
    w = random_prune(torch.randn(n, n, generator=gen), fraction, seed).to(device)
    x = torch.randn(n, n, generator=gen).to(device)
    with warnings.catch_warnings():   # "sparse CSR support is in beta state"
        warnings.simplefilter("ignore", UserWarning)
        w_csr = w.to_sparse_csr()
    dense: Timing = benchmark(lambda: w @ x, label=f"dense {n}x{n} @ {n}x{n}", device=device)
    csr: Timing = benchmark(lambda: w_csr @ x, label=f"CSR ({fraction:.0%} zeros) @ dense",
                            device=device)
    return {"dense": dense, "csr": csr, "speedup": dense.median / csr.median}


def semi_structured_supported() -> tuple[bool, str]:
    """Can this machine run 2:4 sparse matmuls on Sparse Tensor Cores? ``(yes, reason)``."""
    if not torch.cuda.is_available():
        return False, "no CUDA GPU: 2:4 sparse kernels need an NVIDIA GPU of compute capability 8.0+"
    major, minor = torch.cuda.get_device_capability()
    if major < 8:
        return False, f"GPU compute capability {major}.{minor} < 8.0 has no Sparse Tensor Cores"
    return True, f"GPU compute capability {major}.{minor}"


def time_dense_vs_2_4(n: int = 4096) -> dict:
    """On a GPU with Sparse Tensor Cores: time a float16 ``n x n`` linear layer dense and 2:4.

    Uses ``torch.sparse.to_sparse_semi_structured``. Returns ``{"dense": Timing,
    "sparse": Timing, "speedup": dense/sparse}``; raises RuntimeError where
    :func:`semi_structured_supported` says no.
    """
    ok, reason = semi_structured_supported()
    if not ok:
        raise RuntimeError(reason)
    device = torch.device("cuda")
    weight = prune_2_4(torch.randn(n, n, device=device, dtype=torch.float16))
    x = torch.randn(n, n, device=device, dtype=torch.float16)
    linear = torch.nn.functional.linear
    with torch.inference_mode():
        dense = benchmark(lambda: linear(x, weight), label=f"dense fp16 {n}x{n}", device=device)
        sparse_weight = to_sparse_semi_structured(weight)
        sparse = benchmark(lambda: linear(x, sparse_weight), label=f"2:4 fp16 {n}x{n}",
                           device=device)
    return {"dense": dense, "sparse": sparse, "speedup": dense.median / sparse.median}
