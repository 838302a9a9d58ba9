"""Plausible wrong answers for lesson 00's exercises; each must lose points."""

WRONG_ANSWERS = {
    "ex1_nbytes": [
        # counts elements, forgets the bytes per element
        """def nbytes(shape, dtype):
    count = 1
    for size in shape:
        count *= int(size)
    return count
""",
        # adds the dimensions instead of multiplying them
        """def nbytes(shape, dtype):
    return sum(shape) * np.dtype(dtype).itemsize
""",
        # treats a scalar (shape ()) as holding no element
        """def nbytes(shape, dtype):
    count = 0 if len(shape) == 0 else 1
    for size in shape:
        count *= int(size)
    return count * np.dtype(dtype).itemsize
""",
    ],
    "ex2_device": [
        # a string, not a torch.device
        """def pick_device():
    return "cuda" if torch.cuda.is_available() else "cpu"
""",
        # decided once, from this machine, not from torch.cuda.is_available() at call time
        """def pick_device():
    return torch.device("cpu")
""",
        # tests the wrong thing: whether CUDA was compiled in, not whether a GPU is usable
        """def pick_device():
    return torch.device("cuda" if torch.backends.cuda.is_built() else "cpu")
""",
    ],
    "ex3_training": [
        # forward pass only: forgets the backward pass costs about twice a forward
        """def training_seconds(forward_flops, samples, epochs, flops_per_second):
    return forward_flops * samples * epochs / flops_per_second
""",
        # forgets the epochs
        """def training_seconds(forward_flops, samples, epochs, flops_per_second):
    return 3 * forward_flops * samples / flops_per_second
""",
        # answers in hours instead of seconds
        """def training_seconds(forward_flops, samples, epochs, flops_per_second):
    return 3 * forward_flops * samples * epochs / flops_per_second / 3600
""",
    ],
    "ex4_timer": [
        # the mean instead of the median: one outlier drags it
        """import time
import statistics

def robust_time(fn, warmup=2, repeat=5):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.mean(times)
""",
        # forgets the warm-up calls
        """import time
import statistics

def robust_time(fn, warmup=2, repeat=5):
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)
""",
        # milliseconds instead of seconds
        """import time
import statistics

def robust_time(fn, warmup=2, repeat=5):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(1000 * (time.perf_counter() - start))
    return statistics.median(times)
""",
    ],
}
