"""Plausible wrong answers for lesson 01's exercises; each must lose points."""

WRONG_ANSWERS = {
    "ex1_peak": [
        # counts an FMA as one FLOP
        """def peak_flops(cores, clock_hz, simd_bits, dtype_bits=32, fma_units=2):
    lanes = simd_bits // dtype_bits
    return cores * clock_hz * lanes * fma_units
""",
        # lanes from bytes, not bits
        """def peak_flops(cores, clock_hz, simd_bits, dtype_bits=32, fma_units=2):
    lanes = simd_bits // 8
    return cores * clock_hz * lanes * 2 * fma_units
""",
        # forgets the number of FMA units
        """def peak_flops(cores, clock_hz, simd_bits, dtype_bits=32, fma_units=2):
    lanes = simd_bits // dtype_bits
    return cores * clock_hz * lanes * 2
""",
    ],
    "ex2_intensity": [
        # counts only the reads, not the write of the result
        """def intensity_add(itemsize=4):
    return 1 / (2 * itemsize)


def intensity_matmul(n, itemsize=4):
    return 2 * n**3 / (2 * n * n * itemsize)
""",
        # matmul FLOPs as n^3 (multiplies only, no adds)
        """def intensity_add(itemsize=4):
    return 1 / (3 * itemsize)


def intensity_matmul(n, itemsize=4):
    return n**3 / (3 * n * n * itemsize)
""",
        # bytes per element forgotten: FLOPs per element instead of per byte
        """def intensity_add(itemsize=4):
    return 1 / 3


def intensity_matmul(n, itemsize=4):
    return 2 * n**3 / (3 * n * n)
""",
    ],
    "ex3_roofline": [
        # the ridge point upside down
        """def bound(intensity, peak, bandwidth):
    return "memory-bound" if intensity < bandwidth / peak else "compute-bound"


def kernel_seconds(flops, bytes_moved, peak, bandwidth):
    return max(flops / peak, bytes_moved / bandwidth)
""",
        # adds the two times as if arithmetic and memory traffic did not overlap
        """def bound(intensity, peak, bandwidth):
    return "memory-bound" if intensity < peak / bandwidth else "compute-bound"


def kernel_seconds(flops, bytes_moved, peak, bandwidth):
    return flops / peak + bytes_moved / bandwidth
""",
        # at the ridge point itself calls it memory-bound, and takes the faster of the two
        """def bound(intensity, peak, bandwidth):
    return "memory-bound" if intensity <= peak / bandwidth else "compute-bound"


def kernel_seconds(flops, bytes_moved, peak, bandwidth):
    return min(flops / peak, bytes_moved / bandwidth)
""",
    ],
    "ex4_lines": [
        # counts elements read, as if every read fetched its own line
        """def lines_touched(n, stride, itemsize=4, line_bytes=64):
    return len(range(0, n, stride))
""",
        # the bytes of the whole array divided into lines, ignoring the stride
        """def lines_touched(n, stride, itemsize=4, line_bytes=64):
    return -(-n * itemsize // line_bytes)
""",
        # forgets the element size: indices instead of byte addresses
        """def lines_touched(n, stride, itemsize=4, line_bytes=64):
    return len({i // line_bytes for i in range(0, n, stride)})
""",
    ],
    "ex5_latency": [
        # divides where it should multiply
        """def latency_cycles(latency_s, clock_hz):
    return latency_s / clock_hz


def flops_forgone(latency_s, peak_flops):
    return latency_s * peak_flops
""",
        # nanoseconds assumed: the answer is a billion times too large
        """def latency_cycles(latency_s, clock_hz):
    return latency_s * 1e9 * clock_hz


def flops_forgone(latency_s, peak_flops):
    return latency_s * 1e9 * peak_flops
""",
        # right cycles, but FLOPs forgone counted per cycle at one FLOP per cycle
        """def latency_cycles(latency_s, clock_hz):
    return latency_s * clock_hz


def flops_forgone(latency_s, peak_flops):
    return latency_s * 3e9
""",
    ],
}
