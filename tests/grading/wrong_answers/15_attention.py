# format: edits
"""Plausible wrong answers for lesson 15's attention exercises; each must lose points.

Each wrong answer is the edit it makes to the reference solution cell (the cell with its
``### BEGIN/END SOLUTION`` lines removed): ``(old, new)`` replaces the one occurrence of
``old``; a list of pairs makes several edits in order. The comment above says the mistake.
Numerical mistakes fail the comparison with softmax (NumPy) or with torch's
scaled_dot_product_attention, on the tests' extreme scores too (in the hundreds, a later block far
below an earlier one, every score between -3e4 and -1e4), where a running max started at 0, a
mask of -1e4 instead of -inf or the block's max instead of the running one gives nan or the wrong
keys; loading more than a fused kernel needs breaks the byte budget
counted in Triton's interpreter; a wrong prediction of the bytes fails against the counter;
L (the row log-sum-exp the forward stores) taken from unscaled scores fails against torch.logsumexp;
the backward's mistakes (D from P instead of rowsum(dO * O), the scale missing from dQ or dK, the
causal mask left out of the recomputation, P from unscaled scores) fail against torch's autograd
of naive attention, and untiled scores or a causal key block that walks every query block break
the budgets on tensors and bytes; dK and dV summed into memory from one program per query block (a
race on a GPU, right values in the interpreter, which runs programs one at a time) store each key
row once per query block, against the budget of bytes stored once;
a tensor wider than the exercise's bound on blocks stops the kernel, and so does a tensor
given to a tl.constexpr parameter.

``LIBRARY_CALLS`` holds, per solution cell, the answer of a student who leans on the library:
the lecture's 1-D online softmax applied to one block (it cannot carry the running state), the
lecture's fused kernel called from a @triton.jit kernel (refused by the checker: its helper's
name starts with ``_``; no masks either), and the byte count measured with the lecture's counter
instead of predicted (the tests ask for a GPU-sized grid the counter refuses).
"""

# the reference key-block kernel, and the same gradients summed into dk and dv from one program per query block
_DKDV_SPLIT = """\
    keys = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    cols = tl.arange(0, BLOCK_D)
    kv_mask = (keys[:, None] < n) & (cols[None, :] < d)
    k = tl.load(k_ptr + keys[:, None] * d + cols[None, :], mask=kv_mask, other=0.0)
    v = tl.load(v_ptr + keys[:, None] * d + cols[None, :], mask=kv_mask, other=0.0)
    dk = tl.zeros((BLOCK_N, BLOCK_D), dtype=tl.float32)
    dv = tl.zeros((BLOCK_N, BLOCK_D), dtype=tl.float32)
    start = 0
    if CAUSAL:
        start = tl.program_id(0) * BLOCK_N       # earlier queries see none of these keys
    for m0 in range(start, n, BLOCK_M):
        rows = m0 + tl.arange(0, BLOCK_M)
        q_mask = (rows[:, None] < n) & (cols[None, :] < d)
        q = tl.load(q_ptr + rows[:, None] * d + cols[None, :], mask=q_mask, other=0.0)
        do = tl.load(do_ptr + rows[:, None] * d + cols[None, :], mask=q_mask, other=0.0)
        lse = tl.load(lse_ptr + rows, mask=rows < n, other=0.0)
        delta = tl.load(delta_ptr + rows, mask=rows < n, other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision="ieee") * scale
        valid = (rows[:, None] < n) & (keys[None, :] < n)
        if CAUSAL:
            valid = valid & (keys[None, :] <= rows[:, None])
        p = tl.exp(tl.where(valid, s, -float("inf")) - lse[:, None])
        dv += tl.dot(tl.trans(p), do, input_precision="ieee")
        ds = p * (tl.dot(do, tl.trans(v), input_precision="ieee") - delta[:, None])
        dk += tl.dot(tl.trans(ds), q, input_precision="ieee")
    tl.store(dk_ptr + keys[:, None] * d + cols[None, :], dk * scale, mask=kv_mask)
    tl.store(dv_ptr + keys[:, None] * d + cols[None, :], dv, mask=kv_mask)
"""
_DKDV_RACE = """\
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)   # one program per query block
    cols = tl.arange(0, BLOCK_D)
    q_mask = (rows[:, None] < n) & (cols[None, :] < d)
    q = tl.load(q_ptr + rows[:, None] * d + cols[None, :], mask=q_mask, other=0.0)
    do = tl.load(do_ptr + rows[:, None] * d + cols[None, :], mask=q_mask, other=0.0)
    lse = tl.load(lse_ptr + rows, mask=rows < n, other=0.0)
    delta = tl.load(delta_ptr + rows, mask=rows < n, other=0.0)
    for n0 in range(0, n, BLOCK_N):
        keys = n0 + tl.arange(0, BLOCK_N)
        kv_mask = (keys[:, None] < n) & (cols[None, :] < d)
        k = tl.load(k_ptr + keys[:, None] * d + cols[None, :], mask=kv_mask, other=0.0)
        v = tl.load(v_ptr + keys[:, None] * d + cols[None, :], mask=kv_mask, other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision="ieee") * scale
        valid = (rows[:, None] < n) & (keys[None, :] < n)
        if CAUSAL:
            valid = valid & (keys[None, :] <= rows[:, None])
        p = tl.exp(tl.where(valid, s, -float("inf")) - lse[:, None])
        ds = p * (tl.dot(do, tl.trans(v), input_precision="ieee") - delta[:, None])
        dk = tl.load(dk_ptr + keys[:, None] * d + cols[None, :], mask=kv_mask, other=0.0)
        dv = tl.load(dv_ptr + keys[:, None] * d + cols[None, :], mask=kv_mask, other=0.0)
        dk += tl.dot(tl.trans(ds), q, input_precision="ieee") * scale
        dv += tl.dot(tl.trans(p), do, input_precision="ieee")
        tl.store(dk_ptr + keys[:, None] * d + cols[None, :], dk, mask=kv_mask)
        tl.store(dv_ptr + keys[:, None] * d + cols[None, :], dv, mask=kv_mask)
"""

