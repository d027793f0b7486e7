import pytest
import torch

from capsedu import (
    CapsNet,
    CapsNetConfig,
    DigitCaps,
    PrimaryCaps,
    dynamic_routing,
    margin_loss,
    squash,
)
from capsedu.nets.efficient_capsnet import EfficientCapsConfig, EfficientCapsNet
from capsedu.nets.em_routing import em_routing
from capsedu.nets.matrix_capsnet import MatrixCapsConfig, MatrixCapsNet
from capsedu.nets.routing_fast import factored_routing
from capsedu.nets.self_attention import efficient_squash, self_attention_routing
from capsedu.training.objectives import MarginObjective, SpreadObjective

pytestmark = pytest.mark.unit


def test_primary_caps_paper_shapes(rng):
    layer = PrimaryCaps(256, 32, 8, kernel_size=9, stride=2)
    u = layer(torch.randn(2, 256, 20, 20, generator=rng))
    assert u.shape == (2, 1152, 8)
    assert (u.norm(dim=-1) < 1).all()


def test_primary_caps_layout_is_type_major(rng):
    layer = PrimaryCaps(3, num_types=2, caps_dim=4, kernel_size=3, stride=1)
    x = torch.randn(1, 3, 5, 5, generator=rng)
    features = layer.conv(x)  # (1, 8, 3, 3)
    u = layer(x)  # (1, 2*3*3, 4)
    t, y, xx = 1, 2, 0  # capsule of type 1 at grid position (2, 0)
    expected = squash(features[0, t * 4:(t + 1) * 4, y, xx])
    torch.testing.assert_close(u[0, t * 9 + y * 3 + xx], expected)


def test_digit_caps_shapes_init_and_prediction_vectors(rng):
    torch.manual_seed(0)
    layer = DigitCaps(in_caps=1152, in_dim=8, out_caps=10, out_dim=16)
    assert layer.W.shape == (1152, 10, 16, 8)
    assert abs(layer.W.std().item() - 0.01) < 5e-4
    u = torch.randn(3, 1152, 8, generator=rng)
    u_hat = layer.prediction_vectors(u)
    assert u_hat.shape == (3, 1152, 10, 16)
    torch.testing.assert_close(u_hat[1, 7, 3], layer.W[7, 3] @ u[1, 7])
    v, c = layer(u)
    assert v.shape == (3, 10, 16) and c.shape == (3, 1152, 10)


def test_digit_caps_iteration_override(rng):
    layer = DigitCaps(6, 4, 3, 5, routing_iterations=3)
    u = torch.randn(2, 6, 4, generator=rng)
    _, c1 = layer(u, routing_iterations=1)
    torch.testing.assert_close(c1, torch.full_like(c1, 1 / 3))


def test_bad_inputs():
    with pytest.raises(ValueError, match=r"x must have 256 channels"):
        PrimaryCaps(256, 32, 8)(torch.zeros(1, 3, 20, 20))
    with pytest.raises(ValueError, match=r"x must be a 4-D tensor"):
        PrimaryCaps(256, 32, 8)(torch.zeros(256, 20, 20))
    with pytest.raises(ValueError, match="empty batch"):
        PrimaryCaps(1, 2, 4, 3, 1)(torch.zeros(0, 1, 5, 5))
    with pytest.raises(ValueError, match=r"u must have shape \(B, 6, 4\)"):
        DigitCaps(6, 4, 3, 5)(torch.zeros(2, 6, 5))
    with pytest.raises(ValueError, match="num_types must be >= 1"):
        PrimaryCaps(1, 0, 4)
    with pytest.raises(TypeError, match="out_dim must be an int"):
        DigitCaps(6, 4, 3, 5.0)


NETWORKS = {
    "capsnet factored": (lambda: CapsNet(CapsNetConfig(conv1_channels=8, primary_types=2, primary_dim=4)),
                         MarginObjective()),
    "capsnet readable": (lambda: CapsNet(CapsNetConfig(conv1_channels=8, primary_types=2, primary_dim=4,
                                                       routing="readable", detach_inner=False)),
                         MarginObjective()),
    "efficient": (lambda: EfficientCapsNet(EfficientCapsConfig()), MarginObjective()),
    "em": (lambda: MatrixCapsNet(MatrixCapsConfig(conv1_channels=4, primary_types=2, conv_caps1_types=2,
                                                  conv_caps2_types=2)), SpreadObjective()),
}


@pytest.mark.parametrize("name", NETWORKS)
def test_a_training_step_scans_its_input_for_nan_once(monkeypatch, name):
    """The network checks x once where it enters; layers, routing and loss add no scan."""
    build, objective = NETWORKS[name]
    model = build()
    images, labels = torch.rand(3, 1, 28, 28), torch.tensor([1, 2, 3])
    scans = []
    original = torch.isfinite
    monkeypatch.setattr(torch, "isfinite", lambda x: scans.append(tuple(x.shape)) or original(x))
    objective(model, images, labels).value.backward()
    assert scans == [(3, 1, 28, 28)]
    images[0, 0, 0, 0] = float("nan")
    with pytest.raises(ValueError, match="x contains 1 NaN"):
        objective(model, images, labels)


def _nan(*shape):
    return torch.full(shape, float("nan"))


INNER = {
    "squash": lambda: squash(_nan(2, 3, 4)),
    "efficient_squash": lambda: efficient_squash(_nan(2, 3, 4)),
    "margin_loss": lambda: margin_loss(_nan(2, 10), torch.tensor([0, 1])),
    "dynamic_routing": lambda: dynamic_routing(_nan(2, 5, 3, 4), 3)[0],
    "factored_routing": lambda: factored_routing(_nan(5, 3, 4, 2), torch.rand(2, 5, 2), 3)[0],
    "self_attention_routing": lambda: self_attention_routing(_nan(2, 5, 3, 4), _nan(5, 3))[0],
    "em_routing": lambda: em_routing(_nan(2, 5, 3, 16), torch.rand(2, 5), torch.zeros(3), torch.zeros(3))[0],
}


@pytest.mark.parametrize("name", INNER)
def test_inner_functions_check_shapes_but_do_not_scan_values(name):
    """Validation at the entry points only: inside a network a NaN passes through (the network
    rejected its images already), and no function pays a full pass for the scan."""
    assert torch.isnan(INNER[name]()).any()


def test_each_function_exists_once_without_an_unchecked_twin():
    import capsedu.nets.em_routing as em
    import capsedu.nets.losses as losses
    import capsedu.nets.self_attention as attention
    import capsedu.nets.squash as squash_module

    for module, name in [(squash_module, "squash"), (losses, "margin_loss"), (attention, "efficient_squash"),
                         (attention, "self_attention_routing"), (em, "em_routing")]:
        assert hasattr(module, name) and not hasattr(module, f"{name}_unchecked"), name
