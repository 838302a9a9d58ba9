import io

import pytest
import torch
from torch import nn

from course_lib import data, train
from course_lib.models import BasicFCModel, LeNet


def separable_loader(size=256, batch_size=32, seed=0):
    """Two classes told apart by the sign of the mean pixel: learnable in a few steps."""
    gen = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 2, (size,), generator=gen)
    x = torch.randn(size, 1, 28, 28, generator=gen) * 0.5 + (y.float() * 2 - 1).view(-1, 1, 1, 1)
    return data.make_loader(torch.utils.data.TensorDataset(x, y), batch_size=batch_size)


def test_train_lowers_the_loss_and_records_history():
    torch.manual_seed(0)
    model = BasicFCModel(hidden=16, num_classes=2)
    history = train.train(model, separable_loader(), epochs=3, device="cpu", progress=False)
    assert [e.epoch for e in history.epochs] == [1, 2, 3]
    assert len(history.step_losses) == 3 * 8
    assert history.epochs[-1].loss < history.epochs[0].loss
    assert all(e.samples == 256 and e.seconds > 0 for e in history.epochs)
    assert history.seconds == pytest.approx(sum(e.seconds for e in history.epochs))
    assert history.final_loss == history.epochs[-1].loss
    assert history.device == "cpu"
    assert 0 <= history.epochs[0].data_fraction <= 1
    assert train.evaluate(model, separable_loader(seed=1), device="cpu") > 0.9


def test_max_batches_cuts_epochs_short():
    history = train.train(BasicFCModel(hidden=8), separable_loader(), epochs=2, max_batches=3,
                          device="cpu", progress=False)
    assert len(history.step_losses) == 6
    assert history.epochs[0].samples == 96


def test_progress_bar_goes_to_the_given_file_and_can_be_disabled(capsys):
    sink = io.StringIO()
    train.train(BasicFCModel(hidden=8), separable_loader(), device="cpu", file=sink, log_every=2)
    assert "epoch 1/1" in sink.getvalue() and "samples_per_s" in sink.getvalue()
    train.train(BasicFCModel(hidden=8), separable_loader(), device="cpu", progress=False)
    captured = capsys.readouterr()
    assert captured.err == "" and captured.out == ""


def test_custom_optimizer_and_loss_are_used():
    model = BasicFCModel(hidden=8, num_classes=2)
    calls = []

    def loss_fn(out, target):
        calls.append(out.shape)
        return nn.functional.cross_entropy(out, target)

    before = model.fc1.weight.detach().clone()
    sgd = torch.optim.SGD(model.parameters(), lr=0.0)
    train.train(model, separable_loader(), optimizer=sgd, loss_fn=loss_fn, device="cpu",
                progress=False, max_batches=2)
    assert calls == [(32, 2), (32, 2)]
    assert torch.equal(model.fc1.weight, before)  # learning rate 0: nothing moves


def test_data_fraction_shows_a_slow_loader():
    # 30 ms per sample (about 1 s in all) against a few ms of compute per batch: the loader
    # dominates even when a loaded machine makes the first steps slow (5 ms per sample gave a
    # fraction of 0.40 once, under a full test run)
    slow = data.make_loader(data.SlowDataset(data.synthetic_dataset(size=32), 0.03), batch_size=8)
    history = train.train(BasicFCModel(hidden=8), slow, device="cpu", progress=False)
    record = history.epochs[0]
    assert record.data_seconds >= 32 * 0.03
    assert record.data_fraction > 0.5
    assert train.EpochRecord(1, 0.0, 2.0, 10, 1.5).data_fraction == 0.75


def test_evaluate_counts_correct_predictions():
    class Constant(nn.Module):
        def forward(self, x):
            return torch.tensor([[0.0, 1.0]]).expand(len(x), 2)

    x = torch.zeros(10, 1)
    y = torch.tensor([1, 1, 1, 0, 0, 1, 1, 1, 0, 1])
    loader = data.make_loader(torch.utils.data.TensorDataset(x, y), batch_size=4, shuffle=False)
    assert train.evaluate(Constant(), loader, device="cpu") == pytest.approx(0.7)
    assert train.evaluate(Constant(), loader, device="cpu", max_batches=1) == pytest.approx(0.75)


def test_estimate_training_for_extrapolates_and_leaves_the_model_alone():
    loader = data.make_loader(data.synthetic_dataset(size=64), batch_size=4)
    model = LeNet()
    before = model.conv1.weight.detach().clone()
    estimate = train.estimate_training_for(model, loader, epochs=1000, measure_batches=4,
                                           warmup_batches=1, device="cpu")
    assert torch.equal(model.conv1.weight, before)
    assert estimate.batches_per_epoch == 16 and estimate.batch_size == 4
    assert estimate.total_seconds == pytest.approx(estimate.seconds_per_batch * 16 * 1000)
    assert estimate.seconds_per_epoch == pytest.approx(estimate.seconds_per_batch * 16)
    text = estimate.explain()
    assert "4 training steps" in text and "1 untimed warm-up" in text and "16,000 steps" in text
    assert str(estimate) == text


def test_estimate_accepts_a_model_class_and_checks_loader_length():
    loader = data.make_loader(data.synthetic_dataset(size=16), batch_size=4)
    estimate = train.estimate_training_for(LeNet, loader, epochs=2, measure_batches=2,
                                           warmup_batches=1, device="cpu")
    assert estimate.seconds_per_batch > 0
    with pytest.raises(ValueError, match="4 batches"):
        train.estimate_training_for(LeNet, loader, epochs=2, measure_batches=4, device="cpu")
