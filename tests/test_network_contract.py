"""Every network of the package honours the contract: registered, built, trained by `fit` and by a
recipe, saved and loaded the same way (CONTRIBUTING.md, "Adding a network").

The networks are found, not listed: every ``nn.Module`` subclass of a module under
``capsedu.nets`` with a ``kind``; a source scan checks that no class elsewhere in the package
declares one. Each kind needs a tiny config here (the test fails for a kind without one).
"""

import ast
import dataclasses
import importlib
import inspect
import pkgutil

import pytest
import torch
from conftest import REPO
from torch import nn

import capsedu
import capsedu.nets
from capsedu.data.mnist import MNISTData
from capsedu.nets import registry
from capsedu.nets.capsnet import CapsNetConfig
from capsedu.nets.cnn import CNNConfig
from capsedu.nets.deep_capsnet import DeepCapsConfig
from capsedu.nets.efficient_capsnet import EfficientCapsConfig
from capsedu.nets.matrix_capsnet import MatrixCapsConfig
from capsedu.zoo.recipes import Recipe
from capsedu.zoo.train import recipe_network, train_recipe

pytestmark = pytest.mark.unit

TINY = {  # a few thousand parameters each: a step takes milliseconds
    "capsnet": CapsNetConfig(conv1_channels=8, primary_types=2, primary_dim=4, digit_dim=8,
                             decoder_hidden=(16, 32)),
    "cnn": CNNConfig(channels=(4, 8), pool=(True, True), hidden=(16,)),
    "em": MatrixCapsConfig(conv1_channels=8, primary_types=2, conv_caps1_types=2,
                           conv_caps2_types=2),
    "efficient": EfficientCapsConfig(conv_channels=(4, 8, 8, 16), num_primary_caps=4, primary_dim=4,
                                     digit_dim=4, decoder_hidden=(16, 32)),
    "deep_capsnet": DeepCapsConfig(conv1_channels=8, primary_types=2, primary_dim=4, digit_dim=6,
                                   hidden_caps=((5, 3),)),
}


def network_classes() -> dict[str, type[nn.Module]]:
    r"""``{kind: class}`` of every network class defined in a module under capsedu.nets."""
    found: dict[str, type[nn.Module]] = {}
    for module in pkgutil.walk_packages(capsedu.nets.__path__, "capsedu.nets."):
        for _, cls in inspect.getmembers(importlib.import_module(module.name), inspect.isclass):
            if issubclass(cls, nn.Module) and cls.__module__ == module.name and "kind" in vars(cls):
                found[cls.kind] = cls
    return found


NETWORKS = network_classes()


def random_digits(count: int = 8, seed: int = 0) -> MNISTData:
    generator = torch.Generator().manual_seed(seed)
    images = torch.rand(count, 1, 28, 28, generator=generator)  # (N, 1, 28, 28)
    return MNISTData(images, torch.arange(count) % 10, "random images")


def changed(before: dict[str, torch.Tensor], model: nn.Module) -> bool:
    return any(not torch.equal(before[name], value) for name, value in model.state_dict().items()
               if value.is_floating_point())


