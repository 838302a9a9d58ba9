"""Plausible wrong answers for lesson 03's exercises; each must lose points."""

WRONG_ANSWERS = {
    "ex1_axpy": [
        # floor division: the last, partial block is missing
        """def blocks_needed(n, threads_per_block):
    return n // threads_per_block


@cuda.jit
def axpy_kernel(alpha, x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = alpha * x[i] + y[i]
""",
        # no bounds check: threads past the end index out of range
        """def blocks_needed(n, threads_per_block):
    return (n + threads_per_block - 1) // threads_per_block


@cuda.jit
def axpy_kernel(alpha, x, y, out):
    i = cuda.grid(1)
    out[i] = alpha * x[i] + y[i]
""",
        # off-by-one bounds check
        """def blocks_needed(n, threads_per_block):
    return (n + threads_per_block - 1) // threads_per_block


@cuda.jit
def axpy_kernel(alpha, x, y, out):
    i = cuda.grid(1)
    if i <= out.size:
        out[i] = alpha * x[i] + y[i]
""",
    ],
    "ex2_sqdist": [
        # rows and columns swapped
        """@cuda.jit
def sqdist_kernel(x, y, out):
    i, j = cuda.grid(2)
    if i < out.shape[0] and j < out.shape[1]:
        acc = 0.0
        for k in range(x.shape[1]):
            diff = x[i, k] - y[j, k]
            acc += diff * diff
        out[i, j] = acc
""",
        # reads each coordinate twice from global memory: over the budget
        """@cuda.jit
def sqdist_kernel(x, y, out):
    j, i = cuda.grid(2)
    if i < out.shape[0] and j < out.shape[1]:
        acc = 0.0
        for k in range(x.shape[1]):
            acc += (x[i, k] - y[j, k]) * (x[i, k] - y[j, k])
        out[i, j] = acc
""",
        # distance instead of squared distance (abs, not square)
        """@cuda.jit
def sqdist_kernel(x, y, out):
    j, i = cuda.grid(2)
    if i < out.shape[0] and j < out.shape[1]:
        acc = 0.0
        for k in range(x.shape[1]):
            acc += abs(x[i, k] - y[j, k])
        out[i, j] = acc
""",
    ],
    "ex3_tiled": [
        # the naive kernel: correct, but 2k global reads per thread
        """@cuda.jit
def tiled_matmul_kernel(a, b, c):
    j, i = cuda.grid(2)
    if i < c.shape[0] and j < c.shape[1]:
        acc = 0.0
        for k in range(a.shape[1]):
            acc += a[i, k] * b[k, j]
        c[i, j] = acc
""",
        # floor division for the number of phases: a partial last tile is dropped
        """@cuda.jit
def tiled_matmul_kernel(a, b, c):
    a_tile = cuda.shared.array((T, T), float32)
    b_tile = cuda.shared.array((T, T), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    j, i = cuda.grid(2)
    acc = 0.0
    for phase in range(a.shape[1] // T):
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
        c[i, j] = acc
""",
        # tile indices transposed when reading b's tile
        """@cuda.jit
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
            acc += a_tile[ty, k] * b_tile[tx, k]
        cuda.syncthreads()
    if i < c.shape[0] and j < c.shape[1]:
        c[i, j] = acc
""",
    ],
    "ex4_reduce": [
        # every thread writes the block's result: 32 global writes per block
        """@cuda.jit
def block_sum_kernel(x, partial):
    buf = cuda.shared.array(R, float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    if i < x.size:
        buf[t] = x[i]
    else:
        buf[t] = 0.0
    cuda.syncthreads()
    stride = R // 2
    while stride > 0:
        if t < stride:
            buf[t] += buf[t + stride]
        cuda.syncthreads()
        stride //= 2
    partial[cuda.blockIdx.x] = buf[0]
""",
        # stops one step early: buf[0] misses buf[1]'s half
        """@cuda.jit
def block_sum_kernel(x, partial):
    buf = cuda.shared.array(R, float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    if i < x.size:
        buf[t] = x[i]
    else:
        buf[t] = 0.0
    cuda.syncthreads()
    stride = R // 2
    while stride > 1:
        if t < stride:
            buf[t] += buf[t + stride]
        cuda.syncthreads()
        stride //= 2
    if t == 0:
        partial[cuda.blockIdx.x] = buf[0]
""",
    ],
}
