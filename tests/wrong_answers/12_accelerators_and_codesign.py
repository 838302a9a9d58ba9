# format: edits
"""Plausible wrong answers for lesson 12's exercises; each must lose points.

Each wrong answer is the edit it makes to the reference solution cell (the cell with its
``### BEGIN/END SOLUTION`` lines removed): ``(old, new)`` replaces the one occurrence of
``old``; a list of pairs makes several edits in order. The comment above says the mistake.
"""

WRONG_ANSWERS = {
    'ex1_meeting': [
        # forgets the column skew: only rows are delayed
        ('    k = t - i - j', '    k = t - i'),
        # off by one at the end of the reduction
        ('    return k if 0 <= k < K else None', '    return k if 0 <= k <= K else None'),
        # adds the skew instead of subtracting it
        ('    k = t - i - j', '    k = t + i + j'),
    ],
    'ex2_os_matmul': [
        # counts one cycle too many (cycles numbered from 1 and counted inclusively)
        ('    compute_cycles = M + N + K - 2', '    compute_cycles = M + N + K - 1'),
        # ignores the skew: every PE does its K MACs in K cycles
        ("""def os_matmul(A, B):
    M, K = A.shape
    N = B.shape[1]
    C = np.zeros((M, N))
    compute_cycles = M + N + K - 2
    busy = []
    for t in range(compute_cycles):
        count = 0
        for i in range(M):
            for j in range(N):
                k = meeting_k(i, j, t, K)
                if k is not None:
                    C[i, j] += A[i, k] * B[k, j]
                    count += 1
        busy.append(count)
    return C, compute_cycles, busy""", """def os_matmul(A, B):
    M, K = A.shape
    N = B.shape[1]
    C = np.zeros((M, N))
    busy = []
    for t in range(K):
        C += np.outer(A[:, t], B[t, :])
        busy.append(M * N)
    return C, K, busy"""),
        # stops one cycle early: the last MAC (PE (M-1, N-1), k = K-1) never happens
        ('    compute_cycles = M + N + K - 2', '    compute_cycles = M + N + K - 3'),
    ],
    'ex3_tiled': [
        # forgets the drain
        ('2 + rows', '2'),
        # charges every tile as a full P x P tile
        [('def tiled_cycles(M, K, N, P):', """import math

def tiled_cycles(M, K, N, P):"""),
         ("""total = 0
    for i0 in range(0, M, P):
        rows = min(P, M - i0)
        for j0 in range(0, N, P):
            cols = min(P, N - j0)
            total += rows + cols + K - 2 + rows
    return total""", """tiles = math.ceil(M / P) * math.ceil(N / P)
    return tiles * (P + P + K - 2 + P)""")],
        # drains one cycle per column instead of per row
        ('            total += rows + cols + K - 2 + rows', '            total += rows + cols + K - 2 + cols'),
    ],
    'ex4_quantize': [
        # truncates instead of rounding
        ('torch.clamp(torch.round(x / scale),', 'torch.clamp(x / scale,'),
        # scale for 128 levels, and accumulates in int16
        [("""127 if peak > 0 else 1.0
    q = torch.clamp(torch.round(x / scale), -127,""", """128 if peak > 0 else 1.0
    q = torch.clamp(torch.round(x / scale), -128,"""),
         ('(qa.to(torch.int32) @ qb.to(torch.int32)).double()', '(qa.to(torch.int16) @ qb.to(torch.int16)).double()')],
        # right quantization, but rescales by scale_a only
        ('(sa * sb)', 'sa'),
        # divides by zero for an all-zero tensor (no special case)
        ("""peak = float(x.abs().max())
    scale = peak / 127 if peak > 0 else 1.0""", 'scale = float(x.abs().max()) / 127'),
    ],
    'ex5_format': [
        # bfloat16 first: loses float16's precision when both fit
        ('("float16", "bfloat16",', '("bfloat16", "float16",'),
        # compares the smallest magnitude with eps instead of the smallest normal
        ('info.smallest_normal:', 'info.eps:'),
        # strict comparison: rejects float16's own maximum
        ('<= info.max and min_abs >=', '< info.max and min_abs >'),
    ],
}
