"""course_lib.block_scaled (lesson 12): fp4 codes packed two per byte in the stated order, the
e2m1 decoder in Triton equal to the bit-level one for all 16 codes, the MXFP4 kernel equal to
dequantise-then-matmul (microscaling's rule), and the bytes both kernels read equal to the tiling's
prediction: 0.5 + 1/32 bytes per value against bf16's 2."""
import numpy as np
import pytest
import torch

from course_lib import formats, microscaling, triton_traffic

triton_traffic.prepare()
triton = pytest.importorskip("triton")
tl = triton.language

from course_lib import block_scaled as bs  # noqa: E402


@triton.jit
def decode_kernel(code_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, bs.e2m1_value(tl.load(code_ptr + offs)))


def test_pack_order_and_round_trip():
    packed = bs.pack_fp4([[1, 2, 15, 0]])
    assert packed.dtype == torch.uint8 and packed.tolist() == [[1 | 2 << 4, 15]]   # element 2j low, 2j + 1 high
    codes = np.random.default_rng(0).integers(0, 16, (3, 64))
    assert bs.unpack_fp4(bs.pack_fp4(codes)).tolist() == codes.tolist()
    with pytest.raises(ValueError):
        bs.pack_fp4([[16, 0]])


def test_operand_is_microscaling_mxfp4():
    x = microscaling.with_outliers(128, every=40)[0].reshape(2, 64)
    codes, scales = bs.mxfp4_operand(x)
    t = microscaling.mx_quantize(x, "e2m1")
    assert codes.shape == (2, 32) and scales.shape == (2, 2) and scales.dtype == torch.uint8
    assert bs.unpack_fp4(codes).tolist() == t.codes.tolist() and scales.tolist() == t.scales.tolist()
    assert np.array_equal(bs.dequantize(codes, scales).numpy(), t.dequantize())


def test_e2m1_decoder_in_triton_matches_the_format():
    codes, out = torch.arange(16, dtype=torch.uint8), torch.zeros(16)
    triton_traffic.count(decode_kernel, (1,), codes, out, outputs=(1,), BLOCK=16)
    assert out.tolist() == formats.decode(np.arange(16), "e2m1").tolist()


def test_kernels_compute_the_product_and_read_the_predicted_bytes():
    gen = torch.Generator().manual_seed(3)
    block_sizes = torch.exp2(torch.randint(-5, 6, (16, 2), generator=gen)).repeat_interleave(32, 1)
    a = torch.randn(16, 64, generator=gen) * block_sizes          # each block of 32 on its own scale
    w = torch.randn(32, 64, generator=gen)
    c, traffic, expected = bs.counted("mxfp4", a, w)
    assert torch.allclose(c.double(), expected, rtol=1e-6, atol=1e-6 * float(expected.abs().max()))
    assert traffic.bytes_loaded == bs.matmul_bytes_loaded(16, 32, 64, 16, 16, "mxfp4") == (32 + 2) * (2 * 16 + 32)
    assert traffic.bytes_stored == 4 * 16 * 32
    c16, traffic16, expected16 = bs.counted("bf16", a, w)
    assert torch.allclose(c16.double(), expected16, rtol=1e-5, atol=1e-5 * float(expected16.abs().max()))
    assert traffic16.bytes_loaded == bs.matmul_bytes_loaded(16, 32, 64, 16, 16, "bf16") == 2 * 64 * (2 * 16 + 32)
    assert traffic16.bytes_loaded / traffic.bytes_loaded == pytest.approx(2 / (0.5 + 1 / 32))
    with pytest.raises(ValueError):
        bs.counted("fp8", a, w)
