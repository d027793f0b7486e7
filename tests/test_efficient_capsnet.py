"""Efficient-CapsNet (Mazzia et al. 2021): its squash, self-attention routing checked against a
literal loop that builds the self-attention matrix, and the network's sizes and errors."""

import math

import pytest
import torch

from capsedu import CapsNetConfig, load_checkpoint, save_checkpoint, squash
from capsedu.data.multimnist import PairTargets
from capsedu.nets.efficient_capsnet import EfficientCapsConfig, EfficientCapsNet, SelfAttentionCaps
from capsedu.nets.registry import build_network
from capsedu.nets.self_attention import efficient_squash, self_attention_routing
from capsedu.training.objectives import MarginObjective

pytestmark = pytest.mark.unit


def literal_routing(u_hat, prior):
    """One image, one output capsule at a time: the I x I self-attention matrix A_j, its row sums,
    a softmax over the outputs j, s_j = sum_i (c_ij + b_ij) u_hat_ij (b: the prior), then the squash."""
    B, I, J, D = u_hat.shape
    vs, cs = [], []
    for n in range(B):
        logits = torch.zeros(I, J, dtype=u_hat.dtype)
        for j in range(J):
            A = torch.zeros(I, I, dtype=u_hat.dtype)
            for i in range(I):
                for k in range(I):
                    A[i, k] = torch.dot(u_hat[n, i, j], u_hat[n, k, j]) / math.sqrt(D)
            logits[:, j] = A.sum(dim=1)
        c = torch.stack([torch.exp(row - row.max()) / torch.exp(row - row.max()).sum() for row in logits])
        v = []
        for j in range(J):
            s = sum((c[i, j] + prior[i, j]) * u_hat[n, i, j] for i in range(I))
            norm = torch.sqrt((s * s).sum() + 1e-8)
            v.append((1 - math.e ** -norm) * s / norm)
        vs.append(torch.stack(v)), cs.append(c)
    return torch.stack(vs), torch.stack(cs)


def problem(B=2, I=5, J=3, D=4, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(B, I, J, D, generator=g, dtype=dtype), 0.1 * torch.randn(I, J, generator=g, dtype=dtype)


def test_routing_equals_the_literal_loop_in_values_and_gradients():
    u_hat, prior = problem()
    u_hat.requires_grad_(True), prior.requires_grad_(True)
    v, c = self_attention_routing(u_hat, prior)
    v_ref, c_ref = literal_routing(u_hat, prior)
    torch.testing.assert_close(v, v_ref), torch.testing.assert_close(c, c_ref)
    weights = torch.randn_like(v)
    grads = torch.autograd.grad((v * weights).sum(), (u_hat, prior))
    grads_ref = torch.autograd.grad((v_ref * weights).sum(), (u_hat, prior))
    for got, want in zip(grads, grads_ref):
        torch.testing.assert_close(got, want)


def test_couplings_are_a_softmax_over_the_output_capsules():
    u_hat, prior = problem(B=3, I=6, J=4)
    _, c = self_attention_routing(u_hat, prior)
    torch.testing.assert_close(c.sum(dim=2), torch.ones(3, 6, dtype=c.dtype))  # each input shares itself
    assert not torch.allclose(c.sum(dim=1), torch.ones(3, 4, dtype=c.dtype))  # not over the inputs
    assert (c > 0).all()


def test_priors_change_the_output_but_not_the_couplings():
    u_hat, prior = problem()
    v0, c0 = self_attention_routing(u_hat)
    v1, c1 = self_attention_routing(u_hat, prior)
    torch.testing.assert_close(c0, c1)
    assert not torch.allclose(v0, v1)


def test_a_prediction_that_agrees_with_the_others_gets_more_coupling():
    u_hat = torch.zeros(1, 3, 2, 2, dtype=torch.float64)
    u_hat[0, :, 0] = torch.tensor([[1.0, 0.0], [1.0, 0.1], [0.9, 0.0]])  # output 0: all agree
    u_hat[0, :, 1] = torch.tensor([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0]])  # output 1: they disagree
    _, c = self_attention_routing(u_hat)
    assert (c[0, :, 0] > c[0, :, 1]).all()


def test_gradcheck_in_float64():
    u_hat, prior = problem(B=1, I=3, J=2, D=3)
    assert torch.autograd.gradcheck(lambda u, p: self_attention_routing(u, p)[0],
                                    (u_hat.requires_grad_(True), prior.requires_grad_(True)))


def test_efficient_squash_formula_range_and_zero_vector():
    s = torch.randn(50, 16, dtype=torch.float64) * torch.logspace(-3, 2, 50, dtype=torch.float64)[:, None]
    v = efficient_squash(s)
    norm = s.norm(dim=-1, keepdim=True)
    torch.testing.assert_close(v, (1 - torch.exp(-norm)) * s / norm, rtol=1e-6, atol=1e-9)
    assert (v.norm(dim=-1) < 1).all()
    zero = torch.zeros(1, 8, requires_grad=True)
    out = efficient_squash(zero)
    out.sum().backward()
    assert out.abs().sum() == 0 and torch.isfinite(zero.grad).all()


