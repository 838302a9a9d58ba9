"""Plausible wrong answers for lesson 04's exercises; each must lose points."""

WRONG_ANSWERS = {
    "ex1_sqdist": [
        # no clip: rounding leaves small negative values (and NaN after sqrt)
        """def sqdist(x, y):
    x2 = (x * x).sum(axis=1)[:, None]
    y2 = (y * y).sum(axis=1)[None, :]
    return x2 - 2.0 * (x @ y.T) + y2
""",
        # NumPy hard-wired: runs on NumPy arrays only
        """def sqdist(x, y):
    x2 = (x * x).sum(axis=1)[:, None]
    y2 = (y * y).sum(axis=1)[None, :]
    return np.maximum(x2 - 2.0 * (x @ y.T) + y2, 0.0)
""",
        # the factor 2 forgotten
        """def sqdist(x, y):
    xp = arrays.get_array_module(x)
    x2 = (x * x).sum(axis=1)[:, None]
    y2 = (y * y).sum(axis=1)[None, :]
    return xp.maximum(x2 - (x @ y.T) + y2, 0.0)
""",
    ],
    "ex2_rows": [
        # can return 0 rows (an endless or empty loop later)
        """def rows_per_chunk(n, d, budget_bytes, itemsize=8):
    return int(budget_bytes // (n * d * itemsize))
""",
        # rounds up: one row over the budget
        """def rows_per_chunk(n, d, budget_bytes, itemsize=8):
    return max(1, -(-budget_bytes // (n * d * itemsize)))
""",
        # itemsize forgotten: counts elements, not bytes
        """def rows_per_chunk(n, d, budget_bytes, itemsize=8):
    return max(1, int(budget_bytes // (n * d)))
""",
    ],
    "ex3_chunked": [
        # ignores the budget: one broadcast over all rows
        """def chunked_sqdist(x, y, budget_bytes):
    return ((x[:, None, :] - y[None, :, :]) ** 2).sum(-1)
""",
        # stops before the last, short chunk
        """def chunked_sqdist(x, y, budget_bytes):
    m, d = x.shape
    n = y.shape[0]
    out = np.zeros((m, n))
    rows = rows_per_chunk(n, d, budget_bytes)
    for start in range(0, m - rows, rows):
        xc = x[start:start + rows]
        out[start:start + rows] = ((xc[:, None, :] - y[None, :, :]) ** 2).sum(-1)
    return out
""",
    ],
    "ex4_crossover": [
        # the first size where the GPU is faster, ignoring later reversals
        """def crossover_size(sizes, t_cpu, t_gpu):
    for n, a, b in zip(sizes, t_cpu, t_gpu):
        if b < a:
            return n
    return None
""",
        # ties counted as faster
        """def crossover_size(sizes, t_cpu, t_gpu):
    answer = None
    for n, a, b in zip(reversed(list(sizes)), reversed(list(t_cpu)), reversed(list(t_gpu))):
        if b <= a:
            answer = n
        else:
            break
    return answer
""",
    ],
}
