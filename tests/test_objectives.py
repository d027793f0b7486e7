"""Objectives are data: each names every number it uses, round-trips through a plain dict, and is
what fit, evaluate, checkpoints and recipes use."""

import pytest
import torch

import capsedu
from capsedu.nets.losses import RECON_WEIGHT
from capsedu.training.objectives import (
    OBJECTIVES,
    CrossEntropyObjective,
    MarginObjective,
    MultiLabelObjective,
    SpreadObjective,
    TwoDigitObjective,
    default_objective,
    objective_from_dict,
)

pytestmark = pytest.mark.unit

SMALL = capsedu.CapsNetConfig(conv1_channels=8, primary_types=2, primary_dim=4, digit_dim=8,
                              decoder_hidden=(16, 32))


@pytest.mark.parametrize("objective", [MarginObjective(), MarginObjective(recon_weight=0.01),
                                       TwoDigitObjective(), CrossEntropyObjective(), MultiLabelObjective(),
                                       SpreadObjective(ramp_epochs=16), SpreadObjective(margin=0.5, start_margin=0.5)])
def test_every_objective_round_trips_through_a_plain_dict(objective):
    stored = objective.to_dict()
    assert stored["name"] in OBJECTIVES and all(isinstance(v, (str, int, float)) for v in stored.values())
    assert objective_from_dict(stored) == objective


def test_the_margin_objective_is_capsnet_loss_with_its_weight_and_counts_right():
    torch.manual_seed(0)
    model, images, labels = capsedu.CapsNet(SMALL), torch.rand(4, 1, 28, 28), torch.tensor([0, 1, 2, 3])
    value, correct = MarginObjective(recon_weight=0.01)(model, images, labels)
    expected, lengths = capsedu.capsnet_loss(model, images, labels, recon_weight=0.01)
    torch.testing.assert_close(value, expected)
    assert int(correct) == int((lengths.argmax(dim=1) == labels).sum())
    assert MarginObjective().recon_weight == RECON_WEIGHT == 0.0005  # the paper's, written once


def test_each_course_network_has_a_default_objective_and_other_modules_none():
    assert default_objective(capsedu.CapsNet(SMALL)) == MarginObjective()
    assert default_objective(capsedu.BaselineCNN(capsedu.CNNConfig.cpu())) == CrossEntropyObjective()
    assert default_objective(torch.nn.Linear(2, 2)) is None


@pytest.mark.parametrize("data, match", [({"name": "nope"}, "needs a name among"), ("margin", "needs a name"),
                                         ({"name": "margin", "weight": 1.0}, "unexpected keyword")])
def test_a_bad_objective_dict_is_named(data, match):
    with pytest.raises((ValueError, TypeError), match=match):
        objective_from_dict(data)
