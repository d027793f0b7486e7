"""The matrix-capsule network of lesson 11: shapes, sizes, the spread loss, the patches every
convolutional capsule routes, gradients that reach every parameter, the spread objective and its
margin schedule, and the errors bad input gets."""

import pytest
import torch

import capsedu
from capsedu.nets.losses import spread_loss
from capsedu.nets.matrix_capsnet import (
    ClassMatrixCaps,
    ConvMatrixCaps,
    MatrixCapsConfig,
    MatrixCapsNet,
)
from capsedu.training.objectives import SpreadObjective

pytestmark = pytest.mark.unit


def test_the_default_network_has_the_ports_size_and_shapes():
    torch.manual_seed(0)
    model = MatrixCapsNet(MatrixCapsConfig())
    assert sum(p.numel() for p in model.parameters()) == 68_444
    poses, activations = model(torch.rand(3, 1, 28, 28))
    assert poses.shape == (3, 10, 16) and activations.shape == (3, 10)
    assert ((activations >= 0) & (activations <= 1)).all()


def test_spread_loss_is_the_sum_over_wrong_classes():
    a = torch.tensor([[0.9, 0.2, 0.8], [0.1, 0.5, 0.4]])
    labels = torch.tensor([0, 2])
    m = 0.5
    expected = (max(0, m - (0.9 - 0.2)) ** 2 + max(0, m - (0.9 - 0.8)) ** 2
                + max(0, m - (0.4 - 0.1)) ** 2 + max(0, m - (0.4 - 0.5)) ** 2) / 2
    assert torch.isclose(spread_loss(a, labels, m), torch.tensor(expected))


def test_each_output_position_routes_the_votes_of_its_own_patch():
    torch.manual_seed(1)
    layer = ConvMatrixCaps(in_types=2, out_types=3, kernel=3, stride=2, routing_iterations=1, inverse_temperature=1.0)
    poses, activations = torch.randn(1, 2, 7, 7, 16), torch.rand(1, 2, 7, 7)
    mu, a_out = layer(poses, activations)
    assert mu.shape == (1, 3, 3, 3, 16) and a_out.shape == (1, 3, 3, 3)
    # with one iteration, R = 1/J: mu of output (row 1, column 2) is the activation-weighted mean of
    # the votes of the patch rows 2..4, columns 4..6
    patch = poses[0, :, 2:5, 4:7].permute(1, 2, 0, 3).reshape(3, 3, 2, 4, 4)  # (K, K, T_in, 4, 4)
    votes = torch.einsum("xytpq,xytcqr->xytcpr", patch, layer.W).reshape(18, 3, 16)  # (I, J, 16)
    weights = activations[0, :, 2:5, 4:7].permute(1, 2, 0).reshape(18, 1, 1)  # (I, 1, 1)
    expected = (weights * votes).sum(0) / (weights.sum() + 1e-8)  # (J, 16)
    torch.testing.assert_close(mu[0, :, 1, 2], expected.detach(), rtol=1e-4, atol=1e-5)


def test_gradients_reach_every_parameter_and_stay_finite():
    torch.manual_seed(2)
    model = MatrixCapsNet(MatrixCapsConfig(conv1_channels=8, primary_types=2, conv_caps1_types=3,
                                           conv_caps2_types=3))
    _, activations = model(torch.rand(2, 1, 28, 28))
    spread_loss(activations, torch.tensor([1, 7]), 0.5).backward()
    for name, parameter in model.named_parameters():
        assert parameter.grad is not None and torch.isfinite(parameter.grad).all(), name
        assert parameter.grad.abs().sum() > 0, name


def test_class_votes_carry_each_capsules_scaled_position():
    layer = ClassMatrixCaps(in_types=1, num_classes=2, routing_iterations=1, inverse_temperature=1.0)
    poses = torch.randn(1, 1, 1, 16).expand(1, 1, 3, 3, 16)  # one pose repeated on a 3 x 3 grid
    votes = layer.votes(poses).view(3, 3, 2, 16)  # (H, W, J, 16)
    plain = votes - votes[0, 0]  # everything but the coordinates cancels
    torch.testing.assert_close(plain[..., 3], torch.tensor([0.0, 1 / 3, 2 / 3]).view(1, 3, 1).expand(3, 3, 2))
    torch.testing.assert_close(plain[..., 7], torch.tensor([0.0, 1 / 3, 2 / 3]).view(3, 1, 1).expand(3, 3, 2))
    others = [k for k in range(16) if k not in (3, 7)]
    torch.testing.assert_close(plain[..., others], torch.zeros(3, 3, 2, 14))


