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
    'ex2_batch': [
        # only the weights' bytes: the activations read and written are forgotten
        ('moved = (b * d_in + d_in * d_out + b * d_out) * itemsize', 'moved = d_in * d_out * itemsize'),
        # the output is never written back
        ('moved = (b * d_in + d_in * d_out + b * d_out) * itemsize', 'moved = (b * d_in + d_in * d_out) * itemsize'),
        # one FLOP per multiply-add
        ('flops = 2 * b * d_in * d_out', 'flops = b * d_in * d_out'),
        # every layer becomes compute-bound at some batch: the largest allowed when none does
        ('    if intensity(max_batch) < ridge:\n        return None\n', ''),
    ],
    'ex3_link': [
        # the mean over all kernels: the kernels the link did not limit pull it down
        ('    return max(k["pcie_bytes"] / k["seconds"] for k in kernels)',
         '    return sum(k["pcie_bytes"] / k["seconds"] for k in kernels) / len(kernels)'),
        # the link's bytes over all the measured seconds, as if the kernels had shared one run
        ('    return max(k["pcie_bytes"] / k["seconds"] for k in kernels)',
         '    return sum(k["pcie_bytes"] for k in kernels) / sum(k["seconds"] for k in kernels)'),
        # the two-ceiling roofline: the link never limits
        ('             "link": kernel["pcie_bytes"] / link_bandwidth}', '             "link": 0.0}'),
        # the fastest of the three instead of the slowest
        ('    return max(times, key=times.get)', '    return min(times, key=times.get)'),
    ],
    'ex4_line': [
        # the stride in elements, not in bytes
        ('            return stride * itemsize', '            return stride'),
        # the first stride after the knee
        ('            return stride * itemsize', '            return 2 * stride * itemsize'),
        # the stride with the longest time per element: the noise of the plateau decides
        ('    steps = zip(strides, seconds_per_element, seconds_per_element[1:])',
         '    return strides[seconds_per_element.index(max(seconds_per_element))] * itemsize'),
        # waits for an exact doubling: the noise stops it early
        ('if next_seconds < 1.5 * seconds:', 'if next_seconds < 2 * seconds:'),
    ],
    'ex5_in_flight': [
        # rounded to the nearest instead of up: the last fraction of a line is not in flight
        ('    return math.ceil(latency_s * bandwidth / line_bytes)',
         '    return round(latency_s * bandwidth / line_bytes)'),
        # bytes in flight, not lines
        ('    return math.ceil(latency_s * bandwidth / line_bytes)', '    return math.ceil(latency_s * bandwidth)'),
        # one more for the line being delivered: enough, but not the fewest
        ('    return math.ceil(latency_s * bandwidth / line_bytes)',
         '    return math.ceil(latency_s * bandwidth / line_bytes) + 1'),
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
    # roofline.ridge_point taken for the batch: FLOPs per byte are not examples
    'ex2_batch': ('    ridge = peak_flops / bandwidth\n',
                  '    from course_lib.roofline import ridge_point\n'
                  '    return math.ceil(ridge_point(peak_flops, bandwidth))\n'
                  '    ridge = peak_flops / bandwidth\n'),
    # roofline.Roofline: two ceilings only, and its own labels
    'ex3_link': ("""    times = {"compute": kernel["flops"] / peak, "memory": kernel["hbm_bytes"] / hbm_bandwidth,
             "link": kernel["pcie_bytes"] / link_bandwidth}
    return max(times, key=times.get)""", """    from course_lib.roofline import Roofline
    return Roofline("gpu", peak, hbm_bandwidth).bound(kernel["flops"] / kernel["hbm_bytes"])"""),
    # hardware.cache_line_bytes: this machine's line as the operating system reports it, not the sweep's
    'ex4_line': ('    steps = zip(strides, seconds_per_element, seconds_per_element[1:])',
                 '    from course_lib import hardware\n'
                 '    return hardware.cache_line_bytes()'),
    # async_queue's backlog model: lines issued every line time, each busy for the latency, a thousand of them
    'ex5_in_flight': ('    return math.ceil(latency_s * bandwidth / line_bytes)',
                      '    from course_lib.async_queue import predicted_peak_in_flight\n'
                      '    return predicted_peak_in_flight(1000, line_bytes / bandwidth, latency_s)'),
}
