# format: edits
"""Plausible wrong answers for lesson 03's exercises; each must lose points.

Each wrong answer is the edit it makes to the reference solution cell (the cell with its
``### BEGIN/END SOLUTION`` lines removed): ``(old, new)`` replaces the one occurrence of
``old``; a list of pairs makes several edits in order. The comment above says the mistake.
"""

WRONG_ANSWERS = {
    'ex1_axpy': [
        # floor division: the last, partial block is missing
        ('(n + threads_per_block - 1)', 'n'),
        # no bounds check: threads past the end index out of range
        ("""if i < out.size:
        out[i]""", 'out[i]'),
        # off-by-one bounds check
        ('    if i < out.size:', '    if i <= out.size:'),
    ],
    'ex2_sqdist': [
        # rows and columns swapped
        ('    j, i = cuda.grid(2)', '    i, j = cuda.grid(2)'),
        # reads each coordinate twice from global memory: over the budget
        ("""diff = x[i, k] - y[j, k]
            acc += diff * diff""", 'acc += (x[i, k] - y[j, k]) * (x[i, k] - y[j, k])'),
        # distance instead of squared distance (abs, not square)
        ("""diff = x[i, k] - y[j, k]
            acc += diff * diff""", 'acc += abs(x[i, k] - y[j, k])'),
    ],
    'ex3_tiled': [
        # the naive kernel: correct, but 2k global reads per thread
        ("""@cuda.jit
def tiled_matmul_kernel(a, b, c):
    a_tile = cuda.shared.array((T, T), float32)
    b_tile = cuda.shared.array((T, T), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    j, i = cuda.grid(2)
    acc = 0.0
    for phase in range((a.shape[1] + T - 1) // T):
        if i < a.shape[0] and phase * T + tx < a.shape[1]:
            a_tile[ty, tx] = a[i, phase * T + tx]
        else:
            a_tile[ty, tx] = 0.0
        if phase * T + ty < b.shape[0] and j < b.shape[1]:
            b_tile[ty, tx] = b[phase * T + ty, j]
        else:
            b_tile[ty, tx] = 0.0
        cuda.syncthreads()
        for k in range(T):
            acc += a_tile[ty, k] * b_tile[k, tx]
        cuda.syncthreads()
    if i < c.shape[0] and j < c.shape[1]:
        c[i, j] = acc""", """@cuda.jit
def tiled_matmul_kernel(a, b, c):
    j, i = cuda.grid(2)
    if i < c.shape[0] and j < c.shape[1]:
        acc = 0.0
        for k in range(a.shape[1]):
            acc += a[i, k] * b[k, j]
        c[i, j] = acc"""),
        # floor division for the number of phases: a partial last tile is dropped
        ('range((a.shape[1] + T - 1)', 'range(a.shape[1]'),
        # tile indices transposed when reading b's tile
        ('b_tile[k, tx]', 'b_tile[tx, k]'),
    ],
    'ex4_reduce': [
        # every thread writes the block's result: 32 global writes per block
        ("""if t == 0:
        partial[cuda.blockIdx.x]""", 'partial[cuda.blockIdx.x]'),
        # stops one step early: buf[0] misses buf[1]'s half
        ('    while stride > 0:', '    while stride > 1:'),
    ],
}
