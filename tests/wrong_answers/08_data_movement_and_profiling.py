"""Plausible wrong answers for lesson 08's exercises; each must lose points."""

WRONG_ANSWERS = {
    "ex1_conv_flops": [
        # counts MACs, not FLOPs (forgets the factor 2)
        """def conv2d_flops(batch, c_in, c_out, kernel, height, width, stride=1, padding=0):
    h_out = (height + 2 * padding - kernel) // stride + 1
    w_out = (width + 2 * padding - kernel) // stride + 1
    return batch * c_out * h_out * w_out * c_in * kernel * kernel
""",
        # uses the input size instead of the output size
        """def conv2d_flops(batch, c_in, c_out, kernel, height, width, stride=1, padding=0):
    return 2 * batch * c_out * height * width * c_in * kernel * kernel
""",
        # forgets the padding in the output size
        """def conv2d_flops(batch, c_in, c_out, kernel, height, width, stride=1, padding=0):
    h_out = (height - kernel) // stride + 1
    w_out = (width - kernel) // stride + 1
    return 2 * batch * c_out * h_out * w_out * c_in * kernel * kernel
""",
        # ignores the stride
        """def conv2d_flops(batch, c_in, c_out, kernel, height, width, stride=1, padding=0):
    h_out = height + 2 * padding - kernel + 1
    w_out = width + 2 * padding - kernel + 1
    return 2 * batch * c_out * h_out * w_out * c_in * kernel * kernel
""",
    ],
    "ex2_linear_ws": [
        # forgets the bias
        """def linear_working_set(batch, in_features, out_features, bytes_per_value=4):
    return (batch * in_features + batch * out_features + in_features * out_features) * bytes_per_value
""",
        # counts values, not bytes
        """def linear_working_set(batch, in_features, out_features, bytes_per_value=4):
    return batch * in_features + batch * out_features + in_features * out_features + out_features
""",
        # counts the weights once per sample
        """def linear_working_set(batch, in_features, out_features, bytes_per_value=4):
    per_sample = in_features + out_features + in_features * out_features + out_features
    return batch * per_sample * bytes_per_value
""",
    ],
    "ex3_budget": [
        # forgets the optimizer state
        """def largest_batch(split_at_one, budget):
    fixed = split_at_one.parameters + split_at_one.gradients
    return max(0, (budget - fixed) // split_at_one.activations)
""",
        # rounds up: one sample too many
        """import math


def largest_batch(split_at_one, budget):
    fixed = split_at_one.parameters + split_at_one.gradients + split_at_one.optimizer_state
    return max(0, math.ceil((budget - fixed) / split_at_one.activations))
""",
        # divides the whole budget by the per-sample total
        """def largest_batch(split_at_one, budget):
    per_sample = (split_at_one.parameters + split_at_one.gradients + split_at_one.optimizer_state
                  + split_at_one.activations)
    return budget // per_sample
""",
        # negative result when even the weights do not fit
        """def largest_batch(split_at_one, budget):
    fixed = split_at_one.parameters + split_at_one.gradients + split_at_one.optimizer_state
    return (budget - fixed) // split_at_one.activations
""",
    ],
    "ex4_starved": [
        # the share of time spent computing instead of waiting
        """def starved(records, threshold=0.5):
    return sorted(name for name, r in records.items() if (r.seconds - r.data_seconds) / r.seconds > threshold)
""",
        # at or above instead of above
        """def starved(records, threshold=0.5):
    return sorted(name for name, r in records.items() if r.data_seconds / r.seconds >= threshold)
""",
        # not sorted
        """def starved(records, threshold=0.5):
    return [name for name, r in records.items() if r.data_seconds / r.seconds > threshold]
""",
        # absolute waiting seconds compared with the threshold
        """def starved(records, threshold=0.5):
    return sorted(name for name, r in records.items() if r.data_seconds > threshold)
""",
    ],
    "ex5_estimate": [
        # mean instead of median
        """import statistics


def estimate_seconds(step_seconds, warmup, steps_per_epoch, epochs):
    return statistics.mean(step_seconds[warmup:]) * steps_per_epoch * epochs
""",
        # keeps the warm-up steps
        """import statistics


def estimate_seconds(step_seconds, warmup, steps_per_epoch, epochs):
    return statistics.median(step_seconds) * steps_per_epoch * epochs
""",
        # drops one step too many
        """import statistics


def estimate_seconds(step_seconds, warmup, steps_per_epoch, epochs):
    return statistics.median(step_seconds[warmup + 1:]) * steps_per_epoch * epochs
""",
    ],
}
