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
        # the library's chooser: it asks torch.accelerator, not torch.cuda.is_available()
        ('return torch.device("cuda" if torch.cuda.is_available() else "cpu")',
         'from course_lib.devices import default_device\n    return default_device()'),
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
        ('statistics.median(samples)', 'statistics.mean(samples)'),
        # forgets the warm-up calls
        ("""    for _ in range(warmup):
        fn()
""", ""),
        # milliseconds instead of seconds
        ('samples.append(time.perf_counter() - t0)', 'samples.append(1000 * (time.perf_counter() - t0))'),
        # the library's timer instead: it calibrates how many calls make one repeat, so the calls
        # (and the warm-up) are not the ones asked for
        ('    return statistics.median(samples)',
         '    from course_lib.timing import benchmark\n    return benchmark(fn, warmup=warmup, repeat=repeat).median'),
    ],
}
