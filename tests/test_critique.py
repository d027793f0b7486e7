"""Tests for capsedu.explore.critique and capsedu.nets.deep_capsnet (lesson 13's scaling critique)."""

import math

import pytest
import torch

from capsedu.explore.critique import capsule_activity, coupling_entropy, coupling_spread
from capsedu.nets.capsnet import CapsNetConfig
from capsedu.nets.deep_capsnet import DeepCapsConfig, DeepCapsNet

pytestmark = pytest.mark.unit


def test_coupling_spread_is_each_couplings_spread_across_images_averaged():
    c = torch.tensor([[[0.2, 0.8]], [[0.6, 0.4]]])  # (N=2, I=1, J=2)
    assert float(coupling_spread(c)) == pytest.approx(0.2)
    assert float(coupling_spread(c[:1].expand(5, 1, 2))) == 0.0


def test_coupling_entropy_is_one_when_uniform_and_zero_for_a_tree():
    assert float(coupling_entropy(torch.full((3, 4, 5), 0.2))) == pytest.approx(1.0)
    tree = torch.nn.functional.one_hot(torch.tensor([[0, 2, 1, 1]]), 3).float()  # (1, 4, 3)
    assert float(coupling_entropy(tree)) == pytest.approx(0.0, abs=1e-6)
    half = torch.tensor([[[0.5, 0.5, 0.0, 0.0]]])
    assert float(coupling_entropy(half)) == pytest.approx(math.log(2) / math.log(4))
    with pytest.raises(ValueError, match="at least 2 parents"):
        coupling_entropy(torch.ones(2, 3, 1))


def test_capsule_activity_finds_dead_and_always_on_capsules():
    lengths = torch.tensor([[0.1, 0.9, 0.6, 0.5], [0.2, 0.8, 0.4, 0.5]])  # (N=2, I=4)
    activity = capsule_activity(lengths, 0.5)
    assert (activity.dead, activity.always_on) == (0.5, 0.25)  # capsules 0 and 3; capsule 1
    assert activity.on_share.tolist() == [0.0, 1.0, 0.5, 0.0]
    with pytest.raises(ValueError, match="threshold"):
        capsule_activity(lengths, 1.5)
    with pytest.raises(ValueError, match="lengths"):
        capsule_activity(lengths[0], 0.5)


def tiny_deep(hidden):
    config = CapsNetConfig(conv1_channels=8, primary_types=2, primary_dim=4, digit_dim=6)
    return DeepCapsNet(DeepCapsConfig(**{**config.__dict__, "hidden_caps": hidden}))


@pytest.mark.parametrize("hidden", [(), ((5, 3),), ((5, 3), (4, 2))])
def test_deep_capsnet_returns_every_level_and_its_couplings(hidden):
    model = tiny_deep(hidden)
    capsules, couplings = model(torch.rand(2, 1, 28, 28))
    sizes = [(72, 4), *hidden, (10, 6)]  # 2 types x 6 x 6 primary capsules
    assert [tuple(u.shape) for u in capsules] == [(2, k, d) for k, d in sizes]
    assert [tuple(c.shape) for c in couplings] == [(2, a[0], b[0]) for a, b in zip(sizes, sizes[1:])]
    assert all(torch.allclose(c.sum(dim=-1), torch.ones(())) for c in couplings)
    assert model.class_scores(torch.rand(3, 1, 28, 28)).shape == (3, 10)


def test_deep_capsnet_loss_reaches_every_routed_layer():
    model = tiny_deep(((5, 3),))
    for layer in model.routed:  # a larger start than the paper's, so the gradient is not tiny
        torch.nn.init.normal_(layer.W, std=0.5)
    loss = model.loss(torch.rand(4, 1, 28, 28), torch.tensor([1, 2, 3, 4]))
    loss.value.backward()
    assert 0 <= int(loss.correct) <= 4
    assert all(float(layer.W.grad.norm()) > 0 for layer in model.routed)
    assert float(model.conv1.weight.grad.norm()) > 0


def test_deep_capsnet_names_bad_configs():
    with pytest.raises(TypeError, match="DeepCapsConfig"):
        DeepCapsNet(CapsNetConfig())
    with pytest.raises(ValueError, match="hidden_caps"):
        tiny_deep(((0, 3),))
    with pytest.raises(ValueError, match="pairs"):
        tiny_deep((32, 12))
