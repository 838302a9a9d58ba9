# format: edits
"""Plausible wrong answers for lesson 03's exercises; each must lose points.

Each wrong answer is the edit it makes to the reference solution cell (the cell with its
``### BEGIN/END SOLUTION`` lines removed): ``(old, new)`` replaces the one occurrence of
``old``; a list of pairs makes several edits in order. The comment above says the mistake.
Races (a missing ``cuda.syncthreads()``) fail with the simulator's race message; a missing
bounds guard fails with its out-of-bounds message; re-reading global memory breaks a budget.
Issue 37's blind spots: a ``cuda.syncthreads()`` inside a branch that not every running thread of the
block takes fails with the SIMT engine's barrier message (the values are right); uncoalesced reads
within the reads-per-thread budget fail the sectors check; sizes that are not multiples of a block
or tile, and inputs shorter than a block, fail the tests on those sizes.
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
        # issue 35: zeroes its input x and never writes out (the pooling of zeros is the zeros out holds)
        ('        out[i] = window[t] + window[t + 1] + window[t + 2]', '        x[i] = 0.0'),
        # issue 37: the barrier inside `if i < x.size` (threads past the end have nothing to add): they
        # staged their 0 and halo first, so the values are right, but a partly empty block's warp splits
        # at the barrier: undefined behaviour on a GPU
        ('    cuda.syncthreads()\n    if i < x.size:\n        out[i] = window[t] + window[t + 1] + window[t + 2]',
         '    if i < x.size:\n        cuda.syncthreads()\n        out[i] = window[t] + window[t + 1] + window[t + 2]'),
    ],
    'ex3_tiled': [
        # the naive kernel: correct, but 2k global reads per thread
        ([('        cuda.syncthreads()\n'
           '        for k in range(T):\n'
           '            total += a_tile[ty, k] * b_tile[k, tx]\n'
           '        cuda.syncthreads()\n',
           ''),
          ('    if row < c.shape[0] and col < c.shape[1]:\n        c[row, col] = total',
           '    if row < c.shape[0] and col < c.shape[1]:\n'
           '        for k in range(a.shape[1]):\n'
           '            total += a[row, k] * b[k, col]\n'
           '        c[row, col] = total')]),
        # no barrier after loading a tile: threads read slots their neighbours have not written (a race)
        ('        cuda.syncthreads()\n        for k in range(T):', '        for k in range(T):'),
        # no barrier after using a tile: the next phase overwrites it while neighbours still read (a race)
        ('            total += a_tile[ty, k] * b_tile[k, tx]\n        cuda.syncthreads()\n',
         '            total += a_tile[ty, k] * b_tile[k, tx]\n'),
        # no bounds guard on the loads: reads outside a and b at the edges
        ([('        if row < a.shape[0] and phase * T + tx < a.shape[1]:\n'
           '            a_tile[ty, tx] = a[row, phase * T + tx]\n'
           '        else:\n'
           '            a_tile[ty, tx] = 0.0\n',
           '        a_tile[ty, tx] = a[row, phase * T + tx]\n'),
          ('        if phase * T + ty < b.shape[0] and col < b.shape[1]:\n'
           '            b_tile[ty, tx] = b[phase * T + ty, col]\n'
           '        else:\n'
           '            b_tile[ty, tx] = 0.0\n',
           '        b_tile[ty, tx] = b[phase * T + ty, col]\n')]),
        # issue 35: zeroes its input a while staging zeros (c = 0 = a @ b computed from the zeroed a)
        ('            a_tile[ty, tx] = a[row, phase * T + tx]',
         '            a[row, phase * T + tx] = 0.0\n            a_tile[ty, tx] = 0.0'),
        # issue 37: only threads with an output element compute, barriers included: right values, but at
        # the ragged edges the threads outside c skip both barriers while the others wait (undefined on a GPU)
        ('        cuda.syncthreads()\n        for k in range(T):\n            total += a_tile[ty, k] * b_tile[k, tx]\n'
         '        cuda.syncthreads()\n',
         '        if row < c.shape[0] and col < c.shape[1]:\n            cuda.syncthreads()\n'
         '            for k in range(T):\n'
         '                total += a_tile[ty, k] * b_tile[k, tx]\n            cuda.syncthreads()\n'),
        # issue 37: the phases rounded down: right for inner sizes that are multiples of T, the last partial
        # tile of a and b missing otherwise
        ('    for phase in range((a.shape[1] + T - 1) // T):', '    for phase in range(a.shape[1] // T):'),
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
        # thread 0 adds all slots alone: right values, 128 shared reads
        ([('    half = R // 2\n', '    half = 0\n'),
          ('        partial[cuda.blockIdx.x] = products[0]',
           '        acc = 0.0\n'
           '        for k in range(R):\n'
           '            acc += products[k]\n'
           '        partial[cuda.blockIdx.x] = acc')]),
        # interleaved addressing: the right sum and 15 shared reads, but `t % (2 * step)` splits the
        # lanes of every warp at every step (24 divergent warp branches per block, budget 7)
        ('    half = R // 2\n    while half > 0:\n        if t < half:\n            products[t] += products[t + half]\n'
         '        cuda.syncthreads()\n        half //= 2\n',
         '    step = 1\n'
         '    while step < R:\n'
         '        if t % (2 * step) == 0:\n'
         '            products[t] += products[t + step]\n'
         '        cuda.syncthreads()\n        step *= 2\n'),
        # issue 35: zeroes its input x and sums zeros (x @ y computed from the zeroed x is 0)
        ('    products[t] = x[i] * y[i] if i < x.size else 0.0',
         '    if i < x.size:\n        x[i] = 0.0\n    products[t] = 0.0'),
        # issue 37: the barrier inside `if t < half`: the right sum in the engine and in Numba's simulator,
        # but the threads that do not add skip it: undefined behaviour on a GPU
        ('            products[t] += products[t + half]\n        cuda.syncthreads()\n',
         '            products[t] += products[t + half]\n            cuda.syncthreads()\n'),
        # issue 37: the halving starts at half the input's length when x is shorter than a block ("no need
        # to add the empty slots"): right for x of R values or more, slots lost for fewer (25, 12, 6, ...)
        ('    half = R // 2\n', '    half = min(R, x.size) // 2\n'),
    ],
    'ex5_rowsum': [
        # no barrier between halving steps (a race)
        ('            lanes[t] += lanes[t + step]\n        cuda.syncthreads()\n',
         '            lanes[t] += lanes[t + step]\n'),
        # no barrier before the reduction: lanes are read before their threads stored them (a race)
        ('    lanes[t] = acc\n    cuda.syncthreads()\n', '    lanes[t] = acc\n'),
        # thread 0 re-reads the whole row from global memory: n reads in one thread
        ('        out[row] = lanes[0]',
         '        acc = 0.0\n'
         '        for col in range(a.shape[1]):\n'
         '            acc += a[row, col]\n'
         '        out[row] = acc'),
        # no bounds guard: every thread reads ceil(n / R) columns, some past the end of the row
        ('    for col in range(t, a.shape[1], R):\n        acc += a[row, col]',
         '    for k in range((a.shape[1] + R - 1) // R):\n        acc += a[row, k * R + t]'),
        # issue 26: thread 0 sums the row through atomics (add 0): n global reads, not ceil(n / R)
        ('        out[row] = lanes[0]',
         '        acc = 0.0\n'
         '        for col in range(a.shape[1]):\n'
         '            acc += cuda.atomic.add(a, (row, col), 0.0)\n'
         '        out[row] = acc'),
        # issue 35: zeroes its input a and writes the sums of zeros
        ('        acc += a[row, col]', '        a[row, col] = 0.0'),
        # issue 37: each thread adds its own run of ceil(n / R) neighbouring columns: the reads per thread
        # of the budget, but a warp's 32 threads read 32 columns ceil(n / R) apart: uncoalesced
        ('    for col in range(t, a.shape[1], R):\n',
         '    per_thread = (a.shape[1] + R - 1) // R\n'
         '    for col in range(t * per_thread, min(a.shape[1], (t + 1) * per_thread)):\n'),
        # issue 37: the barrier inside `if t < step` (undefined behaviour on a GPU; right values here)
        ('            lanes[t] += lanes[t + step]\n        cuda.syncthreads()\n',
         '            lanes[t] += lanes[t + step]\n            cuda.syncthreads()\n'),
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
        # issue 37: only the threads that have a left neighbour read, wait and add: the barrier between
        # reading and adding is inside `if t >= offset` (undefined behaviour on a GPU; right values here)
        ('        left = vals[t - offset] if t >= offset else 0.0\n        cuda.syncthreads()\n'
         '        vals[t] += left\n',
         '        if t >= offset:\n            left = vals[t - offset]\n            cuda.syncthreads()\n'
         '            vals[t] += left\n'),
    ],
    'ex7_naive': [
        # a copy, not a transpose: out[row, col] (and out has the transposed shape)
        ('        out[col, row] = a[row, col]', '        out[row, col] = a[row, col]'),
        # no bounds guard: threads of the edge blocks index outside a
        ('    if row < a.shape[0] and col < a.shape[1]:\n        out[col, row]', '    if True:\n        out[col, row]'),
        # issue 35: zeroes its input a and never writes out (the transpose of zeros is the zeros out holds)
        ('        out[col, row] = a[row, col]', '        a[row, col] = 0.0'),
    ],
    'ex7_tiled': [
        # the uncoalesced transpose: the tile is used, but each thread still writes out[col, row], down
        # a column of out (32 sectors per warp access where 4 would do); the padded tile keeps it free
        # of bank conflicts
        ([('    out_row = cuda.blockIdx.x * TILE + ty\n    out_col = cuda.blockIdx.y * TILE + tx\n',
           '    out_row = col\n    out_col = row\n'),
          ('        out[out_row, out_col] = tile[tx, ty]', '        out[out_row, out_col] = tile[ty, tx]')]),
        # no barrier between filling the tile and reading it: a race
        ('    cuda.syncthreads()\n', ''),
        # the naive kernel of part 1 under this name: right values, uncoalesced writes, no shared memory
        ('        out[out_row, out_col] = tile[tx, ty]',
         '        out[out_row, out_col] = tile[tx, ty]\ntranspose_tiled_kernel = transpose_naive_kernel'),
        # the output tile's row and column swapped: right only where the matrix is square
        ('        out[out_row, out_col] = tile[tx, ty]', '        out[out_col, out_row] = tile[tx, ty]'),
        # issue 35: zeroes its input a and writes the zeros it staged
        ('        tile[ty, tx] = a[row, col]', '        a[row, col] = 0.0\n        tile[ty, tx] = 0.0'),
        # issue 35: the padded tile, no conflict, but the write naive (down a column of out: 32 sectors per
        # warp access where 4 would do) and diluted by one lane rewriting its element ~30 times per warp:
        # each rewrite is 1 sector where 1 would do, which summed over the site hid the column writes; the
        # worst warp access is 32
        ('    out_row = cuda.blockIdx.x * TILE + ty\n    out_col = cuda.blockIdx.y * TILE + tx\n'
         '    if out_row < out.shape[0] and out_col < out.shape[1]:\n        out[out_row, out_col] = tile[tx, ty]',
         '    if row < a.shape[0] and col < a.shape[1]:\n'
         '        reps = 1\n'
         '        if row == 0 and col == 0:\n'
         '            reps = 30 * a.shape[0] * (a.shape[1] // 32 + 1)\n'
         '        for r in range(reps):\n            out[col, row] = tile[ty, tx]'),
        # issue 37: the barrier inside the guard of the read (only threads that load an element wait): at
        # the edges of a the threads outside it skip the barrier: undefined behaviour on a GPU
        ('        tile[ty, tx] = a[row, col]\n    cuda.syncthreads()\n',
         '        tile[ty, tx] = a[row, col]\n        cuda.syncthreads()\n'),
        # the unpadded tile: coalesced on both sides, but a column of it lies in one bank, a 32-way conflict
        ('cuda.shared.array((TILE, 33), float32)', 'cuda.shared.array((TILE, TILE), float32)'),
        # no guard on the write: the edge blocks write outside out
        ('    if out_row < out.shape[0] and out_col < out.shape[1]:\n        out[out_row, out_col]',
         '    if True:\n        out[out_row, out_col]'),
        # issue 35: the tile read and out written one lane at a time (`if cuda.laneid == k`): every
        # access conflict-free and 1 sector, but each warp takes 32 passes for its 32 words and
        # moves 32 sectors for its 128 bytes
        ('        out[out_row, out_col] = tile[tx, ty]',
         '        for k in range(32):\n'
         '            if cuda.laneid == k:\n'
         '                out[out_row, out_col] = tile[tx, ty]'),
    ],
    'ex8_warp_rows': [
        # four shuffle steps (16, 8, 4, 2): lane 0 ends with the sum of only its even lanes' partial sums
        ('        while offset > 0:', '        while offset > 1:'),
        # every lane writes the row's sum (the same value 32 times): right values, 32 writes per row
        ('        if lane == 0:\n            out[row] = acc', '        out[row] = cuda.shfl_sync(FULL_MASK, acc, 0)'),
        # each lane adds a contiguous chunk of the row (lane l: columns l*c ... l*c + c - 1): as many reads
        # per thread, but a warp's 32 reads lie c columns apart, uncoalesced
        ('        for col in range(lane, a.shape[1], 32):\n            acc += a[row, col]',
         '        chunk = (a.shape[1] + 31) // 32\n'
         '        for col in range(lane * chunk, min(lane * chunk + chunk, a.shape[1])):\n'
         '            acc += a[row, col]'),
        # lanes past the row's end leave early: on rows shorter than 32 the shuffles read lanes that
        # have returned (undefined on a GPU)
        ('    if row < a.shape[0]:\n', '    if lane >= a.shape[1]:\n        return\n    if row < a.shape[0]:\n'),
        # the shared-memory tree's `if lane < offset` kept around the shuffle: lanes read lanes that sit the
        # step out (undefined on a GPU), and every step splits the warp
        ('            acc += cuda.shfl_down_sync(FULL_MASK, acc, offset)',
         '            if lane < offset:\n                acc += cuda.shfl_down_sync(FULL_MASK, acc, offset)'),
        # every lane gathers all 32 partial sums with a broadcast shuffle each: right values, no divergence,
        # but 32 shuffles per warp where 5 do
        ('        offset = 16\n        while offset > 0:\n'
         '            acc += cuda.shfl_down_sync(FULL_MASK, acc, offset)\n'
         '            offset //= 2\n',
         '        total = 0.0\n        for k in range(32):\n            total += cuda.shfl_sync(FULL_MASK, acc, k)\n'
         '        acc = total\n'),
        # the mask of half a warp (0xFFFF): lanes 16-31 call the shuffle outside its mask (undefined on a GPU)
        ('            acc += cuda.shfl_down_sync(FULL_MASK, acc, offset)',
         '            acc += cuda.shfl_down_sync(0xFFFF, acc, offset)'),
        # lane 0 adds the whole row alone: no shuffle, no shared memory, n global reads in one thread
        ([('        for col in range(lane, a.shape[1], 32):\n            acc += a[row, col]\n'
           '        offset = 16\n        while offset > 0:\n'
           '            acc += cuda.shfl_down_sync(FULL_MASK, acc, offset)\n'
           '            offset //= 2\n',
           '        for col in range(a.shape[1]):\n            acc += a[row, col]\n')]),
        # the partial sums added through shared memory by lane 0 (a 32-slot array per warp of the block)
        ('        offset = 16\n        while offset > 0:\n'
         '            acc += cuda.shfl_down_sync(FULL_MASK, acc, offset)\n'
         '            offset //= 2\n',
         '        slots = cuda.shared.array(1024, float64)\n'
         '        base = cuda.threadIdx.x - lane\n'
         '        slots[cuda.threadIdx.x] = acc\n'
         '        cuda.syncwarp()\n'
         '        if lane == 0:\n'
         '            for k in range(1, 32):\n'
         '                acc += slots[base + k]\n'),
        # issue 35: zeroes its input a and writes the zero sums
        ('            acc += a[row, col]', '            a[row, col] = 0.0'),
    ],
    'ex9_occupancy': [
        # registers not rounded up to a multiple of 256 per warp: 36 registers give 1152 per warp, not 1280
        ('    per_warp = -(-registers_per_thread * 32 // 256) * 256', '    per_warp = registers_per_thread * 32'),
        # the runtime's reserved shared memory per block forgotten
        ('    taken = shared_bytes_per_block + limits["reserved_shared_per_block_kb"] * 1024',
         '    taken = shared_bytes_per_block'),
        # no limit on blocks per SM: blocks of one warp fill all 64 warps of an H100
        ('    allowed = [limits["max_blocks_per_sm"], limits["max_warps_per_sm"] // warps,',
         '    allowed = [limits["max_warps_per_sm"] // warps,'),
        # warps per block rounded down: a block of 48 threads taken as one warp
        ('    warps = -(-threads_per_block // 32)', '    warps = max(1, threads_per_block // 32)'),
        # no launch limits: 1056 threads, 256 registers or 100 KB of shared memory per block still "fit"
        ('    if (threads_per_block > 1024 or registers_per_thread > 255\n'
         '            or shared_bytes_per_block > limits["shared_per_block_kb"] * 1024):\n        return 0, 0\n', ''),
        # the target missed by a hair: more than the target, not at least it
        ('        if warps >= target * limits["max_warps_per_sm"]:',
         '        if warps > target * limits["max_warps_per_sm"]:'),
        # the largest block size that reaches the target instead of the smallest
        ('    for threads in range(32, 1025, 32):', '    for threads in range(1024, 31, -32):'),
        # the shared memory per thread taken as the block's
        ('        _, warps = resident_per_sm(limits, threads, registers_per_thread, shared_bytes_per_thread * threads)',
         '        _, warps = resident_per_sm(limits, threads, registers_per_thread, shared_bytes_per_thread)'),
        # occupancy as a fraction of the warps a block could hold, not of the SM's maximum
        ('        if warps >= target * limits["max_warps_per_sm"]:', '        if warps >= target * (threads // 32):'),
    ],
}

# What a student who reads course_lib would submit: the closest library kernel (or helper) under the
# exercise's name instead of writing one. course_lib holds no kernel an exercise asks for (see
# course_lib/kernels.py), so each computes something else or takes other arguments, and loses points.
LIBRARY_CALLS = {
    # blocks_for is blocks_needed (its point is the library's), but vector_add has no alpha
    'ex1_axpy': [('    return (n + threads_per_block - 1) // threads_per_block',
                  '    return kernels.blocks_for(n, threads_per_block)'),
                 ('        out[i] = alpha * x[i] + y[i]',
                  '        out[i] = alpha * x[i] + y[i]\n'
                  'axpy_kernel = kernels.vector_add_kernel')],
    # vector add of two arguments: no window, other arity
    'ex2_pool': ('        out[i] = window[t] + window[t + 1] + window[t + 2]',
                 '        out[i] = window[t] + window[t + 1] + window[t + 2]\n'
                 'pool3_kernel = kernels.vector_add_kernel'),
    # the library's naive matmul: right values, 2k global reads per thread
    'ex3_tiled': ('        c[row, col] = total',
                  '        c[row, col] = total\n'
                  'tiled_matmul_kernel = kernels.matmul_naive_kernel'),
    # the library's vector add: elementwise x + y into partial, no reduction
    'ex4_dot': ('        partial[cuda.blockIdx.x] = products[0]',
                '        partial[cuda.blockIdx.x] = products[0]\n'
                'dot_kernel = kernels.vector_add_kernel'),
    # the library's distance kernel takes three arguments, not (a, out)
    'ex5_rowsum': ('        out[row] = lanes[0]',
                   '        out[row] = lanes[0]\n'
                   'row_sums_kernel = kernels.squared_distance_kernel'),
    'ex6_scan': ('        out[i] = vals[t]',
                 '        out[i] = vals[t]\n'
                 'block_scan_kernel = kernels.vector_add_kernel'),
    'ex7_naive': ('        out[col, row] = a[row, col]',
                  '        out[col, row] = a[row, col]\n'
                  'transpose_naive_kernel = kernels.matmul_naive_kernel'),
    'ex7_tiled': ('        out[out_row, out_col] = tile[tx, ty]',
                  '        out[out_row, out_col] = tile[tx, ty]\n'
                  'transpose_tiled_kernel = kernels.matmul_naive_kernel'),
    # the library's vector add: three arguments, no row sums
    'ex8_warp_rows': ('            out[row] = acc',
                      '            out[row] = acc\n'
                      'warp_row_sums_kernel = kernels.vector_add_kernel'),
    # simt.occupancy (it looks the GPU up by name in data/gpu_sm_limits.csv, so a carved-out H100 is
    # the full one, and it has no 255-register or 1024-thread launch limit), and a search over it
    'ex9_occupancy': [('    if (threads_per_block > 1024 or registers_per_thread > 255\n'
                       '            or shared_bytes_per_block > limits["shared_per_block_kb"] * 1024):\n'
                       '        return 0, 0\n',
                       '    from course_lib.simt.occupancy import occupancy\n'
                       '    found = occupancy(limits["device"], threads_per_block, shared_bytes_per_block, '
                       'registers_per_thread)\n'
                       '    return found.blocks_per_sm, found.warps_per_sm\n')],
}
