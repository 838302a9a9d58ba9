"""Plausible wrong answers for lesson 12's exercises; each must lose points."""

WRONG_ANSWERS = {
    "ex1_meeting": [
        # forgets the column skew: only rows are delayed
        """def meeting_k(i, j, t, K):
    k = t - i
    return k if 0 <= k < K else None
""",
        # off by one at the end of the reduction
        """def meeting_k(i, j, t, K):
    k = t - i - j
    return k if 0 <= k <= K else None
""",
        # adds the skew instead of subtracting it
        """def meeting_k(i, j, t, K):
    k = t + i + j
    return k if 0 <= k < K else None
""",
    ],
    "ex2_os_matmul": [
        # counts one cycle too many (cycles numbered from 1 and counted inclusively)
        """def os_matmul(A, B):
    M, K = A.shape
    N = B.shape[1]
    C = np.zeros((M, N))
    compute_cycles = M + N + K - 1
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
    return C, compute_cycles, busy
""",
        # ignores the skew: every PE does its K MACs in K cycles
        """def os_matmul(A, B):
    M, K = A.shape
    N = B.shape[1]
    C = np.zeros((M, N))
    busy = []
    for t in range(K):
        C += np.outer(A[:, t], B[t, :])
        busy.append(M * N)
    return C, K, busy
""",
        # stops one cycle early: the last MAC (PE (M-1, N-1), k = K-1) never happens
        """def os_matmul(A, B):
    M, K = A.shape
    N = B.shape[1]
    C = np.zeros((M, N))
    compute_cycles = M + N + K - 3
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
    return C, compute_cycles, busy
""",
    ],
    "ex3_tiled": [
        # forgets the drain
        """def tiled_cycles(M, K, N, P):
    total = 0
    for i0 in range(0, M, P):
        rows = min(P, M - i0)
        for j0 in range(0, N, P):
            cols = min(P, N - j0)
            total += rows + cols + K - 2
    return total
""",
        # charges every tile as a full P x P tile
        """import math

def tiled_cycles(M, K, N, P):
    tiles = math.ceil(M / P) * math.ceil(N / P)
    return tiles * (P + P + K - 2 + P)
""",
        # drains one cycle per column instead of per row
        """def tiled_cycles(M, K, N, P):
    total = 0
    for i0 in range(0, M, P):
        rows = min(P, M - i0)
        for j0 in range(0, N, P):
            cols = min(P, N - j0)
            total += rows + cols + K - 2 + cols
    return total
""",
    ],
    "ex4_quantize": [
        # truncates instead of rounding
        """def quantize_int8(x):
    x = x.double()
    peak = float(x.abs().max())
    scale = peak / 127 if peak > 0 else 1.0
    q = torch.clamp(x / scale, -127, 127).to(torch.int8)
    return q, scale


def int8_matmul_error(a, b):
    qa, sa = quantize_int8(a)
    qb, sb = quantize_int8(b)
    approx = (qa.to(torch.int32) @ qb.to(torch.int32)).double() * (sa * sb)
    exact = a.double() @ b.double()
    return float(torch.linalg.norm(approx - exact) / torch.linalg.norm(exact))
""",
        # scale for 128 levels, and accumulates in int16
        """def quantize_int8(x):
    x = x.double()
    peak = float(x.abs().max())
    scale = peak / 128 if peak > 0 else 1.0
    q = torch.clamp(torch.round(x / scale), -128, 127).to(torch.int8)
    return q, scale


def int8_matmul_error(a, b):
    qa, sa = quantize_int8(a)
    qb, sb = quantize_int8(b)
    approx = (qa.to(torch.int16) @ qb.to(torch.int16)).double() * (sa * sb)
    exact = a.double() @ b.double()
    return float(torch.linalg.norm(approx - exact) / torch.linalg.norm(exact))
""",
        # right quantization, but rescales by scale_a only
        """def quantize_int8(x):
    x = x.double()
    peak = float(x.abs().max())
    scale = peak / 127 if peak > 0 else 1.0
    q = torch.clamp(torch.round(x / scale), -127, 127).to(torch.int8)
    return q, scale


def int8_matmul_error(a, b):
    qa, sa = quantize_int8(a)
    qb, sb = quantize_int8(b)
    approx = (qa.to(torch.int32) @ qb.to(torch.int32)).double() * sa
    exact = a.double() @ b.double()
    return float(torch.linalg.norm(approx - exact) / torch.linalg.norm(exact))
""",
        # divides by zero for an all-zero tensor (no special case)
        """def quantize_int8(x):
    x = x.double()
    scale = float(x.abs().max()) / 127
    q = torch.clamp(torch.round(x / scale), -127, 127).to(torch.int8)
    return q, scale


def int8_matmul_error(a, b):
    qa, sa = quantize_int8(a)
    qb, sb = quantize_int8(b)
    approx = (qa.to(torch.int32) @ qb.to(torch.int32)).double() * (sa * sb)
    exact = a.double() @ b.double()
    return float(torch.linalg.norm(approx - exact) / torch.linalg.norm(exact))
""",
    ],
    "ex5_format": [
        # bfloat16 first: loses float16's precision when both fit
        """def pick_format(max_abs, min_abs):
    for name in ("bfloat16", "float16", "float32", "float64"):
        info = torch.finfo(getattr(torch, name))
        if max_abs <= info.max and min_abs >= info.smallest_normal:
            return name
    raise ValueError("no format holds this range")
""",
        # compares the smallest magnitude with eps instead of the smallest normal
        """def pick_format(max_abs, min_abs):
    for name in ("float16", "bfloat16", "float32", "float64"):
        info = torch.finfo(getattr(torch, name))
        if max_abs <= info.max and min_abs >= info.eps:
            return name
    raise ValueError("no format holds this range")
""",
        # strict comparison: rejects float16's own maximum
        """def pick_format(max_abs, min_abs):
    for name in ("float16", "bfloat16", "float32", "float64"):
        info = torch.finfo(getattr(torch, name))
        if max_abs < info.max and min_abs > info.smallest_normal:
            return name
    raise ValueError("no format holds this range")
""",
    ],
}
