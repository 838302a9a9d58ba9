# format: edits
"""Plausible wrong answers for lesson 00's exercises; each must lose points.

Each wrong answer is the edit it makes to the reference solution cell (the cell with its
``### BEGIN/END SOLUTION`` lines removed): ``(old, new)`` replaces the one occurrence of
``old``; a list of pairs makes several edits in order. The comment above says the mistake.
"""

WRONG_ANSWERS = {
    'ex1_nbytes': [
        # counts elements, forgets the bytes per element
        ('count * np.dtype(dtype).itemsize', 'count'),
        # adds the dimensions instead of multiplying them
        ("""count = 1
    for size in shape:
        count *= int(size)
    return count""", 'return sum(shape)'),
        # treats a scalar (shape ()) as holding no element
        ('    count = 1', '    count = 0 if len(shape) == 0 else 1'),
    ],
    'ex2_device': [
        # a string, not a torch.device
        ('torch.device("cuda" if torch.cuda.is_available() else "cpu")', '"cuda" if torch.cuda.is_available() else "cpu"'),
        # decided once, from this machine, not from torch.cuda.is_available() at call time
        ('torch.device("cuda" if torch.cuda.is_available() else "cpu")', 'torch.device("cpu")'),
        # tests the wrong thing: whether CUDA was compiled in, not whether a GPU is usable
        ('torch.cuda.is_available()', 'torch.backends.cuda.is_built()'),
    ],
    'ex3_training': [
        # forward pass only: forgets the backward pass costs about twice a forward
        ('3 * forward_flops', 'forward_flops'),
        # forgets the epochs
        ('* epochs /', '/'),
        # answers in hours instead of seconds
        ('    return 3 * forward_flops * samples * epochs / flops_per_second', '    return 3 * forward_flops * samples * epochs / flops_per_second / 3600'),
    ],
    'ex4_timer': [
        # the mean instead of the median: one outlier drags it
        ('statistics.median(times)', 'statistics.mean(times)'),
        # forgets the warm-up calls
        ("""import time
import statistics

def robust_time(fn, warmup=2, repeat=5):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)""", """import time
import statistics

def robust_time(fn, warmup=2, repeat=5):
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)"""),
        # milliseconds instead of seconds
        ('times.append(time.perf_counter() - start)', 'times.append(1000 * (time.perf_counter() - start))'),
    ],
}
