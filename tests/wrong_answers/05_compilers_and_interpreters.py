# format: edits
"""Plausible wrong answers for lesson 05's exercises; each must lose points.

Each wrong answer is the edit it makes to the reference solution cell (the cell with its
``### BEGIN/END SOLUTION`` lines removed): ``(old, new)`` replaces the one occurrence of
``old``; a list of pairs makes several edits in order. The comment above says the mistake.
"""

WRONG_ANSWERS = {
    'ex1_branchless': [
        # keeps the Python if: correct in eager mode, frozen by the tracer
        ("""top = x.max()
    return torch.where(top > 1, x / top, x * 2)""", """if x.max() > 1:
        return x / x.max()
    return x * 2"""),
        # >= instead of >: an input whose maximum is exactly 1 is normalised instead of doubled
        ('    return torch.where(top > 1, x / top, x * 2)', '    return torch.where(top >= 1, x / top, x * 2)'),
        # branches swapped
        ('/ top, x * 2)', '* 2, x / top)'),
    ],
    'ex2_disagree': [
        # traces on each input instead of the example: the trace always agrees
        ("""traced = torch.jit.trace(fn, example)
    return [i for i, x in enumerate(inputs) if not torch.allclose(traced(x),""", 'return [i for i, x in enumerate(inputs) if not torch.allclose(torch.jit.trace(fn, x)(x),'),
        # returns the indices where they agree
        ('not torch.allclose(traced(x),', 'torch.allclose(traced(x),'),
        # counts from 1
        ('    return [i for i, x in enumerate(inputs) if not torch.allclose(traced(x), fn(x))]', '    return [i + 1 for i, x in enumerate(inputs) if not torch.allclose(traced(x), fn(x))]'),
    ],
    'ex3_speedup': [
        # leaves the compile time out of the speedup
        ('calls * eager_s / (compile_s + calls * compiled_s)', 'eager_s / compiled_s'),
        # break-even divides by the compiled time instead of the time saved per call
        ("""saved = eager_s - compiled_s
    return compile_s / saved if saved > 0 else math.inf""", 'return compile_s / compiled_s'),
        # inverted ratio (compiled over eager)
        ('calls * eager_s / (compile_s + calls * compiled_s)', '(compile_s + calls * compiled_s) / (calls * eager_s)'),
    ],
    'ex4_measure': [
        # the first call is included in the median's list and the first call is not timed apart
        ("""def measure_compiled(fn, repeat=5):
    start = time.perf_counter()
    fn()
    first = time.perf_counter() - start
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return first, statistics.median(times)""", """def measure_compiled(fn, repeat=5):
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times[0], statistics.median(times)"""),
        # mean instead of median: one hiccup moves it
        ('statistics.median(times)', 'statistics.mean(times)'),
        # milliseconds instead of seconds
        [('    first = time.perf_counter() - start', '    first = (time.perf_counter() - start) * 1e3'),
         ('times.append(time.perf_counter() - start)', 'times.append((time.perf_counter() - start) * 1e3)')],
    ],
    'ex5_export': [
        # the Python if: torch.export refuses it
        ('return torch.cond(x.max() > 1, lambda v: v / v.max(), lambda v: v * 2, (x,))', """if x.max() > 1:
            return x / x.max()
        return x * 2"""),
        # branches of torch.cond swapped
        ('/ v.max(), lambda v: v * 2,', '* 2, lambda v: v / v.max(),'),
    ],
}
