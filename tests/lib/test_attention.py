"""Lesson 15's library: attention's counting models, the online softmax, torch's back-ends, and the
naive and fused Triton kernels counted in the interpreter (tiny shapes: the whole file runs in
seconds on one CPU thread)."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from course_lib import attention, triton_traffic

triton_traffic.prepare()   # before Triton loads: the interpreter without a GPU
pytest.importorskip("triton")
from course_lib import attention_kernels as ak  # noqa: E402

torch.set_num_threads(1)


def softmax_np(x):
    e = np.exp(x - x.max())
    return e / e.sum()


@pytest.mark.parametrize("size,block,spread", [(1, 4, 1.0), (12, 4, 1.0), (37, 5, 3.0), (100, 7, 10.0),
                                               (64, 64, 1.0), (50, 8, 300.0)])
def test_online_softmax_equals_softmax(size, block, spread):
    rng = np.random.default_rng(size + block)
    for _ in range(5):
        x = rng.standard_normal(size) * spread
        assert np.abs(attention.online_softmax(x, block) - softmax_np(x)).max() < 1e-6


def test_online_softmax_states_are_prefix_max_and_sum():
    rng = np.random.default_rng(3)
    x = rng.standard_normal(23) * 4
    states = attention.online_softmax_steps(x, 5)
    assert [s.block for s in states] == [1, 2, 3, 4, 5]
    for s in states:
        seen = x[:5 * s.block]
        assert s.running_max == seen.max()
        assert s.running_sum == pytest.approx(np.exp(seen - seen.max()).sum(), rel=1e-12)


def test_counting_models():
    s, p, o = attention.naive_kernels(4096, 64, element_bytes=2)
    assert s.flops == o.flops == 2 * 4096 * 4096 * 64
    assert s.bytes_written == p.bytes_read == p.bytes_written == o.bytes_read - 4096 * 64 * 2 == 4096 * 4096 * 2
    assert p.intensity < 2 < 50 < s.intensity < 64
    assert attention.attention_flops(1024, 64, causal=True) * 2 == attention.attention_flops(1024, 64)
    assert attention.score_matrix_bytes(1024, heads=32, element_bytes=2) == 2**26
    assert attention.io_floor_bytes(128, 64, 2) == 4 * 128 * 64 * 2
    assert attention.naive_bytes(128, 64, 2) > 4 * 128 * 128 * 2


@pytest.mark.parametrize("causal", [False, True])
def test_naive_attention_in_torch_matches_sdpa(causal):
    q, k, v = (torch.randn(2, 3, 20, 8) for _ in range(3))
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    assert torch.allclose(attention.naive_attention(q, k, v, causal), expected, atol=1e-6)


@pytest.mark.parametrize("causal", [False, True])
def test_naive_and_fused_triton_kernels_match_sdpa(causal):
    torch.manual_seed(0)
    q, k, v = (torch.randn(32, 16) for _ in range(3))
    expected = F.scaled_dot_product_attention(q[None], k[None], v[None], is_causal=causal)[0]
    naive, counts = ak.count_naive(q, k, v, causal)
    assert len(counts) == 3 and torch.allclose(naive, expected, atol=1e-5)
    fused, _ = ak.count_fused(q[None, None] * 8, k[None, None], v[None, None], causal)   # large scores: stable
    big = F.scaled_dot_product_attention(q[None] * 8, k[None], v[None], is_causal=causal)[0]
    assert torch.allclose(fused[0, 0], big, atol=1e-5)
    q4 = torch.randn(2, 2, 32, 16)
    assert torch.allclose(ak.flash_attention(q4, q4, q4, causal, block_m=16, block_n=8),
                          F.scaled_dot_product_attention(q4, q4, q4, is_causal=causal), atol=1e-5)


def test_fused_kernel_bytes_are_linear_and_naive_quadratic():
    """Counted at two sizes: the fused kernel stores only O (n d elements) and, with one query
    block holding all queries, loads Q, K, V once (O(N d) in all); with blocks of 16 it loads K and
    V once per block (exactly). The naive kernels store S and P (n^2 each): about 4x per doubling."""
    d, totals, naive_totals = 16, {}, {}
    for n in (32, 64):
        q, k, v = (torch.randn(1, 1, n, d) for _ in range(3))
        _, whole = ak.count_fused(q, k, v, block_m=n, block_n=16)
        totals[n] = whole.bytes_loaded + whole.bytes_stored
        assert totals[n] == attention.io_floor_bytes(n, d, element_bytes=4)
        _, tiled = ak.count_fused(q, k, v, block_m=16, block_n=16)
        assert tiled.bytes_stored == 4 * n * d
        assert tiled.bytes_loaded == 4 * d * (n + 2 * (n // 16) * n)
        _, naive = ak.count_naive(q[0, 0], k[0, 0], v[0, 0])
        assert naive[0].bytes_stored == naive[1].bytes_stored == 4 * n * n      # S, P
        naive_totals[n] = sum(t.bytes_loaded + t.bytes_stored for t in naive)
        assert naive_totals[n] > totals[n]
    assert totals[64] == 2 * totals[32]
    assert naive_totals[64] > 3.5 * naive_totals[32]


def test_the_exercise_budget_is_one_the_naive_kernels_fail():
    """The figures exercises.ipynb quotes for n = 40, d = 16 (its budget 17 920 bytes loaded)."""
    q, k, v = (torch.randn(40, 16) for _ in range(3))
    _, counts = ak.count_naive(q, k, v)
    assert sum(t.bytes_loaded for t in counts) == 42240 > 17920
    assert sum(t.bytes_stored for t in counts) == 15360 and counts[0].bytes_stored == 6400


def test_flash_attention_refuses_ragged_lengths():
    q = torch.randn(1, 1, 40, 16)
    with pytest.raises(ValueError, match="multiple of BLOCK_M"):
        ak.count_fused(q, q, q, block_m=16)


def test_sdpa_backend_probes_on_this_machine():
    q = torch.randn(1, 2, 64, 16)
    available = attention.sdpa_backends_available(q, q, q)
    assert available["math"] == "runs" and set(available) == {"flash", "memory-efficient", "cudnn", "math"}
    backend, op = attention.sdpa_backend_used(q, q, q)
    assert backend in attention.BACKEND_OPS and op
    if not torch.cuda.is_available():
        assert "not available" in available["memory-efficient"]


def test_allocated_bytes_sees_the_score_matrix():
    q = torch.randn(1, 2, 256, 16)
    naive = attention.allocated_bytes(lambda: attention.naive_attention(q, q, q))
    assert naive >= 2 * attention.score_matrix_bytes(256, heads=2, element_bytes=4)
    assert attention.allocated_bytes(lambda: F.scaled_dot_product_attention(q, q, q)) < naive / 4


def test_kernel_source_is_read_without_triton():
    text = attention.kernel_source("flash_forward_kernel")
    assert text.startswith("@triton.jit\ndef flash_forward_kernel(") and "_attend_block" in text
    with pytest.raises(KeyError):
        attention.kernel_source("no_such_kernel")


def test_the_lecture_kernel_cannot_stand_in_for_the_exercise():
    """A student who imports the lecture's fused kernel (or its step) into Exercise 2 is refused
    by the grader: the kernels are the course library's own, and the fused one calls a helper
    whose name starts with _."""
    from course_tools.grading.gpu_kernels.triton_source import Refused, check

    with pytest.raises(Refused, match="course library's kernel course_lib.attention_kernels._attend_block"):
        check("_attend_block", attention.kernel_source("_attend_block"))
    with pytest.raises(Refused, match="course_lib.attention_kernels.flash_forward_kernel"):
        check("flash_forward_kernel", attention.kernel_source("flash_forward_kernel"))
    refused_call = attention.kernel_source("flash_forward_kernel").replace("[BLOCK_M]", "(BLOCK_M,)").replace(
        "[BLOCK_M, HEAD_DIM]", "(BLOCK_M, HEAD_DIM)")
    with pytest.raises(Refused, match="`_attend_block`"):
        check("flash_forward_kernel", refused_call)


def test_gpu_figures_on_record_are_the_recorded_rows_and_the_cited_papers():
    from course_lib import recorded

    figures = attention.gpu_figures_on_record()
    assert set(figures) == {"TFLOP/s", "GB/s"}
    runs = {(r.device, r.date) for r in recorded.figures().values()}
    for fig in figures["TFLOP/s"] + figures["GB/s"]:
        assert fig.device in fig.label and fig.date in fig.label and fig.origin in fig.label
        if fig.origin.startswith("cited"):
            assert fig in attention.CITED_ATTENTION_TFLOPS
        else:
            assert (fig.device, fig.date) in runs
    softmax = {f.what: f.value for f in figures["GB/s"]}
    assert softmax["row softmax, unfused (eager)"] == recorded.figure("14.softmax_eager_gbs").value
    bf16 = next(f for f in figures["TFLOP/s"] if f.what.startswith("bf16"))
    assert bf16.origin == "recorded" and round(bf16.value) == 691   # the H200 run printed 690992.5 GFLOP/s, alone
    fused = next(f for f in figures["TFLOP/s"] if f.what.startswith("fused attention"))
    assert fused.value == recorded.figure("15.fused_triton_tflops_n4096").value and fused.device == "NVIDIA H200"


def test_backward_flops_are_five_products_and_saved_bytes_drop_p():
    n, d = 256, 64
    assert attention.backward_flops(n, d) == 5 * 2 * n * n * d == 2.5 * attention.attention_flops(n, d)
    assert attention.backward_flops(n, d, causal=True, heads=3) == 1.5 * 2.5 * attention.attention_flops(n, d)
    flash = attention.saved_for_backward_bytes(n, d, heads=2, element_bytes=4)
    assert flash == 2 * (4 * n * d * 4 + 4 * n)
    assert attention.saved_for_backward_bytes(n, d, heads=2, element_bytes=4, store_p=True) - flash == 2 * n * n * 4


def test_saved_tensor_bytes_sees_the_probabilities_naive_attention_keeps():
    n, d = 64, 16
    q, k, v = (torch.randn(1, 1, n, d, requires_grad=True) for _ in range(3))
    naive = attention.saved_tensor_bytes(attention.naive_attention, q, k, v)
    assert naive >= 4 * n * n + 3 * 4 * n * d          # P (float32) and q, k, v at least
    assert attention.saved_tensor_bytes(lambda x: (x * 2).sum(), q) == 0   # a product by a constant saves nothing
