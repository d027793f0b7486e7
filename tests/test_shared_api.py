"""A network of another kind trains, saves, loads and ships through the shared API."""

import json
from dataclasses import dataclass

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader

import capsedu
from capsedu import Loss, NetworkConfig, evaluate, fit, load_checkpoint, save_checkpoint
from capsedu.data.mnist import DataFileError
from capsedu.nets import registry
from capsedu.training.checkpoint import CheckpointError
from capsedu.zoo.recipes import Recipe

pytestmark = pytest.mark.unit


@dataclass(frozen=True)
class ToyConfig(NetworkConfig):
    hidden: int = 32
    sizes: tuple[int, ...] = (28, 28)


class ToyNet(nn.Module):
    """A two-layer perceptron: not a capsule network, and that is the point."""

    kind = "toy-mlp"
    config_class = ToyConfig

    def __init__(self, config: ToyConfig | None = None) -> None:
        super().__init__()
        self.config = config or ToyConfig()
        pixels = self.config.sizes[0] * self.config.sizes[1]
        self.layers = nn.Sequential(nn.Flatten(), nn.Linear(pixels, self.config.hidden), nn.ReLU(),
                                    nn.Linear(self.config.hidden, 10))

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.layers(images)

    def class_scores(self, images: torch.Tensor) -> torch.Tensor:
        return self(images).softmax(dim=1)

    def loss(self, images: torch.Tensor, labels: torch.Tensor) -> Loss:
        logits = self(images)
        return Loss(nn.functional.cross_entropy(logits, labels), (logits.argmax(1) == labels).sum())


@pytest.fixture
def toy_kind(monkeypatch):
    monkeypatch.setattr(registry, "_EXTRA", {})
    capsedu.register_network(ToyNet)
    return ToyNet


@pytest.fixture(scope="module")
def offline():
    train = capsedu.load_offline("train", verbose=False).subset(1000)
    test = capsedu.load_offline("test", verbose=False)
    return train, test


def test_toy_network_trains_saves_and_loads(toy_kind, offline, tmp_path):
    train, test = offline
    generator = capsedu.set_seed(0)
    model = ToyNet(ToyConfig(hidden=48))
    history = fit(model, DataLoader(train, batch_size=50, shuffle=True, generator=generator),
                  epochs=3, lr=3e-3, progress=False)
    assert history["train_loss"][-1] < history["train_loss"][0]
    accuracy = evaluate(model, DataLoader(test, batch_size=200))["accuracy"]
    assert accuracy > 0.8, f"a perceptron on 1,000 images should pass 80 %, got {accuracy:.2%}"
    path = save_checkpoint(tmp_path / "toy.pt", model, history=history)
    loaded, info = load_checkpoint(path, expected_config=ToyConfig(hidden=48))
    assert isinstance(loaded, ToyNet) and info["kind"] == "toy-mlp"
    assert loaded.config == ToyConfig(hidden=48)  # the tuple field survives the round trip
    torch.testing.assert_close(loaded(test.images[:5]), model.eval()(test.images[:5]))
    predicted = capsedu.predict(loaded, test.images, batch_size=128)  # batches of 128, 128, ..., 104
    assert predicted.shape == (len(test),) and predicted.dtype == torch.long
    assert float((predicted == test.labels).float().mean()) == pytest.approx(accuracy, abs=1e-6)
    with pytest.raises(CheckpointError, match="was saved with a different config - hidden"):
        load_checkpoint(path, expected_config=ToyConfig(hidden=16))
    with pytest.raises(CheckpointError, match="expected_config is a CapsNetConfig"):
        load_checkpoint(path, expected_config=capsedu.CapsNetConfig.cpu())


@pytest.mark.tools  # coursetools.train_zoo trains it on the 55,000-image split and measures 15,000
def test_toy_network_ships_and_loads_with_its_checksum(toy_kind, tmp_path, full_data):
    from coursetools.train_zoo import train_shipped

    recipe = Recipe(kind="toy-mlp", config=ToyConfig(hidden=16).to_dict(), epochs=1,
                    batch_size=100, lr=3e-3, max_shift=0)
    with pytest.raises(DataFileError, match="no-data"):  # a named data root that is not there
        train_shipped("toy", recipe, tmp_path, data_root=tmp_path / "no-data", progress=False)
    metrics = train_shipped("toy", recipe, tmp_path, data_root=full_data, progress=False)
    assert metrics["kind"] == "toy-mlp" and metrics["train_data"]["images"] == 55_000
    assert (metrics["validation_data"]["images"], metrics["test_data"]["images"]) == (5_000, 10_000)
    # measured from the float32 weights in memory, then from the float16 file that shipped
    assert metrics["history"]["validation_accuracy"][0] == metrics["float32_accuracy"]["validation"]
    assert metrics["stored_accuracy"]["validation"] == metrics["validation_data"]["accuracy"]
    assert metrics["stored_accuracy"]["test"] == metrics["test_accuracy"]
    assert metrics["storage"] == "float16" == load_checkpoint(tmp_path / "toy.pt")[1]["storage"]
    assert abs(metrics["test_accuracy"] - metrics["validation_data"]["accuracy"]) < 0.05
    assert len(metrics["load_average_before"]) == 3 and "/" not in json.dumps(metrics["train_data"])
    assert metrics["device"] == "cpu"  # train_shipped(device=...), what trained it
    model = capsedu.pretrained("toy", weights_dir=tmp_path)
    assert isinstance(model, ToyNet) and not model.training
    (tmp_path / "toy.pt").write_bytes((tmp_path / "toy.pt").read_bytes()[:-10] + b"0" * 10)
    with pytest.raises(CheckpointError, match="fails its checksum"):
        capsedu.pretrained("toy", weights_dir=tmp_path)


