# format: edits
"""Plausible wrong answers for lesson 14's Triton exercises; each must lose points.

Each wrong answer is the edit it makes to the reference solution cell (the cell with its
``### BEGIN/END SOLUTION`` lines removed): ``(old, new)`` replaces the one occurrence of
``old``; a list of pairs makes several edits in order. The comment above says the mistake.
A missing or wrong mask fails with the interpreter's out-of-bounds message (``triton_traffic``);
loading a block twice breaks a byte budget; numerical mistakes fail the comparison with torch.
"""

WRONG_ANSWERS = {
    'ex1_add': [
        # no mask at all: the last, ragged program loads and stores past the end
        [('    mask = offs < n\n', ''),
         ('x = tl.load(x_ptr + offs, mask=mask)', 'x = tl.load(x_ptr + offs)'),
         ('y = tl.load(y_ptr + offs, mask=mask)', 'y = tl.load(y_ptr + offs)'),
         ('tl.store(out_ptr + offs, x + y, mask=mask)', 'tl.store(out_ptr + offs, x + y)')],
        # the mask only on the store: the loads still read past the end
        [('x = tl.load(x_ptr + offs, mask=mask)', 'x = tl.load(x_ptr + offs)'),
         ('y = tl.load(y_ptr + offs, mask=mask)', 'y = tl.load(y_ptr + offs)')],
        # off-by-one mask: lane n is let through
        ('    mask = offs < n\n', '    mask = offs <= n\n'),
        # the program's offset forgets BLOCK: programs overlap, most elements never written
        ('    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)', '    offs = tl.program_id(0) + tl.arange(0, BLOCK)'),
        # inputs overwritten (issue 26): x and y zeroed, out never written, so out == x + y == 0
        ('    tl.store(out_ptr + offs, x + y, mask=mask)',
         '    tl.store(x_ptr + offs, x * 0.0, mask=mask)\n    tl.store(y_ptr + offs, y * 0.0, mask=mask)'),
    ],
    'ex2_softmax': [
        # no max subtraction: exp overflows to inf on large inputs (inf / inf = nan)
        ('    z = x - tl.max(x, axis=0)\n', '    z = x\n'),
        # padded lanes load as 0, not -inf: they add exp(-max) to every ragged row's sum
        ('other=-float("inf"))', 'other=0.0)'),
        # the row is loaded a second time for the exponentials: twice the bytes
        ('    num = tl.exp(z)\n',
         '    num = tl.exp(tl.load(x_ptr + row * row_stride + cols, mask=mask, other=-float("inf")) - tl.max(x, axis=0))\n'),
        # the store is not masked: the last row writes past the end of out
        ('tl.sum(num, axis=0), mask=mask)', 'tl.sum(num, axis=0))'),
        # the softmax written over the input as well as into out
        ('    tl.store(out_ptr', '    tl.store(x_ptr + row * row_stride + cols, x * 0.0, mask=mask)\n    tl.store(out_ptr'),
    ],
    'ex3_gelu': [
        # the sigmoid approximation of GELU instead of the exact erf form
        ('0.5 * v * (1.0 + tl.erf(v * 0.7071067811865476))', 'v * tl.sigmoid(1.702 * v)'),
        # bias indexed by row instead of column
        ([('    b = tl.load(b_ptr + cols, mask=cols < n_cols)', '    b = tl.load(b_ptr + rows, mask=rows < n_cols)'),
          ('    v = x + b[None, :]', '    v = x + b[:, None]')]),
        # only rows are masked: columns past n_cols spill into the next row and past the end
        ('    mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)', '    mask = (rows[:, None] < n_rows) & (cols[None, :] >= 0)'),
    ],
    'ex4_matmul': [
        # float16 accumulator: every partial sum rounded to 11 bits
        ('    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)', '    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float16)'),
        # off by one tile: the last, partial step of K is skipped
        ('    for k in range(0, K, BLOCK_K):', '    for k in range(0, (K // BLOCK_K) * BLOCK_K, BLOCK_K):'),
        # the K edge is not masked: columns of a past K read the next row's elements (or past the end)
        ('mask=(rm[:, None] < M) & ((k + rk)[None, :] < K), other=0.0)', 'mask=rm[:, None] < M, other=0.0)'),
        # strides of a swapped: a is read transposed
        ('a_ptr + rm[:, None] * stride_am + (k + rk)[None, :] * stride_ak',
         'a_ptr + rm[:, None] * stride_ak + (k + rk)[None, :] * stride_am'),
    ],
}
