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
        ('torch.device("cuda" if torch.cuda.is_available() else "cpu")',
         '"cuda" if torch.cuda.is_available() else "cpu"'),
        # decided once, from this machine, not from torch.cuda.is_available() at call time
        ('torch.device("cuda" if torch.cuda.is_available() else "cpu")', 'torch.device("cpu")'),
        # tests the wrong thing: whether CUDA was compiled in, not whether a GPU is usable
        ('torch.cuda.is_available()', 'torch.backends.cuda.is_built()'),
    ],
    'ex3_training': [
        # the rule of thumb: backward = 2 x forward for every layer, the first layer's input gradient included
        [('        if i >= frozen:\n            total += flops ', '        if True:\n            total += flops '),
         ('        if i > frozen:\n', '        if i >= frozen:\n')],
        # frozen layers ignored: every weight gradient and every input gradient but the first counted
        [('        if i >= frozen:\n            total += flops ', '        if True:\n            total += flops '),
         ('        if i > frozen:\n', '        if i > 0:\n')],
        # a frozen layer skips its weight gradient but still computes its input's
        ('        if i > frozen:\n', '        if i > 0:\n'),
    ],
    'ex4_warmup': [
        # the mean as if the one-off were paid by every call
        ('    return steady_s + one_off_s / calls', '    return steady_s + one_off_s'),
        # the median taken as the steady time even for one or two calls
        ('''    if calls == 1:
        return steady_s + one_off_s
    if calls == 2:
        return steady_s + one_off_s / 2
    return steady_s''', '    return steady_s'),
        # rounds the number of calls down: the mean is then still too far off
        ('math.ceil(one_off_s / (tolerance * steady_s) - 1e-9)', 'int(one_off_s / (tolerance * steady_s))'),
        # tolerance read as an absolute time in seconds, not a fraction of the steady time
        ('(tolerance * steady_s)', 'tolerance'),
    ],
}

# The shortest answer a student who reads course_lib would submit: the reference solution
# replaced by a call into the closest library function. Each must lose points.
LIBRARY_CALLS = {
    # attention.score_matrix_bytes counts an N x N matrix: right only for square 2-D shapes
    'ex1_nbytes': ('''    count = 1
    for size in shape:
        count *= int(size)
    return count * np.dtype(dtype).itemsize''', '''    from course_lib.attention import score_matrix_bytes
    return score_matrix_bytes(shape[0], element_bytes=np.dtype(dtype).itemsize)'''),
    # the library's chooser asks torch.accelerator, not torch.cuda.is_available()
    'ex2_device': ('return torch.device("cuda" if torch.cuda.is_available() else "cpu")',
                   'from course_lib.devices import default_device\n    return default_device()'),
    # activation_checkpointing.step_flops counts a real step with FlopCounterMode: switched off while the
    # tests run step_flops (a prediction, not a count)
    'ex3_training': ('    products = [2 * batch',
                     '    from course_lib.activation_checkpointing import step_flops as counted\n'
                     '    layers = []\n'
                     '    for i, (a, b) in enumerate(zip(widths, widths[1:])):\n'
                     '        layers += [torch.nn.Linear(a, b)] + ([torch.nn.ReLU()] if i < len(widths) - 2 else [])\n'
                     '    for layer in layers[::2][:frozen]:\n'
                     '        layer.requires_grad_(False)\n'
                     '    class Model(torch.nn.Sequential):\n'
                     '        def forward(self, x, checkpointed=None):\n'
                     '            return super().forward(x)\n'
                     '    return counted(Model(*layers), torch.randn(batch, widths[0]))\n'
                     '    products = [2 * batch'),
    # timing.benchmark measures a stand-in with warm-up: it reports the steady time, not the mean a
    # timer without warm-up would show
    'ex4_warmup': ('    return steady_s + one_off_s / calls',
                   '    import time\n    from course_lib.timing import benchmark\n'
                   '    return benchmark(lambda: time.sleep(steady_s), repeat=calls).median'),
}