def test_the_walk_finds_every_network_and_every_network_has_a_tiny_config():
    assert {"capsnet", "cnn", "em", "efficient", "deep_capsnet"} <= set(NETWORKS)
    assert set(NETWORKS) == set(TINY), "a network kind without a tiny config here (or one too many)"
    declared = {}  # every class of the package whose body assigns a kind, read from the source
    for path in sorted((REPO / "capsedu").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and any(
                    getattr(target, "id", "") == "kind" for item in node.body
                    if isinstance(item, ast.Assign) for target in item.targets):
                declared[node.name] = str(path.relative_to(REPO))
    outside = {name: path for name, path in declared.items() if not path.startswith("capsedu/nets/")}
    assert not outside, f"classes declaring a kind outside capsedu/nets, not walked: {outside}"
    assert set(declared) == {cls.__name__ for cls in NETWORKS.values()}


@pytest.mark.parametrize("kind", sorted(NETWORKS))
def test_the_network_is_registered_and_built_from_its_config(kind):
    assert kind in registry.known_kinds()
    assert registry.network_class(kind) is NETWORKS[kind]
    model = registry.build_network(kind, TINY[kind].to_dict())
    assert type(model) is NETWORKS[kind] and model.config == TINY[kind]
    assert model.class_scores(random_digits(3).images).shape == (3, 10)


@pytest.mark.parametrize("kind", sorted(NETWORKS))
def test_every_parameter_is_a_plain_contiguous_tensor(kind):
    """No parameter is a view (a transposed W, a slice): `.view(-1)`, optimizers' foreach kernels
    and DDP's buckets expect each parameter to own contiguous memory."""
    model = NETWORKS[kind](TINY[kind])
    views = [name for name, p in model.named_parameters()
             if not p.is_contiguous() or p.storage_offset() != 0
             or p.untyped_storage().nbytes() != p.numel() * p.element_size()]
    assert not views, f"{kind}: parameters that are views of other memory: {views}"
    for p in model.parameters():
        p.detach().view(-1)  # raises for a non-contiguous parameter


@pytest.mark.parametrize("kind", sorted(NETWORKS))
def test_one_fit_epoch_trains_the_network_with_its_default_loss(kind):
    capsedu.set_seed(0)
    model = NETWORKS[kind](TINY[kind])
    before = {name: value.clone() for name, value in model.state_dict().items()}
    data = random_digits()
    batches = [(data.images[:4], data.labels[:4]), (data.images[4:], data.labels[4:])]
    history = capsedu.fit(model, batches, epochs=1, device="cpu", lr=1e-2, progress=False)
    assert history["epoch"] == [1] and torch.isfinite(torch.tensor(history["train_loss"])).all()
    assert changed(before, model), f"{kind}: fit changed no weight"


@pytest.mark.parametrize("kind", sorted(NETWORKS))
def test_a_checkpoint_loads_the_same_network(kind, tmp_path):
    capsedu.set_seed(0)
    model = NETWORKS[kind](TINY[kind]).eval()
    path = capsedu.save_checkpoint(tmp_path / f"{kind}.pt", model)
    loaded, info = capsedu.load_checkpoint(path, expected_config=TINY[kind])
    assert info["kind"] == kind and type(loaded) is NETWORKS[kind] and loaded.config == TINY[kind]
    images = random_digits(4, seed=1).images
    with torch.no_grad():
        torch.testing.assert_close(loaded.eval().class_scores(images), model.class_scores(images),
                                   rtol=0, atol=0)


@pytest.mark.parametrize("kind", sorted(NETWORKS))
def test_a_one_epoch_recipe_of_the_kind_trains_it(kind):
    recipe = Recipe(kind=kind, config=TINY[kind].to_dict(), epochs=1, batch_size=4, lr=1e-2)
    before = {name: value.clone() for name, value in recipe_network(recipe).state_dict().items()}
    model, history = train_recipe(recipe, random_digits(), progress=False)
    assert type(model) is NETWORKS[kind] and model.config == TINY[kind]
    assert history["epoch"] == [1] and torch.isfinite(torch.tensor(history["train_loss"])).all()
    assert changed(before, model), f"{kind}: the recipe changed no weight"
    assert next(model.parameters()).device.type == "cpu"  # device=None: where the network was built


def test_recipes_draw_from_their_seed_and_leave_the_callers_random_state_alone():
    """recipe_network and train_recipe seed forked copies of torch's generator: the same recipe
    gives the same weights and the same trained network (dropout included: the CNN), and the
    caller's random numbers come out as if neither had run."""
    recipe = Recipe(kind="cnn", config=TINY["cnn"].to_dict(), epochs=1, batch_size=4, lr=1e-2, seed=3)
    torch.manual_seed(11)
    expected = torch.rand(5)
    torch.manual_seed(11)
    first = recipe_network(recipe)
    trained, _ = train_recipe(recipe, random_digits(), progress=False)
    assert torch.equal(torch.rand(5), expected), "the caller's random state moved"
    second = recipe_network(recipe)
    again, _ = train_recipe(recipe, random_digits(), progress=False)
    for (name, a), b, c, d in zip(first.state_dict().items(), second.state_dict().values(),
                                  trained.state_dict().values(), again.state_dict().values()):
        assert torch.equal(a, b), f"{name}: recipe_network drew other weights for the same seed"
        assert torch.equal(c, d), f"{name}: train_recipe trained the same recipe to other weights"
    other = recipe_network(dataclasses.replace(recipe, seed=4))
    assert not all(torch.equal(a, b) for a, b in zip(first.parameters(), other.parameters()))
