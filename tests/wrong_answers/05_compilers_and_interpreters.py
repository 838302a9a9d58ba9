"""Plausible wrong answers for lesson 05's exercises; each must lose points."""

WRONG_ANSWERS = {
    "ex1_branchless": [
        # keeps the Python if: correct in eager mode, frozen by the tracer
        """def scale_branchless(x):
    if x.max() > 1:
        return x / x.max()
    return x * 2
""",
        # >= instead of >: an input whose maximum is exactly 1 is normalised instead of doubled
        """def scale_branchless(x):
    top = x.max()
    return torch.where(top >= 1, x / top, x * 2)
""",
        # branches swapped
        """def scale_branchless(x):
    top = x.max()
    return torch.where(top > 1, x * 2, x / top)
""",
    ],
    "ex2_disagree": [
        # traces on each input instead of the example: the trace always agrees
        """def trace_disagreements(fn, example, inputs):
    return [i for i, x in enumerate(inputs) if not torch.allclose(torch.jit.trace(fn, x)(x), fn(x))]
""",
        # returns the indices where they agree
        """def trace_disagreements(fn, example, inputs):
    traced = torch.jit.trace(fn, example)
    return [i for i, x in enumerate(inputs) if torch.allclose(traced(x), fn(x))]
""",
        # counts from 1
        """def trace_disagreements(fn, example, inputs):
    traced = torch.jit.trace(fn, example)
    return [i + 1 for i, x in enumerate(inputs) if not torch.allclose(traced(x), fn(x))]
""",
    ],
    "ex3_speedup": [
        # leaves the compile time out of the speedup
        """def speedup_including_compile(eager_s, compiled_s, compile_s, calls):
    return eager_s / compiled_s


def break_even_calls(eager_s, compiled_s, compile_s):
    saved = eager_s - compiled_s
    return compile_s / saved if saved > 0 else math.inf
""",
        # break-even divides by the compiled time instead of the time saved per call
        """def speedup_including_compile(eager_s, compiled_s, compile_s, calls):
    return calls * eager_s / (compile_s + calls * compiled_s)


def break_even_calls(eager_s, compiled_s, compile_s):
    return compile_s / compiled_s
""",
        # inverted ratio (compiled over eager)
        """def speedup_including_compile(eager_s, compiled_s, compile_s, calls):
    return (compile_s + calls * compiled_s) / (calls * eager_s)


def break_even_calls(eager_s, compiled_s, compile_s):
    saved = eager_s - compiled_s
    return compile_s / saved if saved > 0 else math.inf
""",
    ],
    "ex4_measure": [
        # the first call is included in the median's list and the first call is not timed apart
        """def measure_compiled(fn, repeat=5):
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times[0], statistics.median(times)
""",
        # mean instead of median: one hiccup moves it
        """def measure_compiled(fn, repeat=5):
    start = time.perf_counter()
    fn()
    first = time.perf_counter() - start
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return first, statistics.mean(times)
""",
        # milliseconds instead of seconds
        """def measure_compiled(fn, repeat=5):
    start = time.perf_counter()
    fn()
    first = (time.perf_counter() - start) * 1e3
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return first, statistics.median(times)
""",
    ],
    "ex5_export": [
        # the Python if: torch.export refuses it
        """class ExportableScale(nn.Module):
    def forward(self, x):
        if x.max() > 1:
            return x / x.max()
        return x * 2
""",
        # branches of torch.cond swapped
        """class ExportableScale(nn.Module):
    def forward(self, x):
        return torch.cond(x.max() > 1, lambda v: v * 2, lambda v: v / v.max(), (x,))
""",
    ],
}
