# format: edits
"""Plausible wrong answers for lesson 01's exercises; each must lose points.

Each wrong answer is the edit it makes to the reference solution cell (the cell with its
``### BEGIN/END SOLUTION`` lines removed): ``(old, new)`` replaces the one occurrence of
``old``; a list of pairs makes several edits in order. The comment above says the mistake.
"""

WRONG_ANSWERS = {
    'ex1_diagnose': [
        # counts an FMA as one FLOP: needs twice the clock, so a turbo run looks impossible
        ('* 2 * fma_units', '* fma_units'),
        # lanes from bytes, not bits
        ('(simd_bits // dtype_bits)', '(simd_bits // 8)'),
        # any figure above the reported clock called impossible: forgets turbo
        ('''    if needed <= max_turbo_hz:
        return "turbo"
''', ''),
        # compares the rate with the clock in GHz instead of the clock needed
        ('    if needed <= reported_clock_hz:', '    if measured_flops / 1e9 <= reported_clock_hz / 1e9:'),
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
        # adds the three times as if nothing overlapped
        ('max(flops / peak, hbm_bytes / hbm_bandwidth, pcie_bytes / pcie_bandwidth)',
         'flops / peak + hbm_bytes / hbm_bandwidth + pcie_bytes / pcie_bandwidth'),
        # the two-ceiling roofline: the PCIe stream forgotten
        [('max(flops / peak, hbm_bytes / hbm_bandwidth, pcie_bytes / pcie_bandwidth)',
          'max(flops / peak, hbm_bytes / hbm_bandwidth)'),
         (', "pcie": pcie_bytes / pcie_bandwidth}', '}')],
        # the fastest instead of the slowest
        [('    return max(flops', '    return min(flops'), ('max(times, key=times.get)', 'min(times, key=times.get)')],
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

# The shortest answer a student who reads course_lib would submit: the reference solution
# replaced by a call into the closest library function. Each must lose points.
LIBRARY_CALLS = {
    # the spec ceiling from roofline, and hardware's verdict sentence, instead of the diagnosis asked for
    'ex1_diagnose': [('''    flops_per_cycle = cores * (simd_bits // dtype_bits) * 2 * fma_units
    return measured_flops / flops_per_cycle''', '''    from course_lib.roofline import theoretical_peak_flops
    return theoretical_peak_flops(cores, 1.0, simd_bits, dtype_bits, fma_units)'''),
                     ('''    needed = clock_needed_hz(measured_flops, cores, simd_bits, dtype_bits, fma_units)
    if needed <= reported_clock_hz:
        return "below the ceiling"
    if needed <= max_turbo_hz:
        return "turbo"
    return "impossible"''', '''    from course_lib import hardware
    from course_lib.roofline import theoretical_peak_flops
    ceiling = theoretical_peak_flops(cores, reported_clock_hz, simd_bits, dtype_bits, fma_units)
    return hardware.spec_peak_share(measured_flops, ceiling, clock_is_maximum=False)[1]''')],
    # roofline's helpers with the float32 byte count of the lecture's table (12 bytes per element)
    'ex2_intensity': [('    return 1 / (3 * itemsize)',
                       '    from course_lib.roofline import arithmetic_intensity\n'
                       '    return arithmetic_intensity(1, 12)'),
                      ('    return 2 * n**3 / (3 * n * n * itemsize)',
                       '    from course_lib.roofline import arithmetic_intensity, matmul_flops\n'
                       '    return arithmetic_intensity(matmul_flops(n), 12 * n * n)')],
    # roofline.Roofline: two ceilings only, and its own labels
    'ex3_roofline': [('    return max(flops / peak, hbm_bytes / hbm_bandwidth, pcie_bytes / pcie_bandwidth)',
                      '    from course_lib.roofline import Roofline\n'
                      '    return flops / Roofline("gpu", peak, hbm_bandwidth).attainable(flops / hbm_bytes)'),
                     ('    times = {"compute": flops / peak, "memory": hbm_bytes / hbm_bandwidth, '
                      '"pcie": pcie_bytes / pcie_bandwidth}\n'
                      '    return max(times, key=times.get)',
                      '    from course_lib.roofline import Roofline\n'
                      '    return Roofline("gpu", peak, hbm_bandwidth).bound(flops / hbm_bytes)')],
    # kernels.warp_sectors with its defaults counts 32-byte sectors per warp, not lines
    'ex4_lines': ('    return len({(i * itemsize) // line_bytes for i in range(0, n, stride)})',
                  '    from course_lib.kernels import warp_sectors\n'
                  '    return warp_sectors([i * itemsize for i in range(0, n, stride)])'),
    # this machine's clock and measured peak instead of the arguments
    'ex5_latency': [('    return latency_s * clock_hz',
                     '    from course_lib import hardware\n'
                     '    return latency_s * hardware.cpu_info().max_clock_hz'),
                    ('    return latency_s * peak_flops',
                     '    from course_lib import roofline\n'
                     '    return latency_s * roofline.measure_peak_flops(256)[0]')],
}
