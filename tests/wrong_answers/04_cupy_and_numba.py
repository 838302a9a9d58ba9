# format: edits
"""Plausible wrong answers for lesson 04's exercises; each must lose points.

Each wrong answer is the edit it makes to the reference solution cell (the cell with its
``### BEGIN/END SOLUTION`` lines removed): ``(old, new)`` replaces the one occurrence of
``old``; a list of pairs makes several edits in order. The comment above says the mistake.
"""

WRONG_ANSWERS = {
    'ex1_sqdist': [
        # no clip: rounding leaves small negative values (and NaN after sqrt)
        ("""def sqdist(x, y):
    xp = arrays.get_array_module(x)
    x2 = (x * x).sum(axis=1)[:, None]
    y2 = (y * y).sum(axis=1)[None, :]
    return xp.maximum(x2 - 2.0 * (x @ y.T) + y2, 0.0)""", """def sqdist(x, y):
    x2 = (x * x).sum(axis=1)[:, None]
    y2 = (y * y).sum(axis=1)[None, :]
    return x2 - 2.0 * (x @ y.T) + y2"""),
        # NumPy hard-wired: runs on NumPy arrays only
        ("""def sqdist(x, y):
    xp = arrays.get_array_module(x)
    x2 = (x * x).sum(axis=1)[:, None]
    y2 = (y * y).sum(axis=1)[None, :]
    return xp.maximum(x2 - 2.0 * (x @ y.T) + y2, 0.0)""", """def sqdist(x, y):
    x2 = (x * x).sum(axis=1)[:, None]
    y2 = (y * y).sum(axis=1)[None, :]
    return np.maximum(x2 - 2.0 * (x @ y.T) + y2, 0.0)"""),
        # the factor 2 forgotten
        ('2.0 * (x', '(x'),
    ],
    'ex2_rows': [
        # can return 0 rows (an endless or empty loop later)
        ('max(1, int(budget_bytes // (n * d * itemsize)))', 'int(budget_bytes // (n * d * itemsize))'),
        # rounds up: one row over the budget
        ('int(budget_bytes', '-(-budget_bytes'),
        # itemsize forgotten: counts elements, not bytes
        ('d * itemsize)))', 'd)))'),
    ],
    'ex3_chunked': [
        # ignores the budget: one broadcast over all rows
        ("""m, d = x.shape
    n = y.shape[0]
    out = np.empty((m, n), dtype=np.result_type(x, y))
    rows = rows_per_chunk(n, d, budget_bytes, out.itemsize)
    for start in range(0, m, rows):
        xc = x[start:start + rows]
        out[start:start + rows] = ((xc[:, None, :] - y[None, :, :]) ** 2).sum(-1)
    return out""", 'return ((x[:, None, :] - y[None, :, :]) ** 2).sum(-1)'),
        # stops before the last, short chunk
        ("""np.empty((m, n), dtype=np.result_type(x, y))
    rows = rows_per_chunk(n, d, budget_bytes, out.itemsize)
    for start in range(0, m,""", """np.zeros((m, n))
    rows = rows_per_chunk(n, d, budget_bytes)
    for start in range(0, m - rows,"""),
    ],
    'ex4_crossover': [
        # the first size where the GPU is faster, ignoring later reversals
        [("""answer = None
    for n, a, b in zip(reversed(list(sizes)), reversed(list(t_cpu)), reversed(list(t_gpu))):""", 'for n, a, b in zip(sizes, t_cpu, t_gpu):'),
         ("""answer = n
        else:
            break
    return answer""", """return n
    return None""")],
        # ties counted as faster
        ('        if b < a:', '        if b <= a:'),
    ],
}