def test_efficient_squash_rises_linearly_where_eq1_is_flat():
    small = torch.tensor([[1e-3, 0.0]], dtype=torch.float64)
    assert efficient_squash(small).norm() == pytest.approx(1e-3, rel=2e-3)  # slope 1
    assert squash(small).norm() < 2e-6  # Eq. 1: |s|^2, slope 0


@pytest.mark.parametrize("bad, error, message", [
    (torch.tensor(1.0), ValueError, "scalar"),
    (torch.tensor([[1, 2]]), TypeError, "floating-point"),
])
def test_efficient_squash_rejects_bad_input(bad, error, message):
    with pytest.raises(error, match=message):
        efficient_squash(bad)
    with pytest.raises(ValueError, match="dim"):
        efficient_squash(torch.ones(2, 3), dim=2)


def test_routing_rejects_bad_input_naming_the_argument():
    u_hat, prior = problem()
    with pytest.raises(ValueError, match="u_hat"):
        self_attention_routing(u_hat[0])  # (I, J, D)
    with pytest.raises(ValueError, match="u_hat"):
        self_attention_routing(u_hat[:0])  # empty batch
    with pytest.raises(ValueError, match="prior must have shape"):
        self_attention_routing(u_hat, prior.T)
    with pytest.raises(TypeError, match="u_hat must be a floating-point tensor"):
        self_attention_routing(u_hat.long())


def test_network_has_the_papers_161824_parameters_and_shapes():
    torch.manual_seed(0)
    model = EfficientCapsNet()
    assert model.classifier_parameters() == 161_824
    assert model.primary.groups == 128 and model.primary.kernel_size == (9, 9)
    out = model(torch.rand(3, 1, 28, 28), return_couplings=True)
    assert out.capsules.shape == (3, 10, 16) and out.reconstruction.shape == (3, 1, 28, 28)
    assert out.couplings.shape == (3, 16, 10) and ((out.lengths >= 0) & (out.lengths < 1)).all()
    assert model.class_scores(torch.rand(2, 1, 28, 28)).shape == (2, 10)


def test_network_trains_and_round_trips_through_a_checkpoint(tmp_path):
    torch.manual_seed(0)
    model = build_network("efficient", EfficientCapsConfig().to_dict())
    images, labels = torch.rand(8, 1, 28, 28), torch.arange(8)
    optimiser, objective = torch.optim.Adam(model.parameters(), lr=1e-3), MarginObjective()
    first = objective(model, images, labels).value
    for _ in range(5):
        optimiser.zero_grad()
        objective(model, images, labels).value.backward()
        optimiser.step()
    assert objective(model, images, labels).value < first
    model.eval()
    save_checkpoint(tmp_path / "e.pt", model)
    loaded, info = load_checkpoint(tmp_path / "e.pt")
    assert info["kind"] == "efficient" and isinstance(loaded, EfficientCapsNet)
    torch.testing.assert_close(loaded.eval().class_scores(images), model.class_scores(images))


def test_network_rejects_bad_input_and_configs():
    model = EfficientCapsNet()
    with pytest.raises(ValueError, match="x must have shape"):
        model(torch.rand(2, 1, 32, 32))
    with pytest.raises(ValueError, match="x"):
        model(torch.full((2, 1, 28, 28), float("nan")))
    with pytest.raises(ValueError, match="x"):
        model(torch.rand(0, 1, 28, 28))
    with pytest.raises(TypeError, match="labels must be a torch.Tensor"):
        MarginObjective()(model, torch.rand(2, 1, 28, 28), PairTargets(
            torch.zeros(2, 10), torch.zeros(2, 2, dtype=torch.long), torch.zeros(2, 2, 1, 28, 28)))
    with pytest.raises(ValueError, match="num_primary_caps"):
        EfficientCapsNet(EfficientCapsConfig(num_primary_caps=10))
    with pytest.raises(ValueError, match="one kernel and one stride"):
        EfficientCapsNet(EfficientCapsConfig(conv_kernels=(5, 3)))
    with pytest.raises(TypeError, match="EfficientCapsConfig"):
        EfficientCapsNet(CapsNetConfig.cpu())
    with pytest.raises(ValueError, match="u must have shape"):
        SelfAttentionCaps(16, 8, 10, 16)(torch.rand(2, 16, 4))


def test_a_config_stored_with_the_old_field_name_loads():
    old = {**EfficientCapsConfig().to_dict(), "primary_caps": 4}  # before checkpoint version 4
    del old["num_primary_caps"]
    assert EfficientCapsConfig.from_dict(old).num_primary_caps == 4
    assert EfficientCapsConfig.from_dict(old) == EfficientCapsConfig(num_primary_caps=4)
    with pytest.raises(ValueError, match="both the old and the new name"):
        EfficientCapsConfig.from_dict({"primary_caps": 4, "num_primary_caps": 4})