WRONG_ANSWERS = {
    'ex1_online': [
        # no rescaling of the accumulator: acc keeps sums taken relative to an old, smaller maximum
        ('    acc_new = alpha[:, None] * acc + p @ v', '    acc_new = acc + p @ v'),
        # the running sum is not rescaled either when the maximum grows
        ('    l_new = alpha * l + p.sum(axis=1)', '    l_new = l + p.sum(axis=1)'),
        # the max not subtracted: plain exp(score), which overflows for scores in the hundreds
        [('    alpha = np.exp(m - shift)\n', '    alpha = np.ones_like(m)\n'),
         ('p = np.exp(s - shift[:, None])', 'p = np.exp(s)')],
        # the block's maximum instead of the running maximum: m forgets earlier blocks
        ('    m_new = np.maximum(m, s.max(axis=1))', '    m_new = s.max(axis=1)'),
        # the running max started at 0 (the -inf of the first call replaced, to avoid -inf - -inf): right
        # while some score is above 0; for scores far below zero every exp(s - 0) is 0 and acc / l is 0 / 0
        ('    m_new = np.maximum(m, s.max(axis=1))\n',
         '    m = np.where(np.isneginf(m), 0.0, m)\n    m_new = np.maximum(m, s.max(axis=1))\n'),
        # the exponentials taken relative to the new maximum itself (the lesson's reference until issue 41): a row
        # whose first block is wholly masked has m = m_new = -inf, and exp(-inf - -inf) is exp(nan)
        ('shift = np.where(np.isneginf(m_new), 0.0, m_new)', 'shift = m_new'),
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
        # no key loop: every key (up to 128) in one block, loaded up to the causal end (the honest bytes):
        # full marks until the exercise bounded its blocks to one BLOCK_M x BLOCK_D tile (issue 35)
        [('    for start in range(0, end, BLOCK_N):\n        keys = start + tl.arange(0, BLOCK_N)\n'
          '        kv_mask = (keys[:, None] < n) & (cols[None, :] < d)\n',
          '    for start in range(0, 1):\n        keys = tl.arange(0, 128)\n'
          '        kv_mask = (keys[:, None] < n) & (keys[:, None] < end) & (cols[None, :] < d)\n')],
        # q, k and v as tl.constexpr: the interpreter hands over the torch tensors, the kernel zeroes them
        # (o = 0 is then right) and loads o, still zeros: full marks until such a launch was refused (issue 35)
        [('def attention_kernel(q_ptr, k_ptr, v_ptr,',
          'def attention_kernel(q_ptr: tl.constexpr, k_ptr: tl.constexpr, v_ptr: tl.constexpr,'),
         ('    rows = ', '    q_ptr *= 0.0\n    k_ptr *= 0.0\n    v_ptr *= 0.0\n    rows = '),
         ('tl.load(q_ptr', 'tl.load(o_ptr'), ('tl.load(k_ptr', 'tl.load(o_ptr'), ('tl.load(v_ptr', 'tl.load(o_ptr')],
        # the running max started at 0 instead of -inf: right while some score of each row is above 0;
        # scores between -3e4 and -1e4 make every exp(s - 0) 0, and o = 0 / 0
        ('    m = tl.full((BLOCK_M,), -float("inf"), dtype=tl.float32)',
         '    m = tl.zeros((BLOCK_M,), dtype=tl.float32)'),
        # masked scores set to -1e4, a finite "large negative" instead of -inf: right until the real scores
        # lie below -1e4, where the masked keys (past n, after the query) win the softmax
        ('        s = tl.where(valid, s, -float("inf"))\n', '        s = tl.where(valid, s, -1.0e4)\n'),
        # the block's max instead of the running max: the rescaling exp(m - m_new) overflows when a later
        # block's scores are far below an earlier block's (right, if unstable, on random scores)
        ('        m_new = tl.maximum(m, tl.max(s, axis=1))', '        m_new = tl.max(s, axis=1)'),
        # only the causal mask: keys past n in the last, ragged block load as 0, score 0 and count
        ('        valid = keys[None, :] < n\n'
         '        if CAUSAL:\n'
         '            valid = valid & (keys[None, :] <= rows[:, None])\n'
         '        s = tl.where(valid, s, -float("inf"))\n',
         '        if CAUSAL:\n            s = tl.where(keys[None, :] <= rows[:, None], s, -float("inf"))\n'),
        # L from unscaled scores: the scale folded into the exponentials (o is right), so the running max m is
        # of q k^T, not of scale * q k^T, and m + log(l) is not the log-sum-exp the backward needs
        [('        s = tl.dot(q, tl.trans(k), input_precision="ieee") * scale\n',
          '        s = tl.dot(q, tl.trans(k), input_precision="ieee")\n'),
         ('        alpha = tl.exp(m - m_new)\n', '        alpha = tl.exp((m - m_new) * scale)\n'),
         ('        p = tl.exp(s - m_new[:, None])\n', '        p = tl.exp((s - m_new[:, None]) * scale)\n')],
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
    'ex4_flash_torch': [
        # D from P: the block's own rowsum(P * dP) instead of rowsum(dO * O) over the whole row (right while a row
        # has one key block)
        ('ds = p * (doi @ vj.transpose(1, 2) - delta[:, i0:i0 + BLOCK, None])',
         'dp = doi @ vj.transpose(1, 2)\n            ds = p * (dp - (p * dp).sum(dim=-1, keepdim=True))'),
        # the causal mask left out of the recomputation (the blocks above the diagonal are still skipped)
        ('            if is_causal:\n                s_tile = s_tile.masked_fill(',
         '            if False:\n                s_tile = s_tile.masked_fill('),
        # P recomputed from unscaled scores: exp(q k^T - L), where L is of the scaled ones
        ('s_tile = qi @ kj.transpose(1, 2) * scale', 's_tile = qi @ kj.transpose(1, 2)'),
        # untiled: the whole (b, n, n) score matrix and P at once, right values, over the budget on tensors
        [('    for i0 in range(0, n, BLOCK):\n        qi, rows = ',
          '    for i0 in range(0, n, n):\n        qi, rows = '),
         ('qi, rows = q[:, i0:i0 + BLOCK], torch.arange(i0, min(i0 + BLOCK, n))', 'qi, rows = q, torch.arange(n)'),
         ('        for j0 in range(0, min(n, i0 + BLOCK) if is_causal else n, BLOCK):\n',
          '        for j0 in range(0, 1):\n'),
         ('s = qi @ k[:, j0:j0 + BLOCK].transpose(1, 2) * scale', 's = qi @ k.transpose(1, 2) * scale'),
         ('torch.arange(j0, min(j0 + BLOCK, n))[None, :] > rows[:, None]', 'rows[None, :] > rows[:, None]'),
         ('acc = alpha[..., None] * acc + p @ v[:, j0:j0 + BLOCK]', 'acc = alpha[..., None] * acc + p @ v'),
         ('        o[:, i0:i0 + BLOCK] = acc / l[..., None]\n        lse[:, i0:i0 + BLOCK] = m + torch.log(l)\n',
          '        o[:] = acc / l[..., None]\n        lse[:] = m + torch.log(l)\n')],
    ],
    'ex5_backward': [
        # the scale missing from dQ
        ('dq_ptr + rows[:, None] * d + cols[None, :], dq * scale,', 'dq_ptr + rows[:, None] * d + cols[None, :], dq,'),
        # the scale missing from dK
        ('dk_ptr + keys[:, None] * d + cols[None, :], dk * scale,', 'dk_ptr + keys[:, None] * d + cols[None, :], dk,'),
        # the causal mask left out of the recomputation in both kernels (the skipped blocks still skipped)
        [('            valid = valid & (keys[None, :] <= rows[:, None])\n'
          '        p = tl.exp(tl.where(valid, s, -float("inf")) - lse[:, None])\n        dv +=',
          '            pass\n        p = tl.exp(tl.where(valid, s, -float("inf")) - lse[:, None])\n        dv +='),
         ('            valid = valid & (keys[None, :] <= rows[:, None])\n'
          '        p = tl.exp(tl.where(valid, s, -float("inf")) - lse[:, None])\n        ds =',
          '            pass\n        p = tl.exp(tl.where(valid, s, -float("inf")) - lse[:, None])\n        ds =')],
        # P recomputed from unscaled scores in the query-block kernel: exp(q k^T - L), L of the scaled scores
        ('mask=kv_mask, other=0.0)\n        s = tl.dot(q, tl.trans(k), input_precision="ieee") * scale\n',
         'mask=kv_mask, other=0.0)\n        s = tl.dot(q, tl.trans(k), input_precision="ieee")\n'),
        # D from P in the query-block kernel: the key block's own rowsum(P * dP), not the row's rowsum(dO * O)
        ('        ds = p * (tl.dot(do, tl.trans(v), input_precision="ieee") - delta[:, None])\n        dq +=',
         '        dp = tl.dot(do, tl.trans(v), input_precision="ieee")\n'
         '        ds = p * (dp - tl.sum(p * dp, axis=1)[:, None])\n        dq +='),
        # causal, but the key-block kernel walks every query block (masked: right values, over the budget)
        ('        start = tl.program_id(0) * BLOCK_N       # earlier queries see none of these keys\n',
         '        start = 0\n'),
        # dK and dV summed across query blocks without the split: each program (one per query block) adds its
        # share into dk and dv in memory (load, add, store) while other programs do the same to the same rows,
        # a race on a GPU; the interpreter runs the programs one after another, so the values come out right,
        # but every key row is stored once per query block: over the budget of bytes stored once
        (_DKDV_SPLIT, _DKDV_RACE),
    ],
}


LIBRARY_CALLS = {
    # the lecture's online softmax (attention.online_softmax_steps) on this block's scores alone:
    # the running state of earlier blocks is dropped
    'ex1_online': [('def online_softmax_update(', 'from course_lib import attention\n\n\ndef online_softmax_update('),
        ('    m_new = np.maximum(m, s.max(axis=1))\n'
         '    shift = np.where(np.isneginf(m_new), 0.0, m_new)   # a row with every score so far -inf: nothing to '
         'rescale\n'
         '    alpha = np.exp(m - shift)\n'
         '    p = np.exp(s - shift[:, None])\n'
         '    l_new = alpha * l + p.sum(axis=1)\n'
         '    acc_new = alpha[:, None] * acc + p @ v\n'
         '    return m_new, l_new, acc_new',
         '    last = [attention.online_softmax_steps(row, s.shape[1])[-1] for row in s]\n'
         '    m_new = np.array([state.running_max for state in last])\n'
         '    l_new = np.array([state.running_sum for state in last])\n'
         '    return m_new, l_new, np.exp(s - m_new[:, None]) @ v')],
    # the lecture's fused kernel (attention_kernels.flash_forward_kernel) called from the answer: the
    # checker refuses its helper _attend_block, and it has no masks for ragged n or d
    'ex2_attention': [('@triton.jit\n',
                       'from course_lib.attention_kernels import flash_forward_kernel\n'
                       '\n'
                       '\n'
                       '@triton.jit\n'),
        ('    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)\n'
         '    cols = tl.arange(0, BLOCK_D)\n'
         '    q_mask = (rows[:, None] < n) & (cols[None, :] < d)\n'
         '    q = tl.load(q_ptr + rows[:, None] * d + cols[None, :], mask=q_mask, other=0.0)\n'
         '    m = tl.full((BLOCK_M,), -float("inf"), dtype=tl.float32)\n'
         '    l = tl.zeros((BLOCK_M,), dtype=tl.float32)\n'
         '    acc = tl.zeros((BLOCK_M, BLOCK_D), dtype=tl.float32)\n'
         '    end = n\n'
         '    if CAUSAL:\n'
         '        end = (tl.program_id(0) + 1) * BLOCK_M\n'
         '    for start in range(0, end, BLOCK_N):\n'
         '        keys = start + tl.arange(0, BLOCK_N)\n'
         '        kv_mask = (keys[:, None] < n) & (cols[None, :] < d)\n'
         '        k = tl.load(k_ptr + keys[:, None] * d + cols[None, :], mask=kv_mask, other=0.0)\n'
         '        v = tl.load(v_ptr + keys[:, None] * d + cols[None, :], mask=kv_mask, other=0.0)\n'
         '        s = tl.dot(q, tl.trans(k), input_precision="ieee") * scale\n'
         '        valid = keys[None, :] < n\n'
         '        if CAUSAL:\n'
         '            valid = valid & (keys[None, :] <= rows[:, None])\n'
         '        s = tl.where(valid, s, -float("inf"))\n'
         '        m_new = tl.maximum(m, tl.max(s, axis=1))\n'
         '        alpha = tl.exp(m - m_new)\n'
         '        p = tl.exp(s - m_new[:, None])\n'
         '        l = alpha * l + tl.sum(p, axis=1)\n'
         '        acc = alpha[:, None] * acc + tl.dot(p, v, input_precision="ieee")\n'
         '        m = m_new\n'
         '    tl.store(o_ptr + rows[:, None] * d + cols[None, :], acc / l[:, None], mask=q_mask)\n'
         '    tl.store(lse_ptr + rows, m + tl.log(l), mask=rows < n)',
         '    flash_forward_kernel(q_ptr, k_ptr, v_ptr, o_ptr, n * d, d, n, scale, '
         'BLOCK_D, BLOCK_M, BLOCK_N, CAUSAL)')],
    # measured instead of predicted: the lecture's counter (triton_traffic.count) run on the kernel of
    # exercise 2, which cannot count a GPU-sized grid
    'ex3_bytes': [('def fused_attention_bytes(',
                   'from course_lib import triton_traffic\n\n\ndef fused_attention_bytes('),
        ('    programs = -(-n // block_m)\n'
         '    if causal:\n'
         '        kv_rows = sum(min(n, (p + 1) * block_m) for p in range(programs))\n'
         '    else:\n'
         '        kv_rows = programs * n\n'
         '    return 4 * d * (n + 2 * kv_rows)',
         '    q = torch.zeros(n, d)\n'
         '    meta = {"CAUSAL": causal, "BLOCK_M": block_m, "BLOCK_N": 16,\n'
         '            "BLOCK_D": max(16, triton.next_power_of_2(d))}\n'
         '    return triton_traffic.count(attention_kernel, (triton.cdiv(n, block_m),), '
         'q, q, q, torch.zeros(n, d), torch.zeros(n),\n'
         '                                n, d, 1.0, **meta).bytes_loaded')],
    # the lecture's naive attention (attention.naive_attention) and torch's autograd through it: right values, but
    # the (b, n, n) scores and P are made and stored, over the budget on tensors
    'ex4_flash_torch': [('def flash_forward_torch(', 'from course_lib import attention\n\n\ndef flash_forward_torch('),
        ('    for i0 in range(0, n, BLOCK):\n        qi, rows = ',
         '    s = attention.naive_attention(q[:, None], k[:, None], v[:, None], is_causal)[:, 0]\n'
         '    return s, torch.logsumexp((q @ k.transpose(1, 2) * scale).masked_fill(torch.ones(n, n, dtype=torch.bool)'
         '.triu(1) & is_causal, -float("inf")), dim=-1)\n'
         '    for i0 in range(0, n, BLOCK):\n        qi, rows = '),
        ('    delta = (do * o).sum(dim=-1)                        # D_i = sum_c dO_ic O_ic, (b, n)\n',
         '    with torch.enable_grad():\n'
         '        q, k, v = (t.detach().requires_grad_() for t in (q, k, v))\n'
         '        return torch.autograd.grad(attention.naive_attention(q[:, None], k[:, None], v[:, None], is_causal)'
         '[:, 0], (q, k, v), do)\n'
         '    delta = (do * o).sum(dim=-1)                        # D_i = sum_c dO_ic O_ic, (b, n)\n')],
    # the lecture's forward step (attention_kernels._attend_block) called to recompute P in the query-block
    # kernel: the checker refuses a kernel that calls a course_lib helper
    'ex5_backward': [('@triton.jit\ndef attention_dkdv_kernel(',
                      'from course_lib.attention_kernels import _attend_block\n\n\n@triton.jit\n'
                      'def attention_dkdv_kernel('),
        ('        ds = p * (tl.dot(do, tl.trans(v), input_precision="ieee") - delta[:, None])\n        dq +=',
         '        _, _, p2 = _attend_block(dq, lse, lse, q, k_ptr, v_ptr, n0, rows, tl.arange(0, BLOCK_N), cols, d, '
         'scale, CAUSAL)\n'
         '        ds = p * (tl.dot(do, tl.trans(v), input_precision="ieee") - delta[:, None])\n        dq +=')],
}