@pytest.mark.tools  # coursetools.train_zoo's shipping
def test_half_precision_ships_only_when_it_loses_nothing(toy_kind, tmp_path, monkeypatch):
    from coursetools import train_zoo

    images, labels = torch.rand(300, 1, 28, 28), torch.arange(300) % 10
    splits = {k: capsedu.data.mnist.MNISTData(images, labels, source=k) for k in ("validation", "test")}
    model = ToyNet(ToyConfig(hidden=16)).eval()
    kept = train_zoo.ship(tmp_path / "toy.pt", model, splits, "bfloat16", torch.device("cpu"))
    assert kept["storage"] == "bfloat16" and kept["storage_asked"] == "bfloat16"
    monkeypatch.setattr(train_zoo, "lossless", lambda float32, stored, images: False)
    refused = train_zoo.ship(tmp_path / "toy.pt", model, splits, "float16", torch.device("cpu"))
    assert refused["storage"] == "float32" and load_checkpoint(tmp_path / "toy.pt")[1]["storage"] == "float32"
    assert refused["stored_accuracy"] == refused["float32_accuracy"]  # the float32 file: the same


@pytest.mark.parametrize(("float32", "stored", "images", "same"), [
    (0.9955, 0.9955, 10_000, True), (0.99551, 0.99549, 10_000, True),  # the same printed 99.55 %
    (0.9955, 0.9954, 10_000, False),  # one image of 10,000: printed 99.54, and 1/7 of an SE
    (0.9, 0.9002, 10_000, True),  # printed 90.00 and 90.02, but 0.02 points is 1/15 of its SE (0.3)
])
@pytest.mark.tools  # coursetools.train_zoo's rule for half-precision weights
def test_lossless_means_the_printed_digit_or_a_tenth_of_a_standard_error(float32, stored, images, same):
    from coursetools import train_zoo

    assert train_zoo.lossless(float32, stored, images) is same


def test_an_unknown_kind_and_a_bad_registration_are_named(toy_kind, tmp_path):
    path = save_checkpoint(tmp_path / "toy.pt", ToyNet())
    registry._EXTRA.clear()
    with pytest.raises(CheckpointError, match="unknown network kind 'toy-mlp'"):
        load_checkpoint(path)
    with pytest.raises(TypeError, match="model must be a network of a registered kind"):
        save_checkpoint(tmp_path / "again.pt", ToyNet())
    with pytest.raises(ValueError, match="the data loader yielded no batches"):
        fit(ToyNet(), [], epochs=1)  # fit needs no registration, only a loss
    with pytest.raises(TypeError, match="model must be a network with a class_scores"):
        capsedu.predict(nn.Linear(784, 10), torch.zeros(2, 1, 28, 28))
    with pytest.raises(TypeError, match="kind"):
        capsedu.register_network(nn.Linear)
    with pytest.raises(ValueError, match="kind 'capsnet' is taken"):
        capsedu.register_network(type("Other", (ToyNet,), {"kind": "capsnet"}))


def test_fit_trains_a_subclass_of_a_course_network_that_checkpoints_refuse(offline, tmp_path):
    class Wider(capsedu.CapsNet):
        pass

    train, _ = offline
    model = Wider(capsedu.CapsNetConfig(conv1_channels=8, primary_types=2, primary_dim=4))
    history = fit(model, DataLoader(train.subset(32), batch_size=16), epochs=1, progress=False)
    assert len(history["train_loss"]) == 1  # its kind's default objective, the margin loss
    with pytest.raises(TypeError, match="registered kind"):
        save_checkpoint(tmp_path / "wider.pt", model)  # it would come back as a plain CapsNet


def test_fit_takes_a_loss_function_for_any_module(offline):
    train, _ = offline
    capsedu.set_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(784, 10))

    def loss_fn(net, images, labels):
        logits = net(images)
        return Loss(nn.functional.cross_entropy(logits, labels), (logits.argmax(1) == labels).sum())

    history = fit(model, DataLoader(train, batch_size=50), epochs=3, lr=5e-3, objective=loss_fn,
                  progress=False)
    assert history["train_accuracy"][-1] > 0.7
    model.train()
    evaluate(model, DataLoader(train, batch_size=100), objective=loss_fn)
    assert model.training, "evaluate must leave the caller's train mode as it found it"
