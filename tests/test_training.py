import pytest
import torch
from torch.utils.data import DataLoader

from capsedu import (
    CapsNet,
    CapsNetConfig,
    evaluate,
    fit,
    load_checkpoint,
    load_mnist,
    random_shift,
    save_checkpoint,
    set_seed,
)

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def offline(tmp_path_factory):
    root = tmp_path_factory.mktemp("empty-root")  # no files: the deterministic offline split
    train = load_mnist("train", root=root, download=False, verbose=False).subset(600)
    test = load_mnist("test", root=root, download=False, verbose=False).subset(300)
    return train, test


@pytest.mark.tools  # 3 epochs of a CapsNet on 600 images: more than a few steps
def test_cpu_profile_learns_far_better_than_chance(offline, tmp_path):
    train, test = offline
    generator = set_seed(0)
    model = CapsNet(CapsNetConfig.cpu())
    loader = DataLoader(train, batch_size=32, shuffle=True, generator=generator)
    before = evaluate(model, DataLoader(test, batch_size=100))
    history = fit(model, loader, epochs=3, progress=False, val_loader=DataLoader(test, batch_size=100),
                  augment=lambda x: random_shift(x, 1, generator))
    assert set(history) >= {"epoch", "train_loss", "train_accuracy", "val_loss", "val_accuracy", "lr", "seconds"}
    assert history["epoch"] == [1, 2, 3]
    assert history["train_loss"][-1] < history["train_loss"][0]
    assert history["lr"][1] == pytest.approx(history["lr"][0] * 0.96)
    after = evaluate(model, DataLoader(test, batch_size=100))
    assert before["accuracy"] < 0.3
    assert after["accuracy"] > 0.6, f"3 epochs on 600 images reached only {after['accuracy']:.2f}"
    assert after["accuracy"] == pytest.approx(history["val_accuracy"][-1])
    # the checkpoint reproduces the trained model exactly
    loaded, _ = load_checkpoint(save_checkpoint(tmp_path / "m.pt", model))
    assert evaluate(loaded, DataLoader(test, batch_size=100))["accuracy"] == after["accuracy"]


def test_seeded_training_is_reproducible(offline):
    train, _ = offline
    small = CapsNetConfig(conv1_channels=8, primary_types=2, primary_dim=4, digit_dim=8, decoder_hidden=(16, 32))
    losses = []
    for _ in range(2):
        generator = set_seed(123)
        model = CapsNet(small)
        loader = DataLoader(train.subset(64), batch_size=16, shuffle=True, generator=generator)
        losses.append(fit(model, loader, epochs=1, progress=False)["train_loss"])
    assert losses[0] == losses[1]


def test_fit_and_evaluate_reject_bad_arguments(offline):
    train, _ = offline
    model = CapsNet(CapsNetConfig(conv1_channels=8, primary_types=2, primary_dim=4))
    loader = DataLoader(train.subset(8), batch_size=4)
    with pytest.raises(ValueError, match="epochs must be >= 1"):
        fit(model, loader, epochs=0)
    with pytest.raises(TypeError, match="Linear has no loss.*pass objective="):
        fit(torch.nn.Linear(2, 2), loader, epochs=1)
    with pytest.raises(TypeError, match="objective must be an Objective or a function"):
        fit(model, loader, epochs=1, objective="margin")
    with pytest.raises(ValueError, match="the data loader yielded no batches"):
        fit(model, [], epochs=1, progress=False)
    with pytest.raises(ValueError, match=r"labels must be in \[0, 9\]"):
        evaluate(model, [(torch.rand(2, 1, 28, 28), torch.tensor([3, 12]))])


def test_set_seed_validates_and_returns_a_generator():
    assert torch.equal(torch.rand(3, generator=set_seed(5)), torch.rand(3, generator=set_seed(5)))
    with pytest.raises(TypeError, match="seed must be an int"):
        set_seed(1.5)
    with pytest.raises(ValueError, match="seed must be in"):
        set_seed(-1)


def test_fit_stops_with_a_clear_error_when_the_loss_is_not_finite(offline):
    train, _ = offline
    model = CapsNet(CapsNetConfig(conv1_channels=8, primary_types=2, primary_dim=4))
    with torch.no_grad():
        model.decoder[0].weight.fill_(float("nan"))
    loader = DataLoader(train.subset(8), batch_size=4)
    with pytest.raises(FloatingPointError, match=r"the loss became nan at batch 0 .*after 0 images"):
        fit(model, loader, epochs=1, progress=False)
