# format: edits
"""Plausible wrong answers for lesson 15's attention exercises; each must lose points.

Each wrong answer is the edit it makes to the reference solution cell (the cell with its
``### BEGIN/END SOLUTION`` lines removed): ``(old, new)`` replaces the one occurrence of
``old``; a list of pairs makes several edits in order. The comment above says the mistake.
Numerical mistakes fail the comparison with softmax (NumPy) or with torch's
scaled_dot_product_attention; loading more than a fused kernel needs breaks the byte budget
counted in Triton's interpreter; a wrong prediction of the bytes fails against the counter.
"""

WRONG_ANSWERS = {
    'ex1_online': [
        # no rescaling of the accumulator: acc keeps sums taken relative to an old, smaller maximum
        ('    acc_new = alpha[:, None] * acc + p @ v', '    acc_new = acc + p @ v'),
        # the running sum is not rescaled either when the maximum grows
        ('    l_new = alpha * l + p.sum(axis=1)', '    l_new = l + p.sum(axis=1)'),
        # the max not subtracted: plain exp(score), which overflows for scores in the hundreds
        [('    alpha = np.exp(m - m_new)\n', '    alpha = np.ones_like(m)\n'),
         ('p = np.exp(s - m_new[:, None])', 'p = np.exp(s)')],
        # the block's maximum instead of the running maximum: m forgets earlier blocks
        ('    m_new = np.maximum(m, s.max(axis=1))', '    m_new = s.max(axis=1)'),
    ],
    'ex2_attention': [
        # no rescaling of the accumulator when a later key block raises the maximum
        ('        acc = alpha[:, None] * acc + tl.dot(p, v, input_precision="ieee")',
         '        acc = acc + tl.dot(p, v, input_precision="ieee")'),
        # the mask applied after the softmax: masked keys still count in the row sum l
        [('        s = tl.where(valid, s, -float("inf"))\n', ''),
         ('        l = alpha * l + tl.sum(p, axis=1)\n',
          '        l = alpha * l + tl.sum(p, axis=1)\n        p = tl.where(valid, p, 0.0)\n')],
        # the max not subtracted: exp(score) overflows float32 for large scores (inf / inf = nan)
        [('        alpha = tl.exp(m - m_new)\n', '        alpha = tl.exp(m_new - m_new)\n'),
         ('        p = tl.exp(s - m_new[:, None])\n', '        p = tl.exp(s)\n')],
        # the block loop skips the last, partial tile of keys
        ('    for start in range(0, end, BLOCK_N):', '    for start in range(0, (end // BLOCK_N) * BLOCK_N, BLOCK_N):'),
        # causal, but every program loads all of k and v and masks: right answer, over the causal byte budget
        ('    if CAUSAL:\n        end = (tl.program_id(0) + 1) * BLOCK_M\n', ''),
        # the query block loaded again for every block of keys
        ('        s = tl.dot(q, tl.trans(k)',
         '        s = tl.dot(tl.load(q_ptr + rows[:, None] * d + cols[None, :], mask=q_mask, other=0.0), tl.trans(k)'),
    ],
    'ex3_bytes': [
        # causal ignored: every program counted as reading all n rows of k and v
        ('    if causal:\n        kv_rows = sum(min(n, (p + 1) * block_m) for p in range(programs))\n'
         '    else:\n        kv_rows = programs * n\n', '    kv_rows = programs * n\n'),
        # the last program's keys not capped at n
        ('sum(min(n, (p + 1) * block_m) for', 'sum((p + 1) * block_m for'),
        # the ragged last program forgotten: n // block_m programs
        ('    programs = -(-n // block_m)\n', '    programs = n // block_m\n'),
        # k counted, v forgotten
        ('    return 4 * d * (n + 2 * kv_rows)', '    return 4 * d * (n + kv_rows)'),
    ],
}
