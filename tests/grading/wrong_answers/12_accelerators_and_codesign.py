# format: edits
"""Plausible wrong answers for lesson 12's exercises; each must lose points.

Each wrong answer is the edit it makes to the reference solution cell (the cell with its
``### BEGIN/END SOLUTION`` lines removed): ``(old, new)`` replaces the one occurrence of
``old``; a list of pairs makes several edits in order. The comment above says the mistake.

``LIBRARY_CALLS`` holds, for every solution cell, the shortest answer a student who reads
``course_lib`` would write: the closest library function called instead of the exercise's
own reasoning. Each must lose points too.
"""

WRONG_ANSWERS = {
    'ex1_meeting': [
        # forgets the column skew: only rows are delayed
        ('    k = t - i - j', '    k = t - i'),
        # off by one at the end of the reduction
        ('    return k if 0 <= k < K else None', '    return k if 0 <= k <= K else None'),
        # adds the skew instead of subtracting it
        ('    k = t - i - j', '    k = t + i + j'),
    ],
    'ex2_double_buffered': [
        # every load still exposed (the lecture's sequential phases)
        ('    return P + tiles * (M + 2 * P - 2)', '    return tiles * (P + M + 2 * P - 2)'),
        # forgets the first load too
        ('    return P + tiles * (M + 2 * P - 2)', '    return tiles * (M + 2 * P - 2)'),
        # utilization counted per tile, ignoring the exposed first load
        ('    while M * K * N < target * ws_cycles_double_buffered(M, K, N, P) * P * P:',
         '    while M < target * (M + 2 * P - 2):'),
        # one batch too many: strict inequality at the boundary
        ('    while M * K * N < target * ws_cycles_double_buffered(M, K, N, P) * P * P:\n'
         '        M += 1\n'
         '    return M',
         '    while M * K * N <= target * ws_cycles_double_buffered(M, K, N, P) * P * P:\n'
         '        M += 1\n'
         '    return M'),
    ],
    'ex3_overlap': [
        # every drain still paid (the lecture's sequential tiles)
        ('            total += rows + cols + K - 2', '            total += rows + cols + K - 2 + rows'),
        # no drain at all
        ('    return total + rows', '    return total'),
        # the last drain taken as a full P rows
        ('    return total + rows', '    return total + P'),
    ],
    'ex4_per_channel': [
        # one scale for the whole tensor (the lecture's per-tensor rule)
        ('    peak = x.abs().amax(dim=1)', '    peak = x.abs().max().expand(x.shape[0])'),
        # truncates instead of rounding
        ('torch.clamp(torch.round(x / scales[:, None]),', 'torch.clamp(x / scales[:, None],'),
        # quantizes b per row instead of per column
        [('    qbt, sb = quantize_int8_rows(b.T)', '    qb, sb = quantize_int8_rows(b)'),
         ('    codes = qa.to(torch.int32) @ qbt.T.to(torch.int32)',
          '    codes = qa.to(torch.int32) @ qb.to(torch.int32)'),
         ('sa[:, None] * sb[None, :]', 'sa[:, None] * sb[:, None].mean()')],
        # accumulates in int16
        ('qa.to(torch.int32) @ qbt.T.to(torch.int32)', 'qa.to(torch.int16) @ qbt.T.to(torch.int16)'),
    ],
    'ex5_format': [
        # bfloat16 first: loses float16's precision when both fit
        ('("float16", "bfloat16",', '("bfloat16", "float16",'),
        # compares the smallest magnitude with eps instead of the smallest normal
        ('min_abs >= info.smallest_normal', 'min_abs >= info.eps'),
        # the whole epsilon as the rounding error
        ('info.eps / 2 <= max_rel_error', 'info.eps <= max_rel_error'),
    ],
    'ex6_e4m3': [
        # round half up instead of half to even
        ('    q = np.rint(m / step)', '    q = np.floor(m / step + 0.5)'),
        # no saturation: past 448 becomes NaN, as a non-saturating conversion writes
        ('    code = np.where(code > 0x7E, 0x7E, code)   # saturate at 448',
         '    code = np.where(code > 0x7E, 0x7F, code)'),
        # rounds a float32 copy: twice
        ('    m = np.abs(x)\n', '    m = np.abs(x.astype(np.float32)).astype(np.float64)\n'),
        # subnormals flushed to zero
        ('    code = ((e_t + 7) << 3)', '    q = np.where(m < 2.0 ** -6, 0, q)\n    code = ((e_t + 7) << 3)'),
    ],
    'ex7_mxfp4': [
        # the scale from the block's mean magnitude instead of its largest
        ('    amax = np.abs(blocks).max(axis=-1)', '    amax = np.abs(blocks).mean(axis=-1)'),
        # the shared exponent off by one (floor(log2 amax) - 1)
        ('np.where(amax > 0, e - 1 - 2, -127)', 'np.where(amax > 0, e - 2, -127)'),
        # no saturation: values past 6 left at 8, which is no e2m1 value
        ('    value = np.minimum(np.rint(m / step) * step, 6.0)', '    value = np.rint(m / step) * step'),
        # round half up
        ('np.rint(m / step) * step', 'np.floor(m / step + 0.5) * step'),
    ],
}

