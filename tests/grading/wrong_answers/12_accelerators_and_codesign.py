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
    'ex1_diagnose': [
        # overlapped drains with a full P-row drain at the end: wrong when the last row block is short
        ('        last_rows = M - (M - 1) // P * P', '        last_rows = P'),
        # overlapped drains taken as no drain at all
        ('        return systolic.cycle_count("output", M, K, N, P).compute + last_rows',
         '        return systolic.cycle_count("output", M, K, N, P).compute'),
        # judged on the first run only (one square tile: every model agrees)
        ('        if all(model(M, K, N) == cycles for M, K, N, cycles in runs):',
         '        if all(model(M, K, N) == cycles for M, K, N, cycles in runs[:1]):'),
        # weight and input stationary swapped (A streamed through stationary weights read as input stationary)
        [('              "weight": lambda M, K, N: systolic.cycle_count("weight",',
          '              "input": lambda M, K, N: systolic.cycle_count("weight",'),
         ('              "input": lambda M, K, N: systolic.cycle_count("input",',
          '              "weight": lambda M, K, N: systolic.cycle_count("input",')],
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
    'ex3_shape': [
        # the TPU's square array whatever the workload
        ('    return min(shapes, key=lambda s: (sum(cycles(M, K, N, *s) for M, K, N in workload), -s[0]))',
         '    return min(shapes, key=lambda s: (abs(s[0] - s[1]), -s[0]))'),
        # every tile taken as full: the rows beyond a small batch counted as useful
        [('        row_blocks = [min(rows, M - s) for s in range(0, M, rows)]',
          '        row_blocks = [rows] * -(-M // rows)'),
         ('        col_blocks = [min(cols, N - s) for s in range(0, N, cols)]',
          '        col_blocks = [cols] * -(-N // cols)')],
        # every drain paid, as in the lecture's sequential tiles
        ('        return total + len(row_blocks) * len(col_blocks) * (K - 2) + row_blocks[-1]',
         '        return total + len(row_blocks) * len(col_blocks) * (K - 2) + len(col_blocks) * sum(row_blocks)'),
        # ties to the wider array
        ('for M, K, N in workload), -s[0]))', 'for M, K, N in workload), s[0]))'),
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
    'ex5_cheapest': [
        # the padding not stored: bytes of the row's own values only
        [('        return back, rows * (width * element_bytes + width // 32)',
          '        return back, rows * cols * (element_bytes + 1 / 32)'),
         ('        return back, rows * (width * 0.5 + width // 16) + 4',
          '        return back, rows * cols * (0.5 + 1 / 16) + 4')],
        # the worst relative error of one value instead of the tensor's
        ('        error = np.linalg.norm(np.asarray(back, dtype=np.float64) - exact) / np.linalg.norm(exact)',
         '        error = np.max(np.abs(np.asarray(back, dtype=np.float64) - exact)\n'
         '                       / np.maximum(np.abs(exact), 1e-30))'),
        # the most accurate format within the budget instead of the cheapest
        ('        if error <= budget and (best is None or nbytes < best[0]):\n            best = (nbytes, name)',
         '        if error <= budget and (best is None or error < best[0]):\n            best = (error, name)'),
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
    'ex8_mx_matmul': [
        # the first block's scale for all of K: one scale per row of a (and of w), not one per block
        [('sa_ptr + rm * stride_sa + blk,', 'sa_ptr + rm * stride_sa,'),
         ('sw_ptr + rn * stride_sw + blk,', 'sw_ptr + rn * stride_sw,')],
        # e8m0's bias taken as 128: every scale's exponent off by one
        ('sw[None, :] - 254.0)', 'sw[None, :] - 256.0)'),
        # the two scale codes added as uint8 before the conversion: a sum past 255 wraps around
        [('        sa = tl.load(sa_ptr + rm * stride_sa + blk, mask=rm < M, other=0).to(tl.float32)\n'
          '        sw = tl.load(sw_ptr + rn * stride_sw + blk, mask=rn < N, other=0).to(tl.float32)\n',
          '        sa = tl.load(sa_ptr + rm * stride_sa + blk, mask=rm < M, other=0)\n'
          '        sw = tl.load(sw_ptr + rn * stride_sw + blk, mask=rn < N, other=0)\n'),
         ('tl.exp2(sa[:, None] + sw[None, :] - 254.0)', 'tl.exp2((sa[:, None] + sw[None, :]).to(tl.float32) - 254.0)')],
        # no masks: the ragged programs read and write past the matrices
        [(', mask=rm[:, None] < M, other=0)', ')'), (', mask=rn[None, :] < N, other=0)', ')'),
         (', mask=rm < M, other=0)', ')'), (', mask=rn < N, other=0)', ')'),
         (', acc,\n             mask=(rm[:, None] < M) & (rn[None, :] < N))', ', acc)')],
        # no subnormals in e2m1: code 1 read as 1.5 x 2^-1 = 0.75, code 0 as 0.5
        ('    value = tl.where(exponent == 0, mantissa, normal)\n', '    value = normal\n'),
        # the sign bit dropped
        ('    return tl.where(code >= 8, -value, value)', '    return value'),
        # each byte loaded twice, once for each code it holds: the codes' bytes twice over the budget
        ('fp4_value(a >> 4), fp4_value(w >> 4)',
         'fp4_value(tl.load(a_ptr + rm[:, None] * stride_a + blk * 16 + rb[None, :], mask=rm[:, None] < M, '
         'other=0) >> 4), fp4_value(tl.load(w_ptr + rn[None, :] * stride_w + blk * 16 + rb[:, None], '
         'mask=rn[None, :] < N, other=0) >> 4)'),
        # the scale looked up code by code (each code's block, k // 32) and reduced: 16 loads of one byte
        ('        sa = tl.load(sa_ptr + rm * stride_sa + blk, mask=rm < M, other=0).to(tl.float32)\n',
         '        sa = tl.max(tl.load(sa_ptr + rm[:, None] * stride_sa + (blk * 32 + 2 * rb[None, :]) // 32, '
         'mask=rm[:, None] < M, other=0), axis=1).to(tl.float32)\n'),
        # c's columns taken as 1 apart: right for a c with rows of its own, wrong for a transposed c
        ('rn[None, :] * stride_cn, acc', 'rn[None, :], acc'),
        # the operands' rows K / 2 bytes apart (their scales K / 32): the shape, not the strides passed;
        # right for contiguous operands only, wrong for slices of wider buffers
        [('rm[:, None] * stride_a', 'rm[:, None] * (K // 2)'), ('rn[None, :] * stride_w', 'rn[None, :] * (K // 2)'),
         ('rm * stride_sa', 'rm * (K // 32)'), ('rn * stride_sw', 'rn * (K // 32)')],
    ],
    'ex9_diagnosis': [
        # flush to zero below the smallest subnormal: values between 2^-25 and 2^-24 round up to 2^-24, not to 0
        ('((g * scale).abs() <= 2.0 ** -25)', '((g * scale).abs() < 2.0 ** -24)'),
        # the tie at half the smallest subnormal rounded up: 2^-25 goes to the even code, 0
        ('((g * scale).abs() <= 2.0 ** -25)', '((g * scale).abs() < 2.0 ** -25)'),
        # entries already 0 counted as flushed
        ('    flushed = nonzero & ((g * scale).abs() <= 2.0 ** -25)',
         '    flushed = (g * scale).abs() <= 2.0 ** -25'),
        # the share of every entry, zeros included
        ('    return int(flushed.sum()) / max(int(nonzero.sum()), 1)', '    return int(flushed.sum()) / g.numel()'),
        # the loss scale ignored
        ('((g * scale).abs() <= 2.0 ** -25)', '(g.abs() <= 2.0 ** -25)'),
        # "no NaN, no inf: it trained": fp16 without scaling reported as converged (issue 42)
        ('    if losses[-1] <= 0.6 * losses[0]:\n        return "trained"',
         '    return "trained"\n    if losses[-1] <= 0.6 * losses[0]:\n        return "trained"'),
        # "the loss went down: it trained"
        ('    if losses[-1] <= 0.6 * losses[0]:', '    if losses[-1] < losses[0]:'),
        # the best loss on the way taken for the last one
        ('    if losses[-1] <= 0.6 * losses[0]:', '    if min(losses) <= 0.6 * losses[0]:'),
        # the zero-gradient share read at the last step, not averaged over the run
        ('    return "stalled" if sum(zeros) / len(zeros) >= 0.5 else "slow"',
         '    return "stalled" if zeros[-1] >= 0.5 else "slow"'),
        # a GradScaler's skipped steps taken for a divergence
        ('    if not all(math.isfinite(v) for v in losses):',
         '    if run["skipped"] or not all(math.isfinite(v) for v in losses):'),
        # stalled whenever most gradients are 0, however far the loss fell
        [('    if losses[-1] <= 0.6 * losses[0]:\n        return "trained"\n', ''),
         ('    return "stalled" if sum(zeros) / len(zeros) >= 0.5 else "slow"',
          '    if sum(zeros) / len(zeros) >= 0.5:\n        return "stalled"\n'
          '    return "trained" if losses[-1] <= 0.6 * losses[0] else "slow"')],
        # the mode's name taken for the diagnosis: fp16 without a scaler always stalled
        ('    zeros = [float(z) for z in run["zero_fraction"]]\n',
         '    zeros = [1.0 if run["mode"] == "fp16" else 0.0]\n'),
    ],
}

LIBRARY_CALLS = {
    # the library's three dataflows, without the overlapped drains
    'ex1_diagnose': [('              "output, drains overlapped": overlapped,\n', '')],
    # the library's cycle count and utilization: no double buffering
    'ex2_double_buffered': [
        ('    tiles = (K // P) * (N // P)\n    return P + tiles * (M + 2 * P - 2)',
         '    return systolic.cycle_count("weight", M, K, N, P).total'),
        ('    M = math.ceil(target * (P + tiles * (2 * P - 2)) / (tiles * (1 - target)))\n'
         '    M = max(M - 2, 1)\n'
         '    while M * K * N < target * ws_cycles_double_buffered(M, K, N, P) * P * P:',
         '    M = 1\n    while systolic.utilization("weight", M, K, N, P) < target:')],
    # the library's sequential tiles priced for every shape: every drain paid
    'ex3_shape': [('    return min(shapes, key=lambda s: (sum(cycles(M, K, N, *s) for M, K, N in workload), -s[0]))',
                   '    return min(shapes, key=lambda s: (sum(systolic.cycle_count("output", M, K, N, *s).total\n'
                   '                                          for M, K, N in workload), -s[0]))')],
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
    # the lecture's error-against-bytes table: its recipes, rows a multiple of the block, no padding
    'ex5_cheapest': [('    x = np.asarray(x, dtype=np.float32)\n    rows, cols = x.shape\n',
                      '    x = np.asarray(x, dtype=np.float32)\n'
                      '    fitting = [r for r in microscaling.error_vs_bytes(x) if r["relative_error"] <= budget]\n'
                      '    return min(fitting, key=lambda r: r["bytes_per_value"])["method"] if fitting else "fp32"\n'
                      '    rows, cols = x.shape\n')],
    # the lecture's bit-level encoder: it takes float32, so float64 values are rounded twice
    'ex6_e4m3': [('    x = np.asarray(x, dtype=np.float64)\n    m = np.abs(x)\n',
                  '    return formats.encode(x, "e4m3", saturate=True)\n    m = np.abs(x)\n')],
    # the lecture's MX quantizer: float32 again, so an amax just below a power of two rounds up to it
    'ex7_mxfp4': [('    x = np.asarray(x, dtype=np.float64)\n    blocks = x.reshape(x.shape[0], -1, 32)',
                   '    t = microscaling.mx_quantize(x, "e2m1")\n    return t.scales, t.codes\n'
                   '    blocks = x.reshape(x.shape[0], -1, 32)')],
    # the lecture's MXFP4 kernel called from the student's: refused by the grader (a course library kernel),
    # and contiguous operands and whole tiles only (no strides, no masks) besides
    'ex8_mx_matmul': [('@triton.jit\ndef fp4_value', 'from course_lib.block_scaled import mxfp4_matmul_kernel\n\n\n'
                       '@triton.jit\ndef fp4_value'),
                      ('    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)\n'
                       '    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)\n'
                       '    rb = tl.arange(0, 16)                                   # one MX block: 32 codes in 16'
                       ' bytes\n'
                       '    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)\n'
                       '    for blk in range(0, K // 32):\n'
                       '        a = tl.load(a_ptr + rm[:, None] * stride_a + blk * 16 + rb[None, :], mask=rm[:,'
                       ' None] < M, other=0)\n'
                       '        w = tl.load(w_ptr + rn[None, :] * stride_w + blk * 16 + rb[:, None], mask=rn[None,'
                       ' :] < N, other=0)\n'
                       '        sa = tl.load(sa_ptr + rm * stride_sa + blk, mask=rm < M, other=0).to(tl.float32)\n'
                       '        sw = tl.load(sw_ptr + rn * stride_sw + blk, mask=rn < N, other=0).to(tl.float32)\n'
                       '        part = tl.dot(fp4_value(a & 15), fp4_value(w & 15), input_precision="ieee")\n'
                       '        part += tl.dot(fp4_value(a >> 4), fp4_value(w >> 4), input_precision="ieee")\n'
                       '        acc += part * tl.exp2(sa[:, None] + sw[None, :] - 254.0)     # 2^(sa - 127) *'
                       ' 2^(sw - 127)\n'
                       '    tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn, acc,\n'
                       '             mask=(rm[:, None] < M) & (rn[None, :] < N))',
                       '    mxfp4_matmul_kernel(a_ptr, sa_ptr, w_ptr, sw_ptr, c_ptr, M, N, K, BLOCK_M, BLOCK_N)')],
    # the lecture's underflow count: the fraction measured on the lecture's model at the first step, not on
    # the gradients given
    'ex9_diagnosis': [('    tensors = grads.values() if isinstance(grads, dict) else [grads]\n',
                       '    return mixed_precision.underflow_count(mixed_precision.make_model(), '
                       '*mixed_precision.make_task(), scale=scale)["fraction"]\n'
                       '    tensors = grads.values() if isinstance(grads, dict) else [grads]\n')],
}
