"""The transformer block's counts agree with the module: parameters with its tensors, FLOPs
with torch's own counter, activation bytes with the tensors autograd saves."""
import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from course_lib import transformer_block as tb
from course_lib.models import count_parameters
from course_lib.training_memory import activation_bytes

CONFIGS = [  # d_model, n_heads, d_ff, batch, seq_len, causal
    (32, 4, None, 2, 8, True),
    (48, 6, 80, 3, 5, False),
    (16, 1, 16, 1, 1, True),
]


@pytest.mark.parametrize("d,h,f,b,s,causal", CONFIGS)
def test_parameter_count_is_the_modules(d, h, f, b, s, causal):
    assert tb.parameter_count(d, f) == count_parameters(tb.make_block(d, h, f))
    assert tb.parameter_count(d, f, layers=3) == 3 * tb.parameter_count(d, f)


@pytest.mark.parametrize("d,h,f,b,s,causal", CONFIGS)
def test_flops_per_token_are_what_torch_counts(d, h, f, b, s, causal):
    block = tb.make_block(d, h, f, causal=causal)
    x = torch.randn(b, s, d, requires_grad=True)
    with FlopCounterMode(display=False) as forward:
        y = block(x)
    with FlopCounterMode(display=False) as backward:
        y.sum().backward()
    assert forward.get_total_flops() == b * s * tb.flops_per_token(d, s, f)
    assert forward.get_total_flops() + backward.get_total_flops() == b * s * tb.flops_per_token(d, s, f, backward=True)


def test_gpt3_175b_has_its_published_size():
    # Brown et al. 2020, Table 2.1: 96 layers of width 12288 (embeddings add about 0.6 B)
    assert 173.9e9 < tb.parameter_count(12288, layers=96) < 174.0e9


@pytest.mark.parametrize("d,h,f,b,s,causal", CONFIGS)
def test_activation_bytes_are_the_tensors_autograd_saves(d, h, f, b, s, causal):
    block = tb.make_block(d, h, f, causal=causal)
    counted = tb.activation_bytes_per_layer(b, s, d, h, f, causal=causal)
    assert counted["total"] == activation_bytes(block, (b, s, d), device="meta")
    assert counted["total"] == sum(v for k, v in counted.items() if k != "total")


def test_activation_bytes_quadratic_term_and_tensor_parallel_split():
    one = tb.activation_bytes_per_layer(1, 1024, 64, 4, bytes_per_value=2, causal=False)
    two = tb.activation_bytes_per_layer(1, 2048, 64, 4, bytes_per_value=2, causal=False)
    assert two["replicated"] == 2 * one["replicated"]
    assert two["split"] > 3.5 * one["split"]          # dominated by the a s^2 softmax matrices
    split = tb.activation_bytes_per_layer(1, 1024, 64, 4, bytes_per_value=2, tensor_parallel=4, causal=False)
    assert split["split"] == one["split"] // 4 and split["replicated"] == one["replicated"]
    with pytest.raises(ValueError):
        tb.activation_bytes_per_layer(1, 8, 64, 4, tensor_parallel=3)


def test_korthikanti_form_without_dropout():
    s, b, d, a = 2048, 4, 1024, 16
    counted = tb.activation_bytes_per_layer(b, s, d, a, bytes_per_value=2)
    assert counted["replicated"] + counted["split"] == s * b * d * (32 + 2 * a * s / d)


def test_kv_cache_bytes_are_the_keys_and_values_the_block_computes():
    block = tb.make_block(32, 4).to(torch.bfloat16)
    h = torch.randn(3, 10, 32, dtype=torch.bfloat16)
    keys, values = block.k(h), block.v(h)
    assert tb.kv_cache_bytes_per_layer(3, 10, 32, bytes_per_value=2) == \
        keys.numel() * keys.element_size() + values.numel() * values.element_size()


def test_heads_must_divide_the_width():
    with pytest.raises(ValueError, match="multiple of n_heads"):
        tb.TransformerBlock(30, 4)