def _tiny_network() -> MatrixCapsNet:
    return MatrixCapsNet(MatrixCapsConfig(conv1_channels=8, primary_types=2, conv_caps1_types=3,
                                          conv_caps2_types=3))


def test_the_spread_objective_is_the_spread_loss_at_its_margin_and_counts_right():
    torch.manual_seed(3)
    model, images, labels = _tiny_network(), torch.rand(4, 1, 28, 28), torch.tensor([0, 3, 3, 9])
    value, correct = SpreadObjective(margin=0.7)(model, images, labels)
    activations = model(images)[1]
    torch.testing.assert_close(value, spread_loss(activations, labels, 0.7))
    assert correct == (activations.argmax(dim=1) == labels).sum()
    assert not torch.isclose(SpreadObjective(margin=0.3, start_margin=0.2)(model, images, labels).value, value)


def test_config_round_trips_through_plain_data():
    config = MatrixCapsConfig(conv1_channels=8, routing_iterations=3)
    assert MatrixCapsConfig.from_dict(config.to_dict()) == config


def test_the_margin_ramps_from_start_to_end_over_the_epochs_of_fit(monkeypatch):
    objective = SpreadObjective(ramp_epochs=4)
    assert [objective.margin_at(epoch) for epoch in range(1, 8)] == pytest.approx(
        [0.2, 0.375, 0.55, 0.725, 0.9, 0.9, 0.9])
    assert objective.margin_at(None) == 0.9  # evaluating a trained network: the final margin
    margins = []
    monkeypatch.setattr("capsedu.training.objectives.spread_loss",
                        lambda a, labels, margin: margins.append(margin) or a.sum() * 0)
    data = [(torch.rand(2, 1, 28, 28), torch.tensor([1, 2]))]
    capsedu.fit(_tiny_network(), data, epochs=6, lr=1e-3, progress=False, objective=objective)
    assert margins == pytest.approx([0.2, 0.375, 0.55, 0.725, 0.9, 0.9])


@pytest.mark.parametrize("activations, labels, margin, error, message", [
    (torch.rand(0, 10), torch.zeros(0, dtype=torch.long), 0.5, ValueError, "activations is an empty batch"),
    (torch.rand(2, 10), torch.tensor([1, 10]), 0.5, ValueError, "labels must be in"),
    (torch.rand(2, 10), torch.tensor([1.0, 2.0]), 0.5, TypeError, "labels must hold integer"),
    (torch.rand(2, 10), torch.tensor([1, 2, 3]), 0.5, ValueError, "labels has 3 labels"),
    (torch.rand(2, 10), torch.tensor([1, 2]), 0.0, ValueError, "margin must be"),
])
def test_spread_loss_names_bad_input(activations, labels, margin, error, message):
    with pytest.raises(error, match=message):
        spread_loss(activations, labels, margin)


@pytest.mark.parametrize("ramp, start, end, error", [(-1, 0.2, 0.9, TypeError), (True, 0.2, 0.9, TypeError),
                                                     (3, 0.9, 0.2, ValueError), (3, 0.0, 0.9, ValueError)])
def test_the_spread_objective_names_bad_arguments(ramp, start, end, error):
    with pytest.raises(error, match="ramp_epochs|start_margin and margin"):
        SpreadObjective(margin=end, start_margin=start, ramp_epochs=ramp)


def test_beta_a_in_logit_units_is_the_same_function():
    """The option only reparametrises beta_a (stored as lambda * beta_a): equal weights, equal outputs."""
    small = dict(conv1_channels=8, primary_types=2, conv_caps1_types=2, conv_caps2_types=2)
    torch.manual_seed(0)
    plain = MatrixCapsNet(MatrixCapsConfig(**small))
    scaled = MatrixCapsNet(MatrixCapsConfig(**small, beta_a_logit_units=True))
    with torch.no_grad():
        for layer in (plain.caps1, plain.caps2, plain.class_caps):
            layer.beta_a.normal_(0.0, 300.0)  # of the size the activations need at lambda = 0.001
    state = plain.state_dict()
    for name in ("caps1", "caps2", "class_caps"):
        state = {**state, f"{name}.beta_a": state[f"{name}.beta_a"] * plain.config.inverse_temperature}
    scaled.load_state_dict(state)
    images = torch.rand(3, 1, 28, 28)
    torch.testing.assert_close(scaled(images), plain(images))
    scaled.load_state_dict(plain.state_dict())  # the same numbers read in logit units: another function
    assert not torch.allclose(scaled(images)[1], plain(images)[1])
