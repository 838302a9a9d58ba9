# format: edits
"""Plausible wrong answers for lesson 03's exercises; each must lose points.

Each wrong answer is the edit it makes to the reference solution cell (the cell with its
``### BEGIN/END SOLUTION`` lines removed): ``(old, new)`` replaces the one occurrence of
``old``; a list of pairs makes several edits in order. The comment above says the mistake.
Races (a missing ``cuda.syncthreads()``) fail with the simulator's race message; a missing
bounds guard fails with its out-of-bounds message; re-reading global memory breaks a budget.
"""

WRONG_ANSWERS = {
    'ex1_axpy': [
        # floor division: the last, partial block is missing (elements 192-199 of 200 stay 0)
        ('(n + threads_per_block - 1)', 'n'),
        # no bounds guard: threads past the end index out of range
        ("""if i < x.size:
        out[i]""", 'out[i]'),
        # off-by-one bounds check
        ('    if i < x.size:', '    if i <= x.size:'),
        # the library's vector-add kernel instead: no alpha, other arguments
        ('        out[i] = alpha * x[i] + y[i]', '        out[i] = alpha * x[i] + y[i]\naxpy_kernel = kernels.vector_add_kernel'),
        # issue 26: overwrites its input y with -alpha * x and never writes out, so alpha * x + y
        # computed after the launch from the same arrays would be the zeros out still holds
        ('        out[i] = alpha * x[i] + y[i]', '        y[i] = -alpha * x[i]'),
    ],
    'ex2_pool': [
        # no barrier after staging: neighbours read slots that are not written yet (a race)
        ('    cuda.syncthreads()\n', ''),
        # neighbours re-read from global memory instead of the shared window: 3 reads per thread
        ('        out[i] = window[t] + window[t + 1] + window[t + 2]',
         '        out[i] = (x[i - 1] if i > 0 else 0.0) + x[i] + (x[i + 1] if i + 1 < x.size else 0.0)'),
        # no bounds guard when staging: threads past the end read outside x
        ('    window[t + 1] = x[i] if i < x.size else 0.0', '    window[t + 1] = x[i]'),
        # no halo: the block's first and last outputs miss a neighbour
        ('        window[0] = x[i - 1] if i > 0 else 0.0', '        window[0] = 0.0'),
        # issue 26: the naive kernel reading its neighbours through atomics (add 0): an atomic is a
        # read and a write, so 3 global reads per thread (and writes into x)
        ('        out[i] = window[t] + window[t + 1] + window[t + 2]',
         '        out[i] = ((cuda.atomic.add(x, i - 1, 0.0) if i > 0 else 0.0) + cuda.atomic.add(x, i, 0.0)\n'
         '                  + (cuda.atomic.add(x, i + 1, 0.0) if i + 1 < x.size else 0.0))'),
    ],
    'ex3_tiled': [
        # the naive kernel: correct, but 2k global reads per thread
        ([('        cuda.syncthreads()\n        for k in range(T):\n            total += a_tile[ty, k] * b_tile[k, tx]\n        cuda.syncthreads()\n',
           ''),
          ('    if row < c.shape[0] and col < c.shape[1]:\n        c[row, col] = total',
           '    if row < c.shape[0] and col < c.shape[1]:\n        for k in range(a.shape[1]):\n            total += a[row, k] * b[k, col]\n        c[row, col] = total')]),
        # no barrier after loading a tile: threads read slots their neighbours have not written (a race)
        ('        cuda.syncthreads()\n        for k in range(T):', '        for k in range(T):'),
        # no barrier after using a tile: the next phase overwrites it while neighbours still read (a race)
        ('            total += a_tile[ty, k] * b_tile[k, tx]\n        cuda.syncthreads()\n',
         '            total += a_tile[ty, k] * b_tile[k, tx]\n'),
        # no bounds guard on the loads: reads outside a and b at the edges
        ([('        if row < a.shape[0] and phase * T + tx < a.shape[1]:\n            a_tile[ty, tx] = a[row, phase * T + tx]\n        else:\n            a_tile[ty, tx] = 0.0\n',
           '        a_tile[ty, tx] = a[row, phase * T + tx]\n'),
          ('        if phase * T + ty < b.shape[0] and col < b.shape[1]:\n            b_tile[ty, tx] = b[phase * T + ty, col]\n        else:\n            b_tile[ty, tx] = 0.0\n',
           '        b_tile[ty, tx] = b[phase * T + ty, col]\n')]),
        # the library's naive kernel under this name: right values, 2k global reads
        ('        c[row, col] = total', '        c[row, col] = total\ntiled_matmul_kernel = kernels.matmul_naive_kernel'),
    ],
    'ex4_dot': [
        # no barrier between halving steps: a thread reads a slot another thread is still adding to (a race)
        ('            products[t] += products[t + half]\n        cuda.syncthreads()\n',
         '            products[t] += products[t + half]\n'),
        # thread 0 re-reads the block's slice from global memory instead of reducing in shared memory
        ('        partial[cuda.blockIdx.x] = products[0]',
         '        acc = 0.0\n        for k in range(cuda.blockIdx.x * R, min(x.size, cuda.blockIdx.x * R + R)):\n'
         '            acc += x[k] * y[k]\n        partial[cuda.blockIdx.x] = acc'),
        # no bounds guard: the last block's threads read past the end of x and y
        ('    products[t] = x[i] * y[i] if i < x.size else 0.0', '    products[t] = x[i] * y[i]'),
        # thread 0 adds all slots alone: right values, 32 shared reads
        ([('    half = R // 2\n', '    half = 0\n'),
          ('        partial[cuda.blockIdx.x] = products[0]',
           '        acc = 0.0\n        for k in range(R):\n            acc += products[k]\n        partial[cuda.blockIdx.x] = acc')]),
    ],
    'ex5_rowsum': [
        # no barrier between halving steps (a race)
        ('            lanes[t] += lanes[t + step]\n        cuda.syncthreads()\n',
         '            lanes[t] += lanes[t + step]\n'),
        # no barrier before the reduction: lanes are read before their threads stored them (a race)
        ('    lanes[t] = acc\n    cuda.syncthreads()\n', '    lanes[t] = acc\n'),
        # thread 0 re-reads the whole row from global memory: n reads in one thread
        ('        out[row] = lanes[0]',
         '        acc = 0.0\n        for col in range(a.shape[1]):\n            acc += a[row, col]\n        out[row] = acc'),
        # no bounds guard: every thread reads ceil(n / R) columns, some past the end of the row
        ('    for col in range(t, a.shape[1], R):\n        acc += a[row, col]',
         '    for k in range((a.shape[1] + R - 1) // R):\n        acc += a[row, k * R + t]'),
        # issue 26: thread 0 sums the row through atomics (add 0): n global reads, not ceil(n / R)
        ('        out[row] = lanes[0]',
         '        acc = 0.0\n        for col in range(a.shape[1]):\n            acc += cuda.atomic.add(a, (row, col), 0.0)\n'
         '        out[row] = acc'),
    ],
    'ex6_scan': [
        # no barrier between reading the neighbour and writing one's own slot (a race)
        ('        left = vals[t - offset] if t >= offset else 0.0\n        cuda.syncthreads()\n',
         '        left = vals[t - offset] if t >= offset else 0.0\n'),
        # each thread re-reads its prefix from global memory: right values, i + 1 reads
        ('        out[i] = vals[t]',
         '        acc = 0.0\n        for k in range(i - t, i + 1):\n            acc += x[k]\n        out[i] = acc'),
        # no bounds guard: threads past the end load from outside x
        ('    vals[t] = x[i] if i < x.size else 0.0', '    vals[t] = x[i]'),
        # exclusive instead of inclusive: out[i] leaves out x[i]
        ('        out[i] = vals[t]', '        out[i] = vals[t] - x[i]'),
        # issue 26: zeroes its input x and never writes out (zeros are the scan of zeros)
        ('        out[i] = vals[t]', '        x[i] = 0.0'),
    ],
}
