"""fit, evaluate and predict as a PyTorch user expects (issue 49, point 1).

A non-finite loss stops training before its step; a user's optimizer is used as given; device=None
is the model's own device and a device that is not the model's is refused; the torch and the NumPy
fit return the same History.
"""

import copy

import numpy as np
import pytest
import torch
from torch import nn

from capsedu import Loss, MultiMNIST, evaluate, fit, pair_accuracy, predict
from capsedu._history import History
from capsedu.data.mnist import MNISTData
from capsedu.nets import numpy_classifier as ncl
from capsedu.training.hardware import model_device, require_model_device

pytestmark = pytest.mark.unit


class Tiny(nn.Module):
    """A linear classifier of images pooled to 4 x 4, with its own loss: enough for the contract."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(16, 10)

    def forward(self, images: torch.Tensor) -> torch.Tensor:  # (B, 1, H, W) -> (B, J)
        return self.linear(nn.functional.adaptive_avg_pool2d(images, 4).flatten(1))

    def class_scores(self, images: torch.Tensor) -> torch.Tensor:  # (B, J)
        return self(images).softmax(dim=1)

    def loss(self, images: torch.Tensor, labels: torch.Tensor) -> Loss:
        logits = self(images)  # (B, J)
        return Loss(nn.functional.cross_entropy(logits, labels), (logits.argmax(1) == labels).sum())


def batches(count: int = 5, size: int = 4) -> list[tuple[torch.Tensor, torch.Tensor]]:
    generator = torch.Generator().manual_seed(0)
    return [(torch.rand(size, 1, 4, 4, generator=generator),
             torch.randint(0, 10, (size,), generator=generator)) for _ in range(count)]


def tiny() -> Tiny:
    torch.manual_seed(0)
    return Tiny()


# 1. The loss is checked before the step.

def test_a_nan_loss_stops_training_before_its_step_and_names_the_batch():
    data = batches(4)
    poisoned = data[:2] + [(torch.full_like(data[2][0], float("nan")), data[2][1])] + data[3:]
    before = tiny()
    after_two, stopped = copy.deepcopy(before), copy.deepcopy(before)
    fit(after_two, data[:2], epochs=1, progress=False)
    with pytest.raises(FloatingPointError, match=r"nan at batch 2 of this pass .*after 8 images"):
        fit(stopped, poisoned, epochs=1, progress=False)
    for (name, expected), found in zip(after_two.state_dict().items(), stopped.state_dict().values()):
        assert torch.equal(found, expected), f"{name} changed after the non-finite loss"


def test_a_finite_loss_with_nan_gradients_stops_before_its_step():
    """sqrt(0 * loss) is 0, a finite loss, but its gradient is NaN (d sqrt(x)/dx at 0 times 0):
    without the gradient check the optimizer would write NaN into every weight."""
    data = batches(4)
    before = tiny()
    after_two, stopped = copy.deepcopy(before), copy.deepcopy(before)
    fit(after_two, data[:2], epochs=1, progress=False)
    calls = []

    def objective(network, images, labels):  # batch 2's loss is finite, its gradient is not
        loss = network.loss(images, labels)
        calls.append(len(calls))
        if len(calls) == 3:
            loss = Loss(loss.value + torch.sqrt(0 * loss.value), loss.correct)
        return loss

    with pytest.raises(FloatingPointError, match=r"gradient became non-finite .*batch 2 of this pass .*after 8 images"):
        fit(stopped, data, epochs=1, objective=objective, progress=False)
    for (name, expected), found in zip(after_two.state_dict().items(), stopped.state_dict().values()):
        assert torch.equal(found, expected), f"{name} changed after the non-finite gradient"


# 2. A user's optimizer is used as given.

def test_a_users_optimizer_keeps_its_rate_without_a_schedule():
    model = tiny()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    history = fit(model, batches(), epochs=3, optimizer=optimizer, progress=False)
    assert history["lr"] == [0.5, 0.5, 0.5] and optimizer.param_groups[0]["lr"] == 0.5


def test_onecycle_on_a_users_optimizer_peaks_at_its_rate():
    model, rates = tiny(), []
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)

    def objective(network, images, labels):  # records the rate each batch trains with
        rates.append(optimizer.param_groups[0]["lr"])
        return network.loss(images, labels)

    fit(model, batches(), epochs=2, optimizer=optimizer, lr_schedule="onecycle",
        objective=objective, progress=False)
    assert len(rates) == 10 and max(rates) == pytest.approx(0.5) and rates[0] < 0.05


def test_onecycle_leaves_a_users_momentum_and_betas_as_given():
    model = tiny()
    sgd = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.3)
    fit(model, batches(), epochs=2, optimizer=sgd, lr_schedule="onecycle", progress=False)
    assert sgd.param_groups[0]["momentum"] == 0.3
    adam = torch.optim.Adam(model.parameters(), lr=0.01, betas=(0.5, 0.999))
    fit(model, batches(), epochs=2, optimizer=adam, lr_schedule="onecycle", progress=False)
    assert adam.param_groups[0]["betas"] == (0.5, 0.999)


def test_exponential_on_a_users_optimizer_decays_its_rate():
    model = tiny()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    history = fit(model, batches(), epochs=3, optimizer=optimizer, lr_schedule="exponential",
                  lr_decay=0.5, progress=False)
    assert history["lr"] == pytest.approx([0.5, 0.25, 0.125])


def test_fits_own_adam_still_decays_by_default():
    history = fit(tiny(), batches(), epochs=2, lr=0.01, progress=False)
    assert history["lr"] == pytest.approx([0.01, 0.0096])


def test_lr_beside_an_optimizer_is_refused():
    model = tiny()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    with pytest.raises(ValueError, match=r"lr=0.1 and optimizer= were both given.*\(0.5\)"):
        fit(model, batches(), epochs=1, lr=0.1, optimizer=optimizer, progress=False)
    with pytest.raises(TypeError, match="optimizer must be a torch.optim.Optimizer"):
        fit(model, batches(), epochs=1, optimizer="sgd", progress=False)
    with pytest.raises(ValueError, match=r"lr_schedule must be one of .* or None"):
        fit(model, batches(), epochs=1, lr_schedule="cosine", progress=False)


# 3. device=None is the model's own device; another device is refused.

def test_model_device_is_where_the_first_parameter_or_buffer_is():
    assert model_device(Tiny()) == torch.device("cpu")
    assert model_device(nn.Linear(2, 2, device="meta")) == torch.device("meta")
    assert model_device(nn.BatchNorm1d(3, affine=False, device="meta")) == torch.device("meta")
    assert model_device(nn.ReLU()) == torch.device("cpu")  # nothing to be anywhere
    with pytest.raises(TypeError, match="model must be a torch.nn.Module"):
        model_device("cpu")


def test_require_model_device_resolves_none_and_refuses_another_device():
    on_meta = nn.Linear(2, 2, device="meta")
    assert require_model_device(on_meta, None) == torch.device("meta")
    assert require_model_device(on_meta, "meta") == torch.device("meta")
    assert require_model_device(Tiny(), torch.device("cpu")) == torch.device("cpu")
    with pytest.raises(ValueError, match=r"device='cpu' but the model is on 'meta'"):
        require_model_device(on_meta, "cpu")


def test_evaluate_predict_and_pair_accuracy_refuse_a_device_that_is_not_the_models():
    model = Tiny()
    message = r"device='meta' but the model is on 'cpu'"
    with pytest.raises(ValueError, match=message):
        evaluate(model, batches(1), device="meta")
    with pytest.raises(ValueError, match=message):
        predict(model, torch.rand(3, 1, 4, 4), device="meta")
    digits = MNISTData(torch.rand(20, 1, 28, 28), torch.arange(20) % 10, "random digits")
    with pytest.raises(ValueError, match=message):
        pair_accuracy(model, MultiMNIST(digits, 4, seed=0), device="meta")


def test_evaluate_and_predict_run_where_the_model_is_by_default():
    model = Tiny()
    images = torch.rand(6, 1, 4, 4)
    assert predict(model, images).tolist() == predict(model, images, device="cpu").tolist()
    assert evaluate(model, batches(2)) == evaluate(model, batches(2), device="cpu")


# 4. One history type.

def test_both_fits_return_the_same_history_with_shared_columns():
    torch_history = fit(tiny(), batches(), epochs=2, progress=False)
    rng = np.random.default_rng(0)
    images, labels = rng.random((8, 16)).astype(np.float32), rng.integers(0, 10, 8)
    numpy_history = ncl.fit(ncl.init_params(num_caps=2, pixels=16), images, labels, epochs=2,
                            batch_size=4, on_epoch=lambda record: record.update(extra=1))
    shared = {"epoch", "train_loss", "train_accuracy", "train_seconds"}
    for history in (torch_history, numpy_history):
        assert type(history) is History and shared <= set(history)
        assert history["epoch"] == [1, 2] and all(len(c) == 2 for c in history.values())
    assert numpy_history["extra"] == [1, 1]  # what on_epoch adds becomes a column
    assert torch_history.last()["epoch"] == 2 and torch_history.last()["lr"] == torch_history["lr"][-1]


def test_history_appends_columns_and_names_what_indexing_by_epoch_means():
    history = History()
    history.append({"epoch": 1, "train_loss": 0.5})
    history.append({"epoch": 2, "train_loss": 0.25})
    assert history == {"epoch": [1, 2], "train_loss": [0.5, 0.25]}
    assert history.last() == {"epoch": 2, "train_loss": 0.25} and History().last() == {}
    with pytest.raises(TypeError, match=r"holds columns, not epochs: history\[name\]\[-1\]"):
        history[-1]
    with pytest.raises(TypeError, match="record must be a mapping"):
        history.append([("epoch", 3)])
