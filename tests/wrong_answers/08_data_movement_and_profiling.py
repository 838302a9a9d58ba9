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
}
