"""course_lib.mixed_precision: float16 without loss scaling loses the small gradients; a scaler keeps them."""
import torch

from course_lib import mixed_precision


def test_fp16_gradients_underflow_and_loss_scaling_recovers_them():
    x, y = mixed_precision.make_task()
    model = mixed_precision.make_model()
    plain = mixed_precision.underflow_count(model, x, y)
    scaled = mixed_precision.underflow_count(model, x, y, scale=2.0 ** 16)
    assert plain["fraction"] > 0.9 and scaled["underflowed"] == 0
    assert plain["nonzero_fp32"] == scaled["nonzero_fp32"] > 1000
    # the float32 gradients that vanish are those below float16's smallest subnormal (about 6e-8)
    assert float(plain["fp32"].abs().median()) < 2.0 ** -24


def test_training_modes_short_run():
    task = mixed_precision.make_task()
    runs = {m: mixed_precision.train(m, steps=40, task=task) for m in mixed_precision.MODES}
    assert runs["fp16"]["zero_fraction"][0] > 0.9 and max(runs["fp16+scaler"]["zero_fraction"]) == 0.0
    assert abs(runs["fp16+scaler"]["losses"][-1] / runs["fp32"]["losses"][-1] - 1) < 0.05
    assert abs(runs["bf16"]["losses"][-1] / runs["fp32"]["losses"][-1] - 1) < 0.1
    scales = runs["fp16+scaler"]["scales"]
    assert scales[0] == 2.0 ** 16 and scales[-1] > scales[0] and runs["fp32"]["scales"][0] is None
    assert torch.is_tensor(task[0]) and len(runs["bf16"]["losses"]) == 40
