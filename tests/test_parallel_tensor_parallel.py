"""Megatron's column/row split equals the full MLP, and so does PyTorch's DTensor split."""
import pytest
import torch

from course_lib.parallel import tensor_parallel as tp


@pytest.mark.parametrize("size,world", [(8, 2), (7, 3), (2, 4), (0, 2)])
def test_shard_bounds_follow_tensor_split(size, world):
    blocks = torch.tensor_split(torch.arange(size), world)
    for rank, block in enumerate(blocks):
        lo, hi = tp.shard_bounds(size, rank, world)
        assert list(range(lo, hi)) == block.tolist()


def test_megatron_and_dtensor_splits_equal_the_full_mlp():
    results = tp.run(2, d_model=8, d_hidden=32, batch=4, timeout=120)
    for r in results:
        for key in ("ours_output_error", "ours_input_grad_error", "ours_weight_grad_error",
                    "dtensor_output_error", "dtensor_input_grad_error", "dtensor_weight_grad_error"):
            assert r[key] < 1e-5, (key, r[key])
        assert r["ours_shapes"] == [(16, 8), (16,), (8, 16), (8,)]
        assert r["dtensor_shapes"] == r["ours_shapes"]
        # both layers' weights are halved; the row-parallel bias is kept whole on every rank
        assert r["ours_param_bytes"] == 4 * (16 * 8 + 16 + 8 * 16 + 8)
        assert r["full_param_bytes"] == 4 * (32 * 8 + 32 + 8 * 32 + 8)
