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


def test_transformer_block_split_by_heads_equals_the_full_block_and_halves_what_it_should():
    from course_lib.transformer_block import activation_bytes_per_layer

    results = tp.block_run(2, d_model=16, n_heads=4, batch=2, seq_len=6, timeout=120)
    for r in results:
        for key in ("ours_output_error", "ours_input_grad_error", "ours_weight_grad_error",
                    "dtensor_output_error", "dtensor_input_grad_error"):
            assert r[key] < 1e-5, (key, r[key])
        # two of the four heads (8 of 16 query rows), half of the 64 MLP features
        assert r["ours_shapes"] == {"q.weight": (8, 16), "fc1.weight": (32, 16)}
        assert r["dtensor_shapes"] == r["ours_shapes"]
        assert r["full_activation_bytes"] == activation_bytes_per_layer(2, 6, 16, 4)["total"]
        assert r["ours_activation_bytes"] == activation_bytes_per_layer(2, 6, 16, 4, tensor_parallel=2)["total"]


def test_a_block_whose_heads_do_not_split_evenly_is_refused():
    from course_lib.transformer_block import make_block

    with pytest.raises(ValueError, match="3 heads do not split evenly over 2 ranks"):
        tp.ParallelBlock(make_block(12, 3), 0, 2)
