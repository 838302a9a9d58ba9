"""course_lib.formats, bit for bit against torch's casts and ml_dtypes on a million values each.

The values: random float32 bit patterns (every exponent, NaN and infinity among them), values
spread over each format's range and past it, every tie (the midpoint of two neighbouring codes,
exact in float32) and every code's own value. torch casts float32 to float8_e4m3fn saturating
(448 for anything larger, infinity included), to float8_e5m2, float16 and bfloat16 with
overflow to infinity; ml_dtypes casts to e4m3 without saturation (NaN past 448), and to fp6,
fp4 (always saturating) and e8m0.
"""
import ml_dtypes
import numpy as np
import pytest
import torch

from course_lib import formats

TORCH = {"e4m3": (torch.float8_e4m3fn, True), "e5m2": (torch.float8_e5m2, False),
         "fp16": (torch.float16, False), "bf16": (torch.bfloat16, False)}
ML = {"e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2, "e3m2": ml_dtypes.float6_e3m2fn,
      "e2m3": ml_dtypes.float6_e2m3fn, "e2m1": ml_dtypes.float4_e2m1fn, "e8m0": ml_dtypes.float8_e8m0fnu}


def ties_and_codes(name: str) -> np.ndarray:
    """Every finite value of a small format, its negative, and every midpoint of two neighbours."""
    f = formats.get(name)
    if f.bits > 16:
        return np.zeros(0, np.float32)
    values = formats.all_values(name)
    values = np.sort(np.unique(np.abs(values[np.isfinite(values)])))
    mids = (values[1:] + values[:-1]) / 2
    edge = [values[-1] * 1.5, values[0] / 2, values[0] / 4]          # past the top, below the bottom
    both = np.concatenate([values, mids, edge])
    with np.errstate(over="ignore"):
        return np.concatenate([both, -both]).astype(np.float32)


