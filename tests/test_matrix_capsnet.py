"""The matrix-capsule network of lesson 11 (in preparation): shapes, sizes, the spread loss, the
patches every convolutional capsule routes, and gradients that reach every parameter."""

import torch

from capsedu.nets.matrix_capsnet import (
    ClassMatrixCaps,
    ConvMatrixCaps,
    MatrixCapsConfig,
    MatrixCapsNet,
    spread_loss,
)


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
    layer = ConvMatrixCaps(in_types=2, out_types=3, kernel=3, stride=2, iterations=1, inverse_temperature=1.0)
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
    layer = ClassMatrixCaps(in_types=1, num_classes=2, iterations=1, inverse_temperature=1.0)
    poses = torch.randn(1, 1, 1, 16).expand(1, 1, 3, 3, 16)  # one pose repeated on a 3 x 3 grid
    votes = layer.votes(poses).view(3, 3, 2, 16)  # (H, W, J, 16)
    plain = votes - votes[0, 0]  # everything but the coordinates cancels
    torch.testing.assert_close(plain[..., 3], torch.tensor([0.0, 1 / 3, 2 / 3]).view(1, 3, 1).expand(3, 3, 2))
    torch.testing.assert_close(plain[..., 7], torch.tensor([0.0, 1 / 3, 2 / 3]).view(3, 1, 1).expand(3, 3, 2))
    others = [k for k in range(16) if k not in (3, 7)]
    torch.testing.assert_close(plain[..., others], torch.zeros(3, 3, 2, 14))
