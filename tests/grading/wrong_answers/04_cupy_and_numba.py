# format: edits
"""Plausible wrong answers for lesson 04's exercises; each must lose points.

Each wrong answer is the edit it makes to the reference solution cell (the cell with its
``### BEGIN/END SOLUTION`` lines removed): ``(old, new)`` replaces the one occurrence of
``old``; a list of pairs makes several edits in order. The comment above says the mistake.
Races (a missing ``cuda.syncthreads()``) fail with the simulator's race message; a missing
bounds guard fails with its out-of-bounds message; re-reading global memory breaks a budget.
Issue 37's extremes: points far apart (squared distances beyond 1e10) and values at the edges of a
histogram's range. (A ``cuda.syncthreads()`` inside a branch is not among them: Numba's simulator,
which counts this lesson's kernels, runs it to the right answer; the SIMT engine reports it.)
``LIBRARY_CALLS`` holds, for every solution cell, the shortest answer that calls the closest
``course_lib`` function (what a student who reads the library would submit); it must lose points
too.
"""

WRONG_ANSWERS = {
    'ex1_sqdist': [
        # no clip: rounding leaves small negative values (and NaN after sqrt)
        ('    return xp.maximum(sq_x[:, None] - 2.0 * cross + sq_y[None, :], 0.0)',
         '    return sq_x[:, None] - 2.0 * cross + sq_y[None, :]'),
        # NumPy hard-wired: runs on NumPy arrays only
        ([('    xp = arrays.get_array_module(x)\n', ''), ('xp.sum(x * x', 'np.sum(x * x'),
          ('xp.sum(y * y', 'np.sum(y * y'), ('xp.maximum', 'np.maximum')]),
        # the factor 2 forgotten
        ('2.0 * cross', 'cross'),
    ],
    'ex2_rows': [
        # the difference array only (the spec before issue 38): its square, alive beside it, is forgotten
        ('(d + 1 if in_place else 2 * d)', 'd'),
        # in place or not, the same peak: the out= argument saves nothing
        ('(d + 1 if in_place else 2 * d)', '2 * d'),
        # in place, the sums forgotten: only the difference counted
        ('(d + 1 if in_place else 2 * d)', '(d if in_place else 2 * d)'),
        # every temporary counted as alive at once (difference, square and sums): safe, but not the largest chunk
        ('(d + 1 if in_place else 2 * d)', '(d + 1 if in_place else 2 * d + 1)'),
        # can return 0 rows (an endless or empty loop later)
        ('    return rows if rows > 0 else 1', '    return rows'),
        # rounds up: one row over the budget
        ('int(budget_bytes // per_row)', 'int(-(-budget_bytes // per_row))'),
        # itemsize forgotten: counts elements, not bytes
        ('    per_row = n * itemsize * ', '    per_row = n * '),
    ],
    'ex3_chunked': [
        # ignores the budget: one broadcast over all rows
        ('    m, n = len(x), len(y)\n', '    return ((x[:, None, :] - y[None, :, :]) ** 2).sum(-1)\n'),
        # stops before the last, short chunk
        ('    for first in range(0, m, step):', '    for first in range(0, m - step, step):'),
    ],
    'ex4_crossover': [
        # the first size where the GPU is faster, ignoring later reversals
        [("""answer = None
    for n, a, b in zip(reversed(list(sizes)), reversed(list(t_cpu)), reversed(list(t_gpu))):""",
          'for n, a, b in zip(sizes, t_cpu, t_gpu):'),
         ("""answer = n
        else:
            break
    return answer""", """return n
    return None""")],
        # ties counted as faster
        ('        if b < a:', '        if b <= a:'),
        # a NaN CPU time (not measured) counted as a GPU win
        ('        if b < a:', '        if not b >= a:'),
    ],
    'ex5_bias_relu': [
        # rows and columns swapped: x of the grid is the column
        ('    col, row = cuda.grid(2)', '    row, col = cuda.grid(2)'),
        # no bounds guard: threads outside the matrix read and write out of range
        ('    if row < out.shape[0] and col < out.shape[1]:\n', '    if True:\n'),
        # re-reads a and bias for the comparison: 4 global reads per thread
        ('        out[row, col] = v if v > 0.0 else 0.0',
         '        out[row, col] = a[row, col] + bias[col] if a[row, col] + bias[col] > 0.0 else 0.0'),
        # bias indexed by the row
        ('bias[col]', 'bias[row % bias.size]'),
        # issue 26: sets its input a to -bias and never writes out: max(a + bias, 0) computed after
        # the launch from the same arrays would be the zeros out holds
        ('        out[row, col] = v if v > 0.0 else 0.0', '        a[row, col] = -bias[col]'),
    ],
    'ex6_conv1d': [
        # no barrier after staging: threads read slots their neighbours have not written (a race)
        ('    cuda.syncthreads()\n', ''),
        # reads x and w straight from global memory: 2K reads per thread
        ('            acc += taps[k] * tile[t + k]', '            acc += w[k] * x[i + k]'),
        # no bounds guard on the halo: the last block reads past the end of x
        ('        tile[C + t] = x[i + C] if i + C < x.size else 0.0', '        tile[C + t] = x[i + C]'),
        # a flipped kernel (np.convolve), not deep learning's correlation
        ('            acc += taps[k] * tile[t + k]', '            acc += taps[K - 1 - k] * tile[t + k]'),
        # issue 26: reads x and w through atomics (add 0) instead of the tiles: 2K reads per thread
        ('            acc += taps[k] * tile[t + k]',
         '            acc += cuda.atomic.add(w, k, 0.0) * cuda.atomic.add(x, i + k, 0.0)'),
    ],
    'ex7_nearest': [
        # no barrier after loading a tile (a race)
        ('            y_tile[t, k] = y[start + t, k] if start + t < y.shape[0] else 0.0\n        cuda.syncthreads()\n',
         '            y_tile[t, k] = y[start + t, k] if start + t < y.shape[0] else 0.0\n'),
        # no barrier before the next tile overwrites this one (a race)
        ('            best = min(best, dist)\n        cuda.syncthreads()\n', '            best = min(best, dist)\n'),
        # compares with y in global memory instead of the shared tile: D * n reads per thread
        ('                gap = mine[k] - y_tile[jj, k]', '                gap = mine[k] - y[start + jj, k]'),
        # no bounds guard when loading the last tile: reads past the end of y
        ('            y_tile[t, k] = y[start + t, k] if start + t < y.shape[0] else 0.0',
         '            y_tile[t, k] = y[start + t, k]'),
        # threads past the end of x return early: their slots of every tile are never loaded
        ('    mine = cuda.local.array(D, float64)\n',
         '    if i >= x.shape[0]:\n'
         '        return\n'
         '    mine = cuda.local.array(D, float64)\n'),
        # issue 26: compares with y read through atomics (add 0) instead of the shared tile
        ('                gap = mine[k] - y_tile[jj, k]',
         '                gap = mine[k] - cuda.atomic.add(y, (start + jj, k), 0.0)'),
        # issue 37: starts from "a big number" instead of math.inf: right for points in the unit cube,
        # 1e10 where every point of y is farther (squared distances near 3e10)
        ('    best = math.inf\n', '    best = 1e10\n'),
        # issue 37: compares with every slot of the last tile, the zeros that pad it too: a point at the
        # origin that is not in y, nearer than y for points of x near the origin
        ('        for jj in range(min(C, y.shape[0] - start)):', '        for jj in range(C):'),
    ],
    'ex8_histogram': [
        # one global atomic per value (lesson 03's kernel): over the atomics budget
        ('            cuda.atomic.add(bins, min(int((v - lo) / (hi - lo) * B), B - 1), 1)\n'
         '    cuda.syncthreads()\n'
         '    if t < B:\n'
         '        cuda.atomic.add(counts, t, bins[t])',
         '            cuda.atomic.add(counts, min(int((v - lo) / (hi - lo) * B), B - 1), 1)'),
        # no barrier after zeroing: atomics race with the zeroing writes
        ('        bins[t] = 0\n    cuda.syncthreads()\n', '        bins[t] = 0\n'),
        # no barrier before publishing: bins are read while other threads still add (a race)
        ('            cuda.atomic.add(bins, min(int((v - lo) / (hi - lo) * B), B - 1), 1)\n    cuda.syncthreads()\n',
         '            cuda.atomic.add(bins, min(int((v - lo) / (hi - lo) * B), B - 1), 1)\n'),
        # no bounds guard: threads past the end read outside x
        ('    if i < x.size:\n        v = x[i]\n        if lo <= v < hi:\n            cuda.atomic.add(',
         '    v = x[i]\n    if True:\n        if lo <= v < hi:\n            cuda.atomic.add('),
        # plain += on the shared bins instead of an atomic: lost updates (a race)
        ('            cuda.atomic.add(bins, min(int((v - lo) / (hi - lo) * B), B - 1), 1)',
         '            b = min(int((v - lo) / (hi - lo) * B), B - 1)\n            bins[b] += 1'),
        # issue 26: moves every value of its input x out of range, so the histogram expected from
        # the same x after the launch would be the zeros counts holds
        ('    if i < x.size:\n        v = x[i]\n', '    if i < x.size:\n        x[i] = hi + 1.0\n        v = x[i]\n'),
        # issue 26: reads x through an atomic (add 0): a read, a write and an atomic more per value
        ('        v = x[i]\n', '        v = cuda.atomic.add(x, i, 0.0)\n'),
        # issue 37: the range closed at hi: a value equal to hi counts in the last bin (random data never
        # holds it exactly)
        ('        if lo <= v < hi:', '        if lo <= v <= hi:'),
        # issue 37: no clamp to B - 1: the float just below hi rounds to bin B, outside the shared bins
        ('min(int((v - lo) / (hi - lo) * B), B - 1)', 'int((v - lo) / (hi - lo) * B)'),
    ],
}

