# format: edits
"""Plausible wrong answers for lesson 01's exercises; each must lose points.

Each wrong answer is the edit it makes to the reference solution cell (the cell with its
``### BEGIN/END SOLUTION`` lines removed): ``(old, new)`` replaces the one occurrence of
``old``; a list of pairs makes several edits in order. The comment above says the mistake.
"""

WRONG_ANSWERS = {
    'ex1_peak': [
        # counts an FMA as one FLOP
        ('2 * fma_units', 'fma_units'),
        # lanes from bytes, not bits
        ('    lanes = simd_bits // dtype_bits', '    lanes = simd_bits // 8'),
        # forgets the number of FMA units
        ('2 * fma_units', '2'),
    ],
    'ex2_intensity': [
        # counts only the reads, not the write of the result
        [('    return 1 / (3 * itemsize)', '    return 1 / (2 * itemsize)'),
         ('    return 2 * n**3 / (3 * n * n * itemsize)', '    return 2 * n**3 / (2 * n * n * itemsize)')],
        # matmul FLOPs as n^3 (multiplies only, no adds)
        ('2 * n**3', 'n**3'),
        # bytes per element forgotten: FLOPs per element instead of per byte
        [('(3 * itemsize)', '3'),
         ('n * itemsize)', 'n)')],
    ],
    'ex3_roofline': [
        # the ridge point upside down
        ('peak / bandwidth', 'bandwidth / peak'),
        # adds the two times as if arithmetic and memory traffic did not overlap
        ('max(flops / peak, bytes_moved / bandwidth)', 'flops / peak + bytes_moved / bandwidth'),
        # at the ridge point itself calls it memory-bound, and takes the faster of the two
        [('    return "memory-bound" if intensity < peak / bandwidth else "compute-bound"', '    return "memory-bound" if intensity <= peak / bandwidth else "compute-bound"'),
         ('max(flops', 'min(flops')],
    ],
    'ex4_lines': [
        # counts elements read, as if every read fetched its own line
        ('len({(i * itemsize) // line_bytes for i in range(0, n, stride)})', 'len(range(0, n, stride))'),
        # the bytes of the whole array divided into lines, ignoring the stride
        ('len({(i * itemsize) // line_bytes for i in range(0, n, stride)})', '-(-n * itemsize // line_bytes)'),
        # forgets the element size: indices instead of byte addresses
        ('len({(i * itemsize)', 'len({i'),
    ],
    'ex5_latency': [
        # divides where it should multiply
        ('    return latency_s * clock_hz', '    return latency_s / clock_hz'),
        # nanoseconds assumed: the answer is a billion times too large
        [('    return latency_s * clock_hz', '    return latency_s * 1e9 * clock_hz'),
         ('    return latency_s * peak_flops', '    return latency_s * 1e9 * peak_flops')],
        # right cycles, but FLOPs forgone counted per cycle at one FLOP per cycle
        ('    return latency_s * peak_flops', '    return latency_s * 3e9'),
    ],
}
