# format: edits
"""Plausible wrong answers for lesson 05's exercises; each must lose points.

Each wrong answer is the edit it makes to the reference solution cell (the cell with its
``### BEGIN/END SOLUTION`` lines removed): ``(old, new)`` replaces the one occurrence of
``old``; a list of pairs makes several edits in order. The comment above says the mistake.
``LIBRARY_CALLS`` holds, for every solution cell, the shortest answer that calls the closest
``course_lib`` function (what a student who reads the library would submit); it must lose points.
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
        # >= instead of >: an input whose maximum is exactly 1 is predicted on the wrong branch
        ('bool(x.max() > 1) != frozen_branch', 'bool(x.max() >= 1) != frozen_branch'),
        # returns the indices where the trace agrees
        ('bool(x.max() > 1) != frozen_branch', 'bool(x.max() > 1) == frozen_branch'),
        # counts from 1
        ('    return [i for i, x', '    return [i + 1 for i, x'),
        # ignores the example: assumes the trace always froze the 'large' branch
        ('    frozen_branch = bool(example.max() > 1)', '    frozen_branch = True'),
        # traces for real instead of predicting
        ([('    frozen_branch = bool(example.max() > 1)\n', '    traced = torch.jit.trace(scale, example)\n'),
          ('if bool(x.max() > 1) != frozen_branch]', 'if not torch.allclose(traced(x), scale(x))]')]),
    ],
    'ex3_recompiles': [
        # no automatic dynamic: every new size compiles again (torch.compile(dynamic=False)'s behaviour)
        ('            size_dynamic = size_dynamic or size != first_size',
         '            size_dynamic = size_dynamic'),
        # a Python int taken for an input like a tensor: its value is never guarded
        ('None if k_dynamic else k))', 'None))'),
        # every new int compiles again: no automatic dynamic for ints
        ('            k_dynamic = k_dynamic or k != first_k', '            k_dynamic = False'),
        # sizes 0 and 1 taken for any other size once the size is a symbol
        [('(size == s if s is not None else size >= 2)', '(s is None or size == s)'),
         ('None if size_dynamic and size >= 2 else size', 'None if size_dynamic else size')],
        # mark_dynamic forgotten: the first graph guards the first size
        ('    size_dynamic, k_dynamic = mark_dynamic, False', '    size_dynamic, k_dynamic = False, False'),
    ],
    'ex4_measure': [
        # the overhead paid once per chain, not once per operator
        ('[[n_ops, n_ops * elements] for', '[[1, n_ops * elements] for'),
        # the per-element cost paid once per chain: only the overhead multiplied by the operators
        ('[[n_ops, n_ops * elements] for', '[[n_ops, elements] for'),
        # the chain's length ignored: a chain fitted as if it were one operator
        ('[[n_ops, n_ops * elements] for', '[[1, elements] for'),
        # no overhead: every second put on the elements (the largest measurement divided by its elements)
        ('    return overhead_s, per_element_s',
         '    n_ops, elements, s = max(measured, key=lambda m: m[0] * m[1])\n    return 0.0, s / (n_ops * elements)'),
        # the two costs returned in the wrong order
        ('    return overhead_s, per_element_s', '    return per_element_s, overhead_s'),
        # not least squares: the two costs solved exactly from the first two measurements, the rest ignored
        ('torch.linalg.lstsq(design, seconds, driver="gelsd").solution', 'torch.linalg.solve(design[:2], seconds[:2])'),
    ],
    'ex5_export': [
        # the Python if: torch.export refuses it
        ('return torch.cond(x.max() > 1, lambda v: v / v.max(), lambda v: v * 2, (x,))', """if x.max() > 1:
            return x / x.max()
        return x * 2"""),
        # branches of torch.cond swapped
        ('/ v.max(), lambda v: v * 2,', '* 2, lambda v: v / v.max(),'),
    ],
    'ex6_one_graph': [
        # keeps the Python if on the tensor peak: right outputs, but Dynamo breaks the graph at the jump
        ('    return torch.tanh(torch.where(peak > limit, x * (limit / peak), x))',
         '    if peak > limit:\n        x = x * (limit / peak)\n    return torch.tanh(x)'),
        # the largest value instead of the largest magnitude: a large negative entry is not clipped
        ('    peak = x.abs().max()', '    peak = x.max()'),
        # rescales every input, also those already under the limit
        ('torch.where(peak > limit, x * (limit / peak), x)', 'x * (limit / peak)'),
        # the limit fixed at 1
        ('torch.where(peak > limit, x * (limit / peak), x)', 'torch.where(peak > 1, x / peak, x)'),
    ],
}

LIBRARY_CALLS = {
    # compilers.script keeps the if: its trace is right, but it is a call into TorchScript, not tensor ops
    'ex1_branchless': ("""    top = x.max()
    return torch.where(top > 1, x / top, x * 2)""", """    return compilers.script(scale)(x)"""),
    # compilers.disagreements on a real trace: right indices, but it traces and calls scale
    'ex2_disagree': ("""    frozen_branch = bool(example.max() > 1)
    return [i for i, x in enumerate(inputs) if bool(x.max() > 1) != frozen_branch]""",
                     """    return compilers.disagreements(scale, compilers.trace(scale, example), inputs)"""),
    # compilers.count_compiles measures the sequence instead of predicting it (switched off while the tests
    # run predicted_compiles)
    'ex3_recompiles': ('    graphs, after = [], []',
                       '    args = [(torch.randn(size), k) for size, k in calls]\n'
                       '    if mark_dynamic:\n'
                       '        torch._dynamo.mark_dynamic(args[0][0], 0)\n'
                       '    return compilers.count_compiles(affine, args).compiles_after_call\n'
                       '    graphs, after = [], []'),
    # compilers.dispatch_overhead measures one operator on this machine instead of fitting the measurements given
    'ex4_measure': ('    design = torch.tensor(',
                    '    (_, small), (large_elements, large) = compilers.dispatch_overhead(sizes=(1, 2**16))\n'
                    '    return small, (large - small) / large_elements\n'
                    '    design = torch.tensor('),
    # compilers.script(scale) inside forward: torch.export cannot guard on its data-dependent branch
    'ex5_export': ('        return torch.cond(x.max() > 1, lambda v: v / v.max(), lambda v: v * 2, (x,))',
                   '        return compilers.script(scale)(x)'),
    # compilers.quiet(soft_clip, ...): the given function, its .item() graph break included
    'ex6_one_graph': ('    peak = x.abs().max()\n'
                      '    return torch.tanh(torch.where(peak > limit, x * (limit / peak), x))',
                      '    return compilers.quiet(soft_clip, x, limit)'),
}