LIBRARY_CALLS = {
    # the fill time from systolic.cycle_count, without the range check of k
    'ex1_meeting': [('    k = t - i - j\n    return k if 0 <= k < K else None',
                     '    from course_lib import systolic\n'
                     '    return t - '
                     '(systolic.cycle_count("output", i + 1, 1, j + 1, rows=max(i, j) + 1).compute - 1)')],
    # the library's cycle count and utilization: no double buffering
    'ex2_double_buffered': [
        ('    tiles = (K // P) * (N // P)\n    return P + tiles * (M + 2 * P - 2)',
         '    return systolic.cycle_count("weight", M, K, N, P).total'),
        ('    M = math.ceil(target * (P + tiles * (2 * P - 2)) / (tiles * (1 - target)))\n'
         '    M = max(M - 2, 1)\n'
         '    while M * K * N < target * ws_cycles_double_buffered(M, K, N, P) * P * P:',
         '    M = 1\n    while systolic.utilization("weight", M, K, N, P) < target:')],
    # the library's sequential tiles
    'ex3_overlap': [('    total = 0\n'
                     '    for i0 in range(0, M, P):\n'
                     '        rows = min(P, M - i0)\n'
                     '        for j0 in range(0, N, P):\n'
                     '            cols = min(P, N - j0)\n'
                     '            total += rows + cols + K - 2\n'
                     '    return total + rows',
                     '    return systolic.cycle_count("output", M, K, N, P).total')],
    # the per-tensor functions of course_lib.precision
    'ex4_per_channel': [
        ('    x = x.double()\n'
         '    peak = x.abs().amax(dim=1)\n'
         '    scales = torch.where(peak > 0, peak / 127, torch.ones_like(peak))\n'
         '    q = torch.clamp(torch.round(x / scales[:, None]), -127, 127).to(torch.int8)\n'
         '    return q, scales',
         '    return precision.quantize_int8(x)'),
        ('    qa, sa = quantize_int8_rows(a)\n'
         '    qbt, sb = quantize_int8_rows(b.T)\n'
         '    codes = qa.to(torch.int32) @ qbt.T.to(torch.int32)\n'
         '    approx = codes.double() * sa[:, None] * sb[None, :]\n'
         '    exact = a.double() @ b.double()\n'
         '    return float(torch.linalg.norm(approx - exact) / torch.linalg.norm(exact))',
         '    return precision.matmul_error(a, b, "int8")["relative_error"]')],
    # precision.fits: the range, not the precision
    'ex5_format': [('        info = torch.finfo(getattr(torch, name))\n'
                    '        if max_abs <= info.max and min_abs >= info.smallest_normal '
                    'and info.eps / 2 <= max_rel_error:',
                    '        if precision.fits(name, max_abs, min_abs):')],
    # the lecture's bit-level encoder: it takes float32, so float64 values are rounded twice
    'ex6_e4m3': [('    x = np.asarray(x, dtype=np.float64)\n    m = np.abs(x)\n',
                  '    return formats.encode(x, "e4m3", saturate=True)\n    m = np.abs(x)\n')],
    # the lecture's MX quantizer: float32 again, so an amax just below a power of two rounds up to it
    'ex7_mxfp4': [('    x = np.asarray(x, dtype=np.float64)\n    blocks = x.reshape(x.shape[0], -1, 32)',
                   '    t = microscaling.mx_quantize(x, "e2m1")\n    return t.scales, t.codes\n'
                   '    blocks = x.reshape(x.shape[0], -1, 32)')],
}
