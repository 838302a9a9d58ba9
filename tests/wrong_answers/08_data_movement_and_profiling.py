# format: edits
"""Plausible wrong answers for lesson 08's exercises; each must lose points.

Each wrong answer is the edit it makes to the reference solution cell (the cell with its
``### BEGIN/END SOLUTION`` lines removed): ``(old, new)`` replaces the one occurrence of
``old``; a list of pairs makes several edits in order. The comment above says the mistake.
"""

WRONG_ANSWERS = {
    'ex1_conv_flops': [
        # counts MACs, not FLOPs (forgets the factor 2)
        ("""macs = batch * c_out * h_out * w_out * c_in * kernel * kernel
    return 2 * macs""", 'return batch * c_out * h_out * w_out * c_in * kernel * kernel'),
        # uses the input size instead of the output size
        ("""h_out = (height + 2 * padding - kernel) // stride + 1
    w_out = (width + 2 * padding - kernel) // stride + 1
    macs = batch * c_out * h_out * w_out * c_in * kernel * kernel
    return 2 * macs""", 'return 2 * batch * c_out * height * width * c_in * kernel * kernel'),
        # forgets the padding in the output size
        ("""+ 2 * padding - kernel) // stride + 1
    w_out = (width + 2 * padding - kernel) // stride + 1
    macs = batch * c_out * h_out * w_out * c_in * kernel * kernel
    return 2 * macs""", """- kernel) // stride + 1
    w_out = (width - kernel) // stride + 1
    return 2 * batch * c_out * h_out * w_out * c_in * kernel * kernel"""),
        # ignores the stride
        ("""(height + 2 * padding - kernel) // stride + 1
    w_out = (width + 2 * padding - kernel) // stride + 1
    macs = batch * c_out * h_out * w_out * c_in * kernel * kernel
    return 2 * macs""", """height + 2 * padding - kernel + 1
    w_out = width + 2 * padding - kernel + 1
    return 2 * batch * c_out * h_out * w_out * c_in * kernel * kernel"""),
    ],
    'ex2_linear_ws': [
        # forgets the bias
        ("""inputs = batch * in_features
    outputs = batch * out_features
    weights = in_features * out_features + out_features
    return (inputs + outputs + weights)""", 'return (batch * in_features + batch * out_features + in_features * out_features)'),
        # counts values, not bytes
        ("""inputs = batch * in_features
    outputs = batch * out_features
    weights = in_features * out_features + out_features
    return (inputs + outputs + weights) * bytes_per_value""", 'return batch * in_features + batch * out_features + in_features * out_features + out_features'),
        # counts the weights once per sample
        ("""inputs = batch * in_features
    outputs = batch * out_features
    weights = in_features * out_features + out_features
    return (inputs + outputs + weights)""", """per_sample = in_features + out_features + in_features * out_features + out_features
    return batch * per_sample"""),
    ],
    'ex3_budget': [
        # forgets the optimizer state
        ("""split_at_one.gradients + split_at_one.optimizer_state
    if budget < fixed + split_at_one.activations:
        return 0
    return (budget - fixed) // split_at_one.activations""", """split_at_one.gradients
    return max(0, (budget - fixed) // split_at_one.activations)"""),
        # rounds up: one sample too many
        [('def largest_batch(split_at_one, budget):', """import math


def largest_batch(split_at_one, budget):"""),
         ("""if budget < fixed + split_at_one.activations:
        return 0
    return (budget - fixed) // split_at_one.activations""", 'return max(0, math.ceil((budget - fixed) / split_at_one.activations))')],
        # divides the whole budget by the per-sample total
        ("""fixed = split_at_one.parameters + split_at_one.gradients + split_at_one.optimizer_state
    if budget < fixed + split_at_one.activations:
        return 0
    return (budget - fixed) // split_at_one.activations""", """per_sample = (split_at_one.parameters + split_at_one.gradients + split_at_one.optimizer_state
                  + split_at_one.activations)
    return budget // per_sample"""),
        # negative result when even the weights do not fit
        ("""def largest_batch(split_at_one, budget):
    fixed = split_at_one.parameters + split_at_one.gradients + split_at_one.optimizer_state
    if budget < fixed + split_at_one.activations:
        return 0
    return (budget - fixed) // split_at_one.activations""", """def largest_batch(split_at_one, budget):
    fixed = split_at_one.parameters + split_at_one.gradients + split_at_one.optimizer_state
    return (budget - fixed) // split_at_one.activations"""),
    ],
    'ex4_starved': [
        # the share of time spent computing instead of waiting
        ("""record in records.items()
                  if record.data_seconds / record.seconds""", 'r in records.items() if (r.seconds - r.data_seconds) / r.seconds'),
        # at or above instead of above
        ("""record in records.items()
                  if record.data_seconds / record.seconds >""", 'r in records.items() if r.data_seconds / r.seconds >='),
        # not sorted
        ("""sorted(name for name, record in records.items()
                  if record.data_seconds / record.seconds > threshold)""", '[name for name, r in records.items() if r.data_seconds / r.seconds > threshold]'),
        # absolute waiting seconds compared with the threshold
        ("""record in records.items()
                  if record.data_seconds / record.seconds""", 'r in records.items() if r.data_seconds'),
    ],
    'ex5_estimate': [
        # mean instead of median
        ('statistics.median(step_seconds[warmup:])', 'statistics.mean(step_seconds[warmup:])'),
        # keeps the warm-up steps
        ('statistics.median(step_seconds[warmup:])', 'statistics.median(step_seconds)'),
        # drops one step too many
        ('statistics.median(step_seconds[warmup:])', 'statistics.median(step_seconds[warmup + 1:])'),
    ],

    "ex6_bottleneck": [
        # ranks operators by their whole duration (inclusive of the operators they call), not self time
        ('        if enclosing:\n            self_us[enclosing[-1]["name"]] -= op["dur"]\n', ""),
        # calls a data range as long as the step "data" (starved means longer, not as long)
        ('if in_range["data"] > in_range["step"]', 'if in_range["data"] >= in_range["step"]'),
        # ranks the record_function ranges ("step", "data") as if they were operators
        ('if e["cat"] == "cpu_op"', 'if e["cat"] in ("cpu_op", "user_annotation")'),
        # ignores threads: operators of two threads that overlap in time are taken as nested
        [('key=lambda e: (e["tid"], e["ts"], -e["dur"])', 'key=lambda e: (e["ts"], -e["dur"])'),
         ('(enclosing[-1]["tid"] != op["tid"]\n                             or enclosing[-1]["ts"]',
          '(enclosing[-1]["ts"]')],
        # subtracts an operator's time from every operator around it, not only its direct caller
        ('            self_us[enclosing[-1]["name"]] -= op["dur"]',
         '            for outer in enclosing:\n                self_us[outer["name"]] -= op["dur"]'),
        # the closest library functions: course_lib.trace ranks operators by inclusive time
        ('''    complete = [e for e in events if e.get("ph") == "X"]''',
         '''    from course_lib import trace

    loaded = trace.load_trace({"traceEvents": events}).events
    seconds = trace.summarise_ranges(loaded).seconds
    if seconds.get("data", 0.0) > seconds.get("step", 0.0):
        return "data"
    return trace.summarise_ops(loaded)[0].name
    complete = [e for e in events if e.get("ph") == "X"]'''),
    ],
    "ex7_flop_rate": [
        # counts multiply-adds, not FLOPs (forgets the factor 2)
        ("return 2 * m * k * n", "return m * k * n"),
        # reads the durations as milliseconds (the Chrome trace's unit is the microsecond)
        ("* 1e-6", "* 1e-3"),
        # takes the first matrix product in the list, not the longest
        ('top = max(products, key=lambda e: e["dur"])', "top = products[0]"),
        # counts aten::linear too: its inputs are x and the weight (n x k), not two factors
        ('("aten::mm", "aten::addmm")', '("aten::mm", "aten::addmm", "aten::linear")'),
        # takes the first two input shapes: for addmm the first one is the bias
        ('''matrices = [shape for shape in top["args"]["Input Dims"] if len(shape) == 2]
    (m, k), (_, n) = matrices[-2], matrices[-1]''', '(m, k), (_, n) = top["args"]["Input Dims"][:2]'),
    ],
}
