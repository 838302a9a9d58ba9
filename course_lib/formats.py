"""Number formats bit by bit: fp32, bf16, fp16, fp8, fp6, fp4 and the e8m0 scale (lesson 12).

Every format here is a sign bit (except e8m0), ``E`` exponent bits and ``M`` mantissa bits; a
code's value is ``(-1)^s * 2^(e - bias) * (1 + m / 2^M)`` for a normal code (exponent field
``e > 0``) and ``(-1)^s * 2^(1 - bias) * (m / 2^M)`` for a subnormal one (``e == 0``). What the
formats differ in is which codes are special:

- ``"ieee"`` (fp32, bf16, fp16, fp8 e5m2): the all-ones exponent holds infinity (mantissa 0)
  and NaN (any other mantissa);
- ``"fn"`` (fp8 e4m3, "finite, NaN"): no infinity; only ``S.1111.111`` is NaN, so the all-ones
  exponent holds ordinary values up to 448 (OCP 8-bit Floating Point Specification (OFP8) 1.0);
- ``"none"`` (fp6 e3m2 and e2m3, fp4 e2m1): neither infinity nor NaN; every code is a number
  (OCP Microscaling Formats (MX) Specification 1.0, section 5.3);
- e8m0 (the MX block scale): no sign, no mantissa, ``2^(e - 127)`` for ``e`` in 0..254, 255 NaN.

:func:`encode` rounds float32 values to a format's codes with integer operations on the float32
bits (round to nearest, ties to even, subnormals, overflow to infinity / NaN or saturation to
the largest finite value); :func:`decode` reads codes back. The tests check both bit for bit
against torch's float8 casts and ``ml_dtypes`` (fp6, fp4, e8m0).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Format:
    """One binary floating-point format: field widths, exponent bias and its special codes.

    ``special`` is ``"ieee"``, ``"fn"`` or ``"none"`` (see the module docstring); ``nan`` is
    the magnitude code (sign bit clear) an encoder writes for NaN, None where there is none.
    """

    name: str
    exponent_bits: int
    mantissa_bits: int
    bias: int
    special: str
    nan: int | None
    signed: bool = True

    @property
    def bits(self) -> int:
        """Width of one code in bits."""
        return int(self.signed) + self.exponent_bits + self.mantissa_bits

    @property
    def max_code(self) -> int:
        """Magnitude code of the largest finite value."""
        e_all, m_all = (1 << self.exponent_bits) - 1, (1 << self.mantissa_bits) - 1
        if self.special == "ieee":
            return ((e_all - 1) << self.mantissa_bits) | m_all
        if self.special == "fn":
            return (e_all << self.mantissa_bits) | (m_all - 1)
        if self.special == "e8m0":
            return 254
        return (e_all << self.mantissa_bits) | m_all

    @property
    def inf(self) -> int | None:
        """Magnitude code of infinity, None for formats without one."""
        return ((1 << self.exponent_bits) - 1) << self.mantissa_bits if self.special == "ieee" else None


FORMATS = {f.name: f for f in (
    Format("fp32", 8, 23, 127, "ieee", 0x7FC00000),
    Format("bf16", 8, 7, 127, "ieee", 0x7FC0),
    Format("fp16", 5, 10, 15, "ieee", 0x7E00),
    Format("e5m2", 5, 2, 15, "ieee", 0x7F),
    Format("e4m3", 4, 3, 7, "fn", 0x7F),
    Format("e3m2", 3, 2, 3, "none", None),
    Format("e2m3", 2, 3, 1, "none", None),
    Format("e2m1", 2, 1, 1, "none", None),
    Format("e8m0", 8, 0, 127, "e8m0", 0xFF, signed=False),
)}
"""The course's formats by name: OCP's fp8 (e4m3, e5m2), fp6 (e3m2, e2m3), fp4 (e2m1), e8m0."""


def get(name: str | Format) -> Format:
    """The :class:`Format` called ``name`` (a Format is returned as it is)."""
    if isinstance(name, Format):
        return name
    if name not in FORMATS:
        raise ValueError(f"unknown format {name!r}; known: {tuple(FORMATS)}")
    return FORMATS[name]


def float32_bits(x) -> np.ndarray:
    """The 32 bits of each value of ``x`` as float32, as non-negative int64 integers."""
    return np.ascontiguousarray(np.asarray(x, dtype=np.float32)).view(np.uint32).astype(np.int64)


# ----------------------------------------------------------------- decoding
def decode(codes, fmt) -> np.ndarray:
    """The values (float64) of integer ``codes`` of format ``fmt``; NaN codes give NaN."""
    f = get(fmt)
    codes = np.asarray(codes).astype(np.int64)
    m_bits = f.mantissa_bits
    e = (codes >> m_bits) & ((1 << f.exponent_bits) - 1)
    m = codes & ((1 << m_bits) - 1)
    if f.special == "e8m0":
        return np.where(codes == f.nan, np.nan, np.ldexp(1.0, e - f.bias))
    sign = np.where((codes >> (f.exponent_bits + m_bits)) & 1, -1.0, 1.0)
    normal = np.ldexp((1 << m_bits) + m.astype(np.float64), e - f.bias - m_bits)
    subnormal = np.ldexp(m.astype(np.float64), 1 - f.bias - m_bits)
    value = sign * np.where(e == 0, subnormal, normal)
    magnitude = codes & ((1 << (f.bits - 1)) - 1)
    if f.special == "ieee":
        value = np.where(magnitude == f.inf, sign * np.inf, value)
        value = np.where(magnitude > f.inf, np.nan, value)
    elif f.special == "fn":
        value = np.where(magnitude == f.nan, np.nan, value)
    return value


def all_values(fmt) -> np.ndarray:
    """Every code of a format of at most 16 bits decoded, in code order (index = code)."""
    f = get(fmt)
    if f.bits > 16:
        raise ValueError(f"{f.name} has 2^{f.bits} codes: too many to list")
    return decode(np.arange(1 << f.bits), f)


# ----------------------------------------------------------------- encoding
def _round_magnitude(magnitude: np.ndarray, f: Format) -> np.ndarray:
    """Magnitude codes of float32 magnitudes (bits without the sign), rounded to nearest even.

    A float32 value is ``sig * 2^(E - 23)`` (``sig`` with its implicit bit). In ``f`` it is a
    multiple of ``2^(e_t - M)`` with ``e_t = max(E, emin)``: shift ``sig`` right by
    ``r = e_t - M - E + 23`` bits and round on the bits shifted out. The code is then
    ``((e_t + bias) << M) + n - 2^M``: a carry out of the mantissa moves into the exponent, and
    ``n < 2^M`` at ``e_t = emin`` is a subnormal code.
    """
    field, frac = magnitude >> 23, magnitude & 0x7FFFFF
    exponent = np.where(field == 0, -126, field - 127)
    sig = np.where(field == 0, frac, frac | (1 << 23))
    m_bits, emin = f.mantissa_bits, 1 - f.bias
    e_t = np.maximum(exponent, emin)
    r = np.minimum(e_t - m_bits - exponent + 23, 30)     # past 25 bits everything rounds to 0
    n = sig >> r
    rest = sig & ((1 << r) - 1)
    half = (1 << r) >> 1
    up = (r > 0) & ((rest > half) | ((rest == half) & ((n & 1) == 1)))
    return ((e_t + f.bias) << m_bits) + n + up - (1 << m_bits)


def _encode_e8m0(magnitude: np.ndarray, negative: np.ndarray, f: Format, saturate: bool) -> np.ndarray:
    """e8m0 codes: the float32 exponent field, rounded up when the fraction is past half
    (ties up from a normal float32, whose implicit 1 is odd; down from a subnormal). Zero,
    negative, infinite and NaN values have no e8m0 code and give NaN (0xFF)."""
    implicit = (magnitude >> 23) != 0
    code = (magnitude + 0x3FFFFF + implicit) >> 23
    code = np.where(code > 254, 254 if saturate else f.nan, code)
    invalid = negative | (magnitude == 0) | (magnitude >= 0x7F800000)
    return np.where(invalid, f.nan, code)


def encode(x, fmt, saturate: bool = False) -> np.ndarray:
    """Codes (int64) of the values ``x``, taken as float32, in format ``fmt``.

    Rounds to nearest, ties to even. A finite value that rounds past the largest finite value,
    and an infinity, become infinity (``"ieee"`` formats) or NaN (e4m3) unless ``saturate``,
    which writes the largest finite value with the value's sign (NVIDIA PTX's ``.satfinite``;
    torch's ``float8_e4m3fn`` cast). fp6 and fp4 have no infinity and no NaN: they always
    saturate, and a NaN raises ``ValueError`` (an MX block marks NaN in its scale). NaN keeps
    its sign bit and gets the format's ``nan`` code (torch's choice for fp8: ``S.1111.111`` and
    ``S.11111.11``; ml_dtypes writes ``S.11111.10`` for e5m2, also a NaN).
    ``saturate`` for e8m0 writes 2^127 for values past it.
    """
    f = get(fmt)
    shape = np.shape(x)
    bits = float32_bits(x).reshape(shape)
    sign, magnitude = bits >> 31, bits & 0x7FFFFFFF
    if f.special == "e8m0":
        return _encode_e8m0(magnitude, sign == 1, f, saturate)
    nan, inf = magnitude > 0x7F800000, magnitude == 0x7F800000
    if f.special == "none" and nan.any():
        raise ValueError(f"{f.name} has no NaN code")
    code = _round_magnitude(np.where(nan | inf, 0, magnitude), f)
    overflow = (code > f.max_code) | inf
    if saturate or f.special == "none":
        too_big = f.max_code
    else:
        too_big = f.inf if f.special == "ieee" else f.nan
    code = np.where(overflow, too_big, code)
    if f.nan is not None:
        code = np.where(nan, f.nan, code)
    return (sign << (f.bits - 1)) | code


def round_to(x, fmt, saturate: bool = False) -> np.ndarray:
    """``x`` (as float32) rounded to format ``fmt`` and read back as float64."""
    return decode(encode(x, fmt, saturate), fmt)


# ----------------------------------------------------------------- describing
def bit_string(code: int, fmt) -> str:
    """One code as its fields, sign / exponent / mantissa separated by spaces: ``"0 0111 000"``."""
    f = get(fmt)
    text = format(int(code), f"0{f.bits}b")
    sign = text[0] + " " if f.signed else ""
    rest = text[int(f.signed):]
    return (sign + rest[:f.exponent_bits] + " " + rest[f.exponent_bits:]).strip()


def describe(fmt) -> dict:
    """A format's range and precision, computed by decoding its codes (nothing quoted).

    Keys: ``format``, ``bits``, ``exponent_bits``, ``mantissa_bits``, ``bias``, ``max`` (largest
    finite), ``smallest_normal``, ``smallest_subnormal`` (None for e8m0), ``eps`` (gap above 1),
    ``has_inf``, ``has_nan``.
    """
    f = get(fmt)
    m = f.mantissa_bits
    one = f.bias << m
    return {
        "format": f.name, "bits": f.bits, "exponent_bits": f.exponent_bits, "mantissa_bits": m,
        "bias": f.bias, "max": float(decode(f.max_code, f)),
        "smallest_normal": float(decode(0 if f.special == "e8m0" else 1 << m, f)),
        "smallest_subnormal": None if f.special == "e8m0" else float(decode(1, f)),
        "eps": float(decode(one + 1, f) - decode(one, f)) if m else 1.0,
        "has_inf": f.special == "ieee", "has_nan": f.nan is not None,
    }


def plot_layouts(names=("fp32", "bf16", "fp16", "e5m2", "e4m3", "e3m2", "e2m3", "e2m1", "e8m0"), ax=None):
    """One bar per format, its sign, exponent and mantissa bits coloured and counted."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(7, 0.3 * len(names) + 0.5))
    colours = {"sign": "#d62728", "exponent": "#1f77b4", "mantissa": "#2ca02c"}
    for row, name in enumerate(names):
        f = get(name)
        y, x = len(names) - 1 - row, 0
        for part, width in (("sign", int(f.signed)), ("exponent", f.exponent_bits), ("mantissa", f.mantissa_bits)):
            if width:
                ax.barh(y, width, left=x, color=colours[part], edgecolor="white", height=0.7,
                        label=part if row == 0 or (part == "sign" and row == 0) else None)
                ax.text(x + width / 2, y, str(width), ha="center", va="center", color="white", fontsize=8)
            x += width
    ax.set_yticks(range(len(names)), [f"{n} ({get(n).bits} bits)" for n in reversed(names)])
    ax.set_xlabel("bits (sign | exponent | mantissa)")
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in colours.values()]
    ax.legend(handles, list(colours), fontsize=8, loc="lower right")
    ax.set_xlim(0, 33)
    return ax
