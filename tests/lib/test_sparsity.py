"""2:4 structured pruning and the dense-versus-sparse comparison."""
import pytest
import torch

from course_lib import sparsity


def test_prune_2_4_keeps_the_two_largest_of_each_group():
    w = torch.tensor([[1.0, -5.0, 3.0, 0.5, 0.125, 0.25, -0.375, 0.5]])
    pruned = sparsity.prune_2_4(w)
    assert pruned.tolist() == [[0.0, -5.0, 3.0, 0.0, 0.0, 0.0, -0.375, 0.5]]
    assert sparsity.is_2_4_sparse(pruned) and not sparsity.is_2_4_sparse(w)


def test_prune_2_4_shapes_and_errors():
    w = torch.randn(3, 4, 8)
    pruned = sparsity.prune_2_4(w)
    assert pruned.shape == w.shape and (pruned != 0).sum() == w.numel() // 2
    with pytest.raises(ValueError):
        sparsity.prune_2_4(torch.randn(3, 6))
    assert not sparsity.is_2_4_sparse(torch.zeros(2, 6))


def test_kept_energy_beats_random_pruning():
    w = torch.randn(64, 64, generator=torch.Generator().manual_seed(0))
    structured = sparsity.kept_energy(w, sparsity.prune_2_4(w))
    random = sparsity.kept_energy(w, sparsity.random_prune(w, 0.5))
    assert 0.5 < random < structured < 1.0


def test_time_dense_vs_csr():
    result = sparsity.time_dense_vs_csr(32, device="cpu")
    assert result["dense"].median > 0 and result["csr"].median > 0 and result["speedup"] > 0


def test_semi_structured_support_is_reported():
    ok, reason = sparsity.semi_structured_supported()
    assert isinstance(ok, bool) and reason
    if not ok:
        with pytest.raises(RuntimeError):
            sparsity.time_dense_vs_2_4(64)