LIBRARY_CALLS = {
    # distance.sqdist_matmul: right values, but it never asks arrays.get_array_module for the module
    'ex1_sqdist': ('    xp = arrays.get_array_module(x)\n',
                   '    from course_lib import distance\n    return distance.sqdist_matmul(x, y)\n'),
    # distance.rows_per_chunk budgets the difference, its square and the result row together: fewer rows than
    # fit, and nothing for in_place
    'ex2_rows': ('    per_row = n * itemsize',
                 '    from course_lib import distance\n'
                 '    return distance.rows_per_chunk(n, d, budget_bytes, itemsize=itemsize)\n'
                 '    per_row = n * itemsize'),
    # distance.chunked_squared_distances: right values, not in chunks of the student's rows_per_chunk
    'ex3_chunked': ('    m, n = len(x), len(y)\n',
                    '    from course_lib import distance\n'
                    '    return distance.chunked_squared_distances(x, y, budget_bytes)\n'),
    # course_lib has no crossover finder (crossover's docstring says so); the closest thing the course
    # hands over is the lecture's helper, which counts a NaN on the slow side as a win for the fast one
    'ex4_crossover': ("""    answer = None
    for n, a, b in zip(reversed(list(sizes)), reversed(list(t_cpu)), reversed(list(t_gpu))):
        if b < a:
            answer = n
        else:
            break
    return answer""", """    wins = [f < s or (s != s and f == f) for s, f in zip(t_cpu, t_gpu)]
    return next((n for k, n in enumerate(sizes) if all(wins[k:])), None)"""),
    # lesson 03's vector-add kernel from course_lib.kernels: one index, 1-D arrays only
    'ex5_bias_relu': ("""@cuda.jit
def bias_relu_kernel(a, bias, out):
    col, row = cuda.grid(2)
    if row < out.shape[0] and col < out.shape[1]:
        v = a[row, col] + bias[col]
        out[row, col] = v if v > 0.0 else 0.0""", "bias_relu_kernel = kernels.vector_add_kernel"),
    # the closest library kernel is elementwise too: it reads x[i] and w[i] past the end of w
    'ex6_conv1d': ("""@cuda.jit
def conv1d_kernel(x, w, out):""", """conv1d_kernel = kernels.vector_add_kernel


@cuda.jit
def unused_conv1d_kernel(x, w, out):"""),
    # lesson 03's squared-distance kernel: the full (m, n) matrix, not each point's nearest distance
    'ex7_nearest': ("""@cuda.jit
def nearest_kernel(x, y, out):""", """nearest_kernel = kernels.squared_distance_kernel


@cuda.jit
def unused_nearest_kernel(x, y, out):"""),
    # lesson 03's histogram kernel: one global atomic per value, over the atomics budget
    'ex8_histogram': ("""@cuda.jit
def shared_histogram_kernel(x, lo, hi, counts):""", """shared_histogram_kernel = kernels.histogram_kernel


@cuda.jit
def unused_histogram_kernel(x, lo, hi, counts):"""),
}
