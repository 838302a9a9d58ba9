# format: edits
"""Plausible wrong answers for lesson 14's Triton exercises; each must lose points.

Each wrong answer is the edit it makes to the reference solution cell (the cell with its
``### BEGIN/END SOLUTION`` lines removed): ``(old, new)`` replaces the one occurrence of
``old``; a list of pairs makes several edits in order. The comment above says the mistake.
A missing or wrong mask fails with the interpreter's out-of-bounds message (``triton_traffic``);
loading a block twice breaks a byte budget; numerical mistakes fail the comparison with torch,
on the extreme rows of the softmax's tests too (every value near -1e4 to -3e4, values spread from
-100 to 100), where a shift by 0, by -1e4 or by the mean gives nan or the wrong row; a matmul that
ignores its strides reads the wrong elements of nn.Linear's ``a @ w.T`` or of slices of wider
buffers; a tensor over the matmul's bound on blocks stops the kernel, and so does a tensor given to
a tl.constexpr parameter.

``LIBRARY_CALLS`` holds, per solution cell, the answer of a student who leans on the library
instead: a Python object that "launches" by calling torch's own operation (refused by the
checker, which runs only @triton.jit kernels rebuilt from their source), or a @triton.jit kernel
that calls the closest kernel of the lecture (``attention_kernels.softmax_rows_kernel``, a row
softmax with rows ``n`` apart that reads each row twice; ``triton_kernels.tile_dot_kernel``, one
tile pair and no grid): the spec (row_stride, the tile grid, the K loop) and the byte budgets
are what they miss.
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
        ('    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)',
         '    offs = tl.program_id(0) + tl.arange(0, BLOCK)'),
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
         '    num = tl.exp(tl.load(x_ptr + row * row_stride + cols, mask=mask, other=-float("inf")) '
         '- tl.max(x, axis=0))\n'),
        # the store is not masked: the last row writes past the end of out
        ('tl.sum(num, axis=0), mask=mask)', 'tl.sum(num, axis=0))'),
        # lanes masked at row_stride instead of n_cols: a row's padding counts in its max and sum and is
        # written over (issue 39: the visible test's block was the row's length, so no lane reached it)
        ('    mask = cols < n_cols\n', '    mask = cols < row_stride\n'),
        # rows addressed n_cols apart instead of row_stride apart: right only for unpadded rows
        [('x_ptr + row * row_stride + cols', 'x_ptr + row * n_cols + cols'),
         ('out_ptr + row * row_stride + cols', 'out_ptr + row * n_cols + cols')],
        # the softmax written over the input as well as into out
        ('    tl.store(out_ptr',
         '    tl.store(x_ptr + row * row_stride + cols, x * 0.0, mask=mask)\n'
         '    tl.store(out_ptr'),
        # padded lanes load as 0 and are kept out of the sum, but not out of the max: right whenever a
        # row's max is above 0; a row far below zero is shifted by 0, every exp is 0, and 0 / 0 is nan
        [('other=-float("inf"))', 'other=0.0)'),
         ('    num = tl.exp(z)\n', '    num = tl.where(mask, tl.exp(z), 0.0)\n')],
        # padded lanes load as -1e4, the "large negative number" of fp16-era code, instead of -inf:
        # right until the row's values lie below -1e4, where a padding lane is the row's max
        ('other=-float("inf"))', 'other=-1.0e4)'),
        # the row centred on its mean instead of its max: no overflow for values around +100 (the
        # deviations stay small), but a row spread from -100 to 100 has exp(100) = inf
        ('    z = x - tl.max(x, axis=0)\n', '    z = x - tl.sum(tl.where(mask, x, 0.0), axis=0) / n_cols\n'),
    ],
    'ex3_gelu': [
        # the sigmoid approximation of GELU instead of the exact erf form
        ('0.5 * v * (1.0 + tl.erf(v * 0.7071067811865476))', 'v * tl.sigmoid(1.702 * v)'),
        # bias indexed by row instead of column
        ([('    b = tl.load(b_ptr + cols, mask=cols < n_cols)', '    b = tl.load(b_ptr + rows, mask=rows < n_cols)'),
          ('    v = x + b[None, :]', '    v = x + b[:, None]')]),
        # only rows are masked: columns past n_cols spill into the next row and past the end
        ('    mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)',
         '    mask = (rows[:, None] < n_rows) & (cols[None, :] >= 0)'),
        # x and b as tl.constexpr: the interpreter hands over the torch tensors, the kernel zeroes them
        # (the test's gelu(x + b) is then 0) and loads out, still zeros: full marks until such a
        # launch was refused (issue 35)
        [('def bias_gelu_kernel(x_ptr, b_ptr,', 'def bias_gelu_kernel(x_ptr: tl.constexpr, b_ptr: tl.constexpr,'),
         ('    rows = ', '    x_ptr *= 0.0\n    b_ptr *= 0.0\n    rows = '),
         ('tl.load(x_ptr + offs', 'tl.load(out_ptr + offs'), ('tl.load(b_ptr + cols', 'tl.load(out_ptr + cols')],
    ],
    'ex4_matmul': [
        # float16 accumulator: every partial sum rounded to 11 bits
        ('    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)',
         '    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float16)'),
        # off by one tile: the last, partial step of K is skipped
        ('    for k in range(0, K, BLOCK_K):', '    for k in range(0, (K // BLOCK_K) * BLOCK_K, BLOCK_K):'),
        # the K edge is not masked: columns of a past K read the next row's elements (or past the end)
        ('mask=(rm[:, None] < M) & ((k + rk)[None, :] < K), other=0.0)', 'mask=rm[:, None] < M, other=0.0)'),
        # strides of a swapped: a is read transposed
        ('a_ptr + rm[:, None] * stride_am + (k + rk)[None, :] * stride_ak',
         'a_ptr + rm[:, None] * stride_ak + (k + rk)[None, :] * stride_am'),
        # no K loop: all of K (up to 64) in one block, the honest bytes, over the spec's bound of one
        # BLOCK_M x BLOCK_N tile per tensor (issue 35)
        [('    rk = tl.arange(0, BLOCK_K)\n', '    rk = tl.arange(0, 64)\n'),
         ('    for k in range(0, K, BLOCK_K):\n', '    for k in range(0, 1):\n')],
        # the stride arguments ignored, the shape used instead (rows K, N and N apart, columns 1
        # apart): right for contiguous tensors only, wrong for nn.Linear's a @ w.T and for slices
        [('rm[:, None] * stride_am + (k + rk)[None, :] * stride_ak', 'rm[:, None] * K + (k + rk)[None, :]'),
         ('(k + rk)[:, None] * stride_bk + rn[None, :] * stride_bn', '(k + rk)[:, None] * N + rn[None, :]'),
         ('rm[:, None] * stride_cm + rn[None, :] * stride_cn', 'rm[:, None] * N + rn[None, :]')],
        # the row strides used, the column strides taken as 1: right for slices of wider buffers,
        # wrong for a transpose such as w.T (its columns are K apart)
        [('(k + rk)[None, :] * stride_ak', '(k + rk)[None, :]'), ('rn[None, :] * stride_bn', 'rn[None, :]'),
         ('rn[None, :] * stride_cn', 'rn[None, :]')],
        # c taken as contiguous (it is the kernel's own output): a c that is a slice of a wider buffer
        # gets its rows N apart, over the wrong elements
        ('rm[:, None] * stride_cm + rn[None, :] * stride_cn', 'rm[:, None] * N + rn[None, :]'),
    ],
}


LIBRARY_CALLS = {
    # torch's own add behind a launch-shaped object: not a Triton kernel
    'ex1_add': ('@triton.jit\n'
                'def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):\n'
                '    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n'
                '    mask = offs < n\n'
                '    x = tl.load(x_ptr + offs, mask=mask)\n'
                '    y = tl.load(y_ptr + offs, mask=mask)\n'
                '    tl.store(out_ptr + offs, x + y, mask=mask)',
        'class add_kernel:\n'
                '    def __class_getitem__(cls, grid):\n'
                '        return lambda x, y, out, n, BLOCK: out.copy_(x + y)'),
    # the lecture's row softmax (attention_kernels.softmax_rows_kernel): rows n apart, each read twice
    'ex2_softmax': [('@triton.jit\n',
                     'from course_lib.attention_kernels import softmax_rows_kernel\n\n\n@triton.jit\n'),
        ('    row = tl.program_id(0)\n'
         '    cols = tl.arange(0, BLOCK)\n'
         '    mask = cols < n_cols\n'
         '    x = tl.load(x_ptr + row * row_stride + cols, mask=mask, other=-float("inf"))\n'
         '    z = x - tl.max(x, axis=0)\n'
         '    num = tl.exp(z)\n'
         '    tl.store(out_ptr + row * row_stride + cols, num / tl.sum(num, axis=0), mask=mask)',
         '    softmax_rows_kernel(x_ptr, out_ptr, n_cols, BLOCK)')],
    # torch's own GELU behind a launch-shaped object: not a Triton kernel
    'ex3_gelu': ('@triton.jit\n'
                 'def bias_gelu_kernel(x_ptr, b_ptr, out_ptr, n_rows, n_cols, '
                 'BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):\n'
                 '    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)\n'
                 '    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)\n'
                 '    mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)\n'
                 '    offs = rows[:, None] * n_cols + cols[None, :]\n'
                 '    x = tl.load(x_ptr + offs, mask=mask)\n'
                 '    b = tl.load(b_ptr + cols, mask=cols < n_cols)\n'
                 '    v = x + b[None, :]\n'
                 '    tl.store(out_ptr + offs, 0.5 * v * (1.0 + tl.erf(v * 0.7071067811865476)), mask=mask)',
        'class bias_gelu_kernel:\n'
                 '    def __class_getitem__(cls, grid):\n'
                 '        return lambda x, b, out, n_rows, n_cols, BLOCK_M, BLOCK_N: out.copy_(F.gelu(x + b))'),
    # the lecture's one-tile product (triton_kernels.tile_dot_kernel): no grid of tiles, no loop over K
    'ex4_matmul': [('@triton.jit\n', 'from course_lib.triton_kernels import tile_dot_kernel\n\n\n@triton.jit\n'),
        ('    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)\n'
         '    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)\n'
         '    rk = tl.arange(0, BLOCK_K)\n'
         '    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)\n'
         '    for k in range(0, K, BLOCK_K):\n'
         '        a = tl.load(a_ptr + rm[:, None] * stride_am + (k + rk)[None, :] * stride_ak,\n'
         '                    mask=(rm[:, None] < M) & ((k + rk)[None, :] < K), other=0.0)\n'
         '        b = tl.load(b_ptr + (k + rk)[:, None] * stride_bk + rn[None, :] * stride_bn,\n'
         '                    mask=((k + rk)[:, None] < K) & (rn[None, :] < N), other=0.0)\n'
         '        acc = tl.dot(a, b, acc)\n'
         '    tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn, acc,\n'
         '             mask=(rm[:, None] < M) & (rn[None, :] < N))',
         '    tile_dot_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M)')],
}
