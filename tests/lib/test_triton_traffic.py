"""course_lib.triton_traffic and course_lib.triton_kernels (lesson 14): the mode is announced,
bytes are counted per tensor and per program with masks honoured, addresses outside the
kernel's tensors are refused (also just past the end, thanks to the guard bytes), grids and
every tensor a kernel makes are bounded, no route reaches memory uncounted (a tensor for a
tl.constexpr parameter and atomics are refused, inputs are compared after the launch), and the
lecture's kernels compute what their docstrings say."""
import os

import numpy as np
import pytest
import torch

from course_lib import triton_traffic

triton_traffic.prepare()
triton = pytest.importorskip("triton")
tl = triton.language

from course_lib import triton_kernels as tk  # noqa: E402


@triton.jit
def copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


@triton.jit
def copy_one_too_far(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs <= n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


@triton.jit
def read_twice(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(x_ptr + offs, mask=mask), mask=mask)


def test_the_mode_is_announced_and_the_interpreter_is_chosen_without_a_gpu():
    mode, why = triton_traffic.prepare()
    assert mode in ("gpu", "interpreter") and why
    if not torch.cuda.is_available():
        assert mode == "interpreter" and os.environ.get("TRITON_INTERPRET") == "1"
        assert "interpreter" in why


@pytest.mark.parametrize("n, block", [(1000, 256), (1, 64), (64, 64), (129, 64)])
def test_bytes_are_counted_with_masks_honoured(n, block):
    x, out = torch.randn(n), torch.zeros(n)
    traffic = triton_traffic.count(copy_kernel, (triton.cdiv(n, block),), x, out, n, BLOCK=block)
    assert torch.equal(out, x)
    assert (traffic.bytes_loaded, traffic.bytes_stored) == (4 * n, 4 * n)
    assert traffic.loaded == {"x_ptr": 4 * n, "out_ptr": 0} and traffic.stored == {"x_ptr": 0, "out_ptr": 4 * n}
    assert traffic.programs == triton.cdiv(n, block)
    assert traffic.max_per_program("loaded") == 4 * min(n, block)
    assert "programs" in traffic.summary()


def test_a_second_load_of_the_same_block_counts_twice():
    x, out = torch.randn(100), torch.zeros(100)
    traffic = triton_traffic.count(read_twice, (2,), x, out, 100, BLOCK=64)
    assert torch.allclose(out, 2 * x) and traffic.bytes_loaded == 2 * 4 * 100


def test_one_element_past_the_end_is_out_of_bounds_even_between_neighbours():
    x, out = torch.randn(128), torch.zeros(128)   # n = 128 = 2 whole blocks: lane 128 is one past the end
    with pytest.raises(triton_traffic.OutOfBounds, match="element 128 of `x_ptr`, which has 128"):
        triton_traffic.count(copy_one_too_far, (3,), x, out, 128, BLOCK=64)


@triton.jit
def zero_the_input(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 0.0, mask=mask)


def test_a_store_into_an_input_is_refused_before_it_lands():
    x, out = torch.randn(100), torch.zeros(100)
    before = x.clone()
    for run in (triton_traffic.count, triton_traffic.launch):
        with pytest.raises(triton_traffic.InputWritten, match="a tl.store into `x_ptr`, an input: expected stores "
                                                               "only into `out_ptr`, got 64 element"):
            run(zero_the_input, (2,), x, out, 100, BLOCK=64, outputs=(1,))
        assert torch.equal(x, before)
    triton_traffic.count(zero_the_input, (2,), x, out, 100, BLOCK=64)   # no outputs named: stores anywhere
    assert not x.any()


@triton.jit
def zero_through_a_constant(x_ptr: tl.constexpr, out_ptr, n, BLOCK: tl.constexpr):
    x_ptr *= 0.0     # x_ptr is the torch tensor itself here, not a pointer


@triton.jit
def zero_through_a_default(x_ptr=None, out_ptr=None, n=0, BLOCK: tl.constexpr = 1):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def test_a_tensor_for_a_constexpr_or_defaulted_parameter_is_refused():
    """Issue 35: the interpreter hands a tl.constexpr parameter the torch tensor itself, so a
    kernel could change its inputs (or compute with torch) and no byte would be counted."""
    x, out = torch.randn(10), torch.zeros(10)
    before = x.clone()
    for run in (triton_traffic.count, triton_traffic.launch):
        with pytest.raises(triton_traffic.TensorParameter, match="zero_through_a_constant's parameter `x_ptr` "
                                                                  "receives a tensor but is annotated `tl.constexpr`"):
            run(zero_through_a_constant, (1,), x, out, 10, BLOCK=16, outputs=(1,))
    with pytest.raises(triton_traffic.TensorParameter, match="`x_ptr` receives a tensor but has a default value"):
        triton_traffic.count(zero_through_a_default, (1,), x, out, 10, BLOCK=16)
    assert torch.equal(x, before) and not out.any()


def test_an_input_changed_by_any_route_fails_the_launch_and_only_outputs_come_back(monkeypatch):
    """The comparison after every counted launch, as launch_checked does for CUDA kernels:
    with the refusal above switched off, the input the kernel zeroed through the torch tensor
    is caught, and the caller's tensors are untouched (the kernel only had copies)."""
    monkeypatch.setattr(triton_traffic, "refuse_tensor_constants", lambda *a: None)
    x, out = torch.randn(10), torch.zeros(10)
    before = x.clone()
    with pytest.raises(triton_traffic.InputWritten, match="changed its input `x_ptr`: expected it unchanged, "
                                                          "got 10 of 10 element"):
        triton_traffic.count(zero_through_a_constant, (1,), x, out, 10, BLOCK=16, outputs=(1,))
    assert torch.equal(x, before)
    strided = torch.randn(4, 8).t()                 # not contiguous: copied as well, strides kept
    plain = strided.clone()
    triton_traffic.count(copy_kernel, (1,), strided, torch.zeros(32), 32, BLOCK=32, outputs=(1,))
    assert torch.equal(strided, plain)


@triton.jit
def wide_tile(x_ptr, out_ptr, n, BLOCK: tl.constexpr, WIDE: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tile = tl.load(x_ptr + offs[:, None] * 0 + tl.arange(0, WIDE)[None, :])   # BLOCK x WIDE: a broadcast
    tl.store(out_ptr + offs, tl.sum(tile, axis=1))


@triton.jit
def big_zeros(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    acc = tl.zeros((BLOCK, BLOCK), dtype=tl.float32)
    tl.store(out_ptr + tl.arange(0, BLOCK), tl.sum(acc, axis=1))


@triton.jit
def atomic_sum(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.atomic_add(out_ptr + offs * 0, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def test_every_tensor_a_kernel_makes_is_bounded_and_atomics_are_refused():
    x, out = torch.randn(64), torch.zeros(16)
    triton_traffic.count(wide_tile, (1,), x, out, 64, BLOCK=16, WIDE=16, block_limit=256)
    with pytest.raises(triton_traffic.BlockTooLarge, match=r"program \(0, 0, 0\): broadcasting makes a tensor of "
                                                            r"1024 elements \(shape \(16, 64\)\); a graded block has "
                                                            "at most 256 elements in this launch"):
        triton_traffic.count(wide_tile, (1,), x, out, 64, BLOCK=16, WIDE=64, block_limit=256)
    with pytest.raises(triton_traffic.BlockTooLarge, match="tl.full/tl.zeros .* makes a tensor of 4096 elements"):
        triton_traffic.count(big_zeros, (1,), x, out, 64, BLOCK=64, block_limit=1024)
    with pytest.raises(triton_traffic.BlockTooLarge, match=f"at most {triton_traffic.MAX_BLOCK} elements"):
        triton_traffic.count(big_zeros, (1,), x, out, 64, BLOCK=512)   # the default bound: MAX_BLOCK
    out = torch.zeros(16)
    with pytest.raises(RuntimeError, match="tl.atomic_.* reaches memory that a graded launch cannot count"):
        triton_traffic.count(atomic_sum, (1,), x, out, 16, BLOCK=16)
    assert not out.any()   # a launch that fails copies nothing back


def test_results_of_a_counted_launch_reach_the_callers_tensors():
    x, out = torch.arange(10, dtype=torch.float32), torch.zeros(10)
    triton_traffic.launch(copy_kernel, (1,), x, out, 10, BLOCK=16)
    assert torch.equal(out, x)


@triton.jit
def copy_rows_kernel(x_ptr, out_ptr, n_cols, stride_xr, stride_xc, stride_or, stride_oc, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_xr + cols * stride_xc, mask=mask)
    tl.store(out_ptr + row * stride_or + cols * stride_oc, x, mask=mask)


def test_strided_tensors_reach_the_kernel_with_their_strides():
    """A slice of a wider buffer or a transpose (lesson 14's matmul gets both): the launch passes the
    caller's strides, so the copy the kernel runs on (on the device with a GPU, where `.to()` would
    make a slice contiguous) keeps them, and the output lands in the caller's view only."""
    wide = torch.arange(80.0).reshape(8, 10)
    for view in (wide[:, 2:7], wide.T, wide[1:, :4].T):
        copy = triton_traffic.copy_with_strides(view, "cpu")
        assert copy.stride() == view.stride() and torch.equal(copy, view) and copy.data_ptr() != view.data_ptr()
        buffer = torch.zeros(view.shape[0], view.shape[1] + 3)
        out = buffer[:, 1:-2]
        triton_traffic.launch(copy_rows_kernel, (view.shape[0],), view, out, view.shape[1], *view.stride(),
                              *out.stride(), outputs=(1,), BLOCK=16)
        assert torch.equal(out, view) and not buffer[:, 0].any() and not buffer[:, -2:].any()


def test_grids_and_blocks_are_bounded():
    with pytest.raises(ValueError, match="programs"):
        triton_traffic.count(copy_kernel, (triton_traffic.MAX_PROGRAMS + 1,), torch.zeros(1), torch.zeros(1), 1,
                             BLOCK=1)
    with pytest.raises(ValueError, match="a grid is"):
        triton_traffic.count(copy_kernel, (1, 2, 3, 4), torch.zeros(1), torch.zeros(1), 1, BLOCK=1)


def test_the_lecture_kernels_compute_what_they_say():
    x = torch.randn(300)
    out = torch.zeros(300)
    triton_traffic.count(tk.scale_kernel, (3,), x, out, 300, -2.0, BLOCK=128)
    assert torch.allclose(out, -2.0 * x)
    triton_traffic.count(tk.relu_kernel, (3,), x, out, 300, BLOCK=128)
    assert torch.equal(out, torch.relu(x))
    fused = triton_traffic.count(tk.scale_relu_kernel, (3,), x, out, 300, 3.0, BLOCK=128)
    assert torch.allclose(out, torch.relu(3.0 * x)) and fused.bytes_loaded + fused.bytes_stored == 2 * 4 * 300
    m = torch.randn(5, 37)
    sums = torch.zeros(5)
    traffic = triton_traffic.count(tk.row_sum_kernel, (5,), m, sums, 37, 37, BLOCK=64)
    assert torch.allclose(sums, m.sum(dim=1), atol=1e-5) and traffic.bytes_loaded == 4 * 5 * 37
    a, b, c = torch.randn(10, 12), torch.randn(12, 7), torch.zeros(10, 7)
    triton_traffic.count(tk.tile_dot_kernel, (1,), a, b, c, 10, 7, 12, BLOCK=16)
    assert torch.allclose(c, a @ b, atol=1e-5)


def test_helpers_of_the_lecture():
    mask = tk.lane_mask(10, 4)
    assert mask.shape == (3, 4) and mask.sum() == 10 and not mask[2, 2:].any()
    fused, unfused = tk.softmax_bytes(2, 3)["fused"], tk.softmax_bytes(2, 3)["unfused"]
    assert fused == (24, 24) and unfused == (4 * (3 * 6 + 2 * 2), 4 * (2 * 6 + 2 * 2))
    assert "@triton.jit" in tk.source(tk.scale_kernel) and "def scale_kernel" in tk.source(tk.scale_kernel)
    assert np.asarray(mask).dtype == bool


def test_time_on_gpu_refuses_without_a_gpu():
    if torch.cuda.is_available():
        pytest.skip("a GPU is here")
    with pytest.raises(RuntimeError, match="needs a GPU"):
        tk.time_on_gpu(lambda: None)


@pytest.mark.gpu
def test_the_lecture_kernels_compile_and_are_timed_on_a_gpu():
    if not torch.cuda.is_available():
        pytest.skip("no GPU")
    x = torch.randn(1 << 20, device="cuda")
    out = torch.empty_like(x)
    grid = (triton.cdiv(x.numel(), 1024),)
    result = tk.time_on_gpu(lambda: tk.scale_kernel[grid](x, out, x.numel(), 2.0, BLOCK=1024),
                            bytes_moved=2 * 4 * x.numel())
    assert torch.allclose(out, 2 * x) and result["ms"] > 0 and result["gbs"] > 0


def test_counting_works_where_triton_was_loaded_to_compile_for_a_gpu(tmp_path):
    """On a GPU machine Triton's library (tl.max, tl.sum, tl.zeros) is compiled-mode JITFunctions;
    a counted launch still runs in the interpreter, and afterwards they are as they were."""
    import subprocess
    import sys

    script = tmp_path / "compiled_mode.py"
    script.write_text(
        "import os\nos.environ.pop('TRITON_INTERPRET', None)\n"
        "import torch, triton, triton.language as tl\n"
        "assert type(tl.max).__name__ == 'JITFunction'\n"
        "from course_lib import triton_traffic\n"
        "@triton.jit\n"
        "def row_max(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):\n"
        "    cols = tl.arange(0, BLOCK)\n"
        "    x = tl.load(x_ptr + tl.program_id(0) * n_cols + cols, mask=cols < n_cols, other=-float('inf'))\n"
        "    tl.store(out_ptr + tl.program_id(0), tl.max(x, axis=0))\n"
        "x, out = torch.randn(3, 5), torch.zeros(3)\n"
        "traffic = triton_traffic.count(row_max, (3,), x, out, 5, BLOCK=8)\n"
        "assert torch.equal(out, x.max(dim=1).values) and traffic.bytes_loaded == 60, traffic.summary()\n"
        "try:\n    tl.max(1)\nexcept RuntimeError:\n    print('restored')\n")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "restored", done.stderr[-2000:]


def test_the_lecture_kernels_can_be_shown_without_importing_triton():
    for name in ("scale_kernel", "row_sum_kernel", "tile_dot_kernel"):
        text = triton_traffic.lecture_kernel_source(name)
        assert text.startswith("@triton.jit") and f"def {name}(" in text and text == tk.source(getattr(tk, name))
    with pytest.raises(KeyError):
        triton_traffic.lecture_kernel_source("softmax_kernel")


@triton.jit
def _row_softmax_sum(x, axis: tl.constexpr):   # a helper: one more device call per program
    e = tl.exp(x - tl.max(x, axis=axis))
    return e / tl.sum(e, axis=axis)


@triton.jit
def row_softmax_kernel(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + tl.program_id(0) * n_cols + cols, mask=cols < n_cols, other=-float("inf"))
    tl.store(out_ptr + tl.program_id(0) * n_cols + cols, _row_softmax_sum(x, 0), mask=cols < n_cols)


def test_device_calls_patch_the_language_once_per_launch_and_it_is_put_back():
    """Inside a counted launch, a device function (tl.max, tl.sum, a kernel's helper) runs against
    the language the launch patched, without patching it again; the launch's own patch and
    Triton's _patch_lang are put back afterwards, also after a launch that fails."""
    from triton.runtime import interpreter

    patch_lang, calls = interpreter._patch_lang, []

    def counted(fn):
        calls.append(fn.__name__)
        return patch_lang(fn)

    interpreter._patch_lang = counted
    try:
        x, out = torch.randn(5, 7), torch.zeros(5, 7)
        traffic = triton_traffic.count(row_softmax_kernel, (5,), x, out, 7, BLOCK=8)
        assert torch.allclose(out, torch.softmax(x, dim=1), atol=1e-6) and traffic.bytes_loaded == 4 * 35
        launch_calls = len(calls)
        assert calls[0] == "row_softmax_kernel" and 0 < launch_calls < 5, calls   # not 5 programs x 3 calls
        with pytest.raises(triton_traffic.OutOfBounds):
            triton_traffic.count(copy_one_too_far, (1,), torch.zeros(8), torch.zeros(8), 8, BLOCK=16)
        assert interpreter._patch_lang is counted
    finally:
        interpreter._patch_lang = patch_lang
    assert tl.core.is_builtin(tl.program_id) and tl.core.is_builtin(tl.core.program_id)   # the language as it was