def samples(name: str, n: int = 1_000_000, seed: int = 0) -> np.ndarray:
    """A million float32 values for format ``name``: a quarter random bit patterns, the rest spread
    from far below its smallest subnormal to past its largest value, then every tie and code."""
    rng = np.random.default_rng(seed)
    info = formats.describe(name)
    low = np.log2(info["smallest_subnormal"] or info["smallest_normal"]) - 3
    high = np.log2(info["max"]) + 2
    raw = rng.integers(0, 2**32, n // 4, dtype=np.uint64).astype(np.uint32).view(np.float32)
    exponents = rng.integers(int(low), int(high) + 1, n - n // 4)
    with np.errstate(over="ignore"):
        spread = np.ldexp(rng.uniform(-2, 2, exponents.size), exponents).astype(np.float32)
    extremes = np.array([np.inf, -np.inf, np.nan, -np.nan, 0.0, -0.0], np.float32)
    return np.concatenate([raw, spread, extremes, ties_and_codes(name)])


def torch_codes(x: np.ndarray, name: str) -> np.ndarray:
    dtype, _ = TORCH[name]
    view = torch.uint8 if dtype.itemsize == 1 else torch.int16
    return torch.from_numpy(x).to(dtype).view(view).numpy().astype(np.int64) & ((1 << 8 * dtype.itemsize) - 1)


def ml_codes(x: np.ndarray, name: str) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        return x.astype(ML[name]).view(np.uint8).astype(np.int64)


@pytest.mark.parametrize("name", list(TORCH))
def test_encode_matches_torch_bit_for_bit(name):
    x = samples(name)
    saturating = TORCH[name][1]
    mine = formats.encode(x, name, saturate=saturating)
    theirs = torch_codes(x, name)
    f = formats.get(name)
    nan = np.isnan(x)
    if f.bits == 8:     # fp8 NaN: S.1111.111 in both
        assert np.array_equal(mine, theirs)
    else:               # torch's 16-bit NaN payloads differ between casts: NaN is NaN
        assert np.array_equal(mine[~nan], theirs[~nan])
        assert np.isnan(formats.decode(mine[nan], name)).all()


@pytest.mark.parametrize("name", list(ML))
def test_encode_matches_ml_dtypes_bit_for_bit(name):
    x = samples(name, seed=1)
    if formats.get(name).special == "none":          # fp6/fp4 have no NaN code
        x = x[~np.isnan(x)]
    if name == "e8m0":                               # no sign and no zero: ml_dtypes writes NaN too
        x = np.abs(x)
    mine, theirs = formats.encode(x, name), ml_codes(x, name)
    nan = np.isnan(x) if name == "e5m2" else np.zeros(x.shape, bool)   # ml_dtypes' e5m2 NaN is S.11111.10
    assert np.array_equal(mine[~nan], theirs[~nan])
    assert np.isnan(formats.decode(theirs[nan], name)).all() and np.isnan(formats.decode(mine[nan], name)).all()


@pytest.mark.parametrize("name", list(ML))
def test_decode_every_code_matches_ml_dtypes(name):
    codes = np.arange(1 << formats.get(name).bits)
    theirs = codes.astype(np.uint8).view(ML[name]).astype(np.float64)
    assert np.array_equal(formats.decode(codes, name), theirs, equal_nan=True)


@pytest.mark.parametrize("name", ["fp16", "bf16"])
def test_decode_every_16_bit_code_matches_torch(name):
    codes = np.arange(1 << 16)
    theirs = torch.from_numpy(codes.astype(np.uint16).view(np.int16)).view(TORCH[name][0]).double().numpy()
    assert np.array_equal(formats.decode(codes, name), theirs, equal_nan=True)


def test_fp32_round_trips_every_pattern_sampled():
    x = samples("fp32")
    codes = formats.encode(x, "fp32")
    finite = ~np.isnan(x)
    assert np.array_equal(codes[finite], formats.float32_bits(x)[finite])
    assert np.array_equal(formats.decode(codes, "fp32")[finite], x[finite].astype(np.float64))


def test_layouts_ties_and_edges_by_hand():
    assert formats.bit_string(formats.encode(1.0, "e4m3"), "e4m3") == "0 0111 000"
    assert formats.bit_string(formats.encode(-448.0, "e4m3"), "e4m3") == "1 1111 110"
    assert formats.bit_string(formats.encode(2.0 ** -127, "e8m0"), "e8m0") == "00000000"
    assert formats.encode(np.nan, "e4m3") == 0x7F and formats.encode(-np.nan, "e4m3") == 0xFF
    assert formats.round_to(464.0, "e4m3", saturate=False) == 448.0          # tie: 448's mantissa is even
    assert np.isnan(formats.round_to(465.0, "e4m3"))                          # past the tie: NaN
    assert formats.round_to(1e9, "e4m3", saturate=True) == 448.0
    assert formats.round_to(np.inf, "e4m3", saturate=True) == 448.0
    assert formats.round_to(61440.0, "e5m2") == np.inf and formats.round_to(61439.0, "e5m2") == 57344.0
    assert formats.round_to(2.0 ** -10, "e4m3") == 0.0                        # half the smallest subnormal: tie to 0
    assert formats.round_to(1.25, "e2m1") == 1.0 and formats.round_to(1.75, "e2m1") == 2.0   # ties to even
    assert formats.round_to(-100.0, "e2m1") == -6.0                           # fp4 always saturates
    with pytest.raises(ValueError):
        formats.encode(np.nan, "e2m1")


def test_describe_computes_the_ocp_limits():
    table = {name: formats.describe(name) for name in formats.FORMATS}
    assert (table["e4m3"]["max"], table["e4m3"]["smallest_normal"], table["e4m3"]["smallest_subnormal"]) == (
        448.0, 2.0 ** -6, 2.0 ** -9)
    assert (table["e5m2"]["max"], table["e5m2"]["smallest_subnormal"]) == (57344.0, 2.0 ** -16)
    assert (table["e2m1"]["max"], table["e2m3"]["max"], table["e3m2"]["max"]) == (6.0, 7.5, 28.0)
    assert table["e8m0"]["max"] == 2.0 ** 127 and table["e8m0"]["smallest_normal"] == 2.0 ** -127
    assert table["fp16"]["max"] == 65504.0 and table["bf16"]["eps"] == 2.0 ** -7
    assert [table[n]["bits"] for n in ("fp32", "bf16", "e4m3", "e3m2", "e2m1", "e8m0")] == [32, 16, 8, 6, 4, 8]
    with pytest.raises(ValueError):
        formats.get("fp5")
