"""Tests for capsedu.explore.adaptive (the true routing gradient, the vote attack's network, logits
views) and the attacks lesson 13's adaptive study adds: targeted Auto-PGD, Square, and chains of
attacks that meet only what the chain before them left (attacked_correct's ``where``)."""

import pytest
import torch
from test_attacks import Constant  # a network that answers 0 for a dark image, 1 for a bright one

from capsedu.course.checks._probe import probe_capsnet
from capsedu.explore.adaptive import (
    LengthsAsLogits,
    PreSigmoidLogits,
    UniformCouplings,
    full_routing_gradient,
)
from capsedu.explore.attacks import ScoresAsLogits, apgd_targeted, attacked_correct, pgd, square
from capsedu.nets.em_routing import em_routing
from capsedu.nets.matrix_capsnet import MatrixCapsConfig, MatrixCapsNet
from capsedu.nets.squash import squash

pytestmark = pytest.mark.unit


def directional_derivatives(model, u, direction, step=1e-6):
    """The derivative of the first class capsule's summed length along ``direction`` in the
    primary capsules ``u`` (B, I, D_in): autograd through ``full_routing_gradient(model)``,
    autograd through ``model`` as it is, and central differences (everything after ``u`` is the
    routing layer; in float64 here, where the primary capsules squash in float32)."""
    def value(net, x):
        return net.class_caps(x)[0].norm(dim=-1)[:, 0].sum()
    with torch.no_grad():
        numeric = (value(model, u + step * direction) - value(model, u - step * direction)) / (2 * step)
    derivatives = []
    for net in (full_routing_gradient(model), model):
        x = u.clone().requires_grad_(True)
        (gradient,) = torch.autograd.grad(value(net, x), x)
        derivatives.append(float((gradient * direction).sum()))
    return derivatives[0], derivatives[1], float(numeric)


def test_the_full_routing_gradient_is_the_derivative_of_what_the_network_computes():
    """The known answer: central differences in float64. The shipped setting's backward (couplings
    held fixed, detach_inner=True) is a surrogate, off by far more; both compute the same outputs."""
    model = probe_capsnet(3).double()
    with torch.no_grad():
        model.class_caps.W.mul_(20)  # long votes: couplings that move with the input
    generator = torch.Generator().manual_seed(0)
    images = torch.rand(2, 1, 28, 28, generator=generator, dtype=torch.float64)
    with torch.no_grad():
        u = model.encode(images).double()  # (B, I, D_in)
    direction = torch.randn(u.shape, generator=generator, dtype=torch.float64)
    full, surrogate, numeric = directional_derivatives(model, u, direction)
    assert full == pytest.approx(numeric, rel=1e-6)
    assert abs(surrogate - numeric) > 1e3 * abs(full - numeric)
    assert abs(surrogate - numeric) > 0.01 * abs(numeric)
    assert model.class_caps.detach_inner  # the network given is left as it was
    with torch.no_grad():
        assert torch.equal(full_routing_gradient(model).class_scores(images), model.class_scores(images))


def test_uniform_couplings_squash_the_plain_sum_of_the_votes():
    model = probe_capsnet(4)
    images = torch.rand(3, 1, 28, 28, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        u_hat = model.class_caps.prediction_vectors(model.encode(images))  # (B, I, J, D)
        by_hand = squash(u_hat.sum(dim=1) / u_hat.shape[2], dim=-1).norm(dim=-1)  # c_ij = 1/J
        assert torch.allclose(UniformCouplings(model).class_scores(images), by_hand, atol=1e-6)
        assert not torch.allclose(UniformCouplings(model).class_scores(images), model.class_scores(images))
    with pytest.raises(TypeError, match="model must be a capsedu.CapsNet"):
        UniformCouplings(torch.nn.Linear(2, 2))


def test_the_em_networks_logits_are_its_activations_before_the_sigmoid():
    torch.manual_seed(0)
    model = MatrixCapsNet(MatrixCapsConfig(conv1_channels=4, primary_types=2, conv_caps1_types=2,
                                           conv_caps2_types=2)).eval()
    images = torch.rand(2, 1, 28, 28)
    with torch.no_grad():
        assert torch.allclose(torch.sigmoid(PreSigmoidLogits(model)(images)), model.class_scores(images), atol=1e-6)
    votes, activations = torch.randn(2, 5, 3, 16), torch.rand(2, 5)
    beta = torch.zeros(3)
    _, a_out, _ = em_routing(votes, activations, beta, beta)
    _, logit, _ = em_routing(votes, activations, beta, beta, logits=True)
    assert torch.allclose(torch.sigmoid(logit), a_out)
    with pytest.raises(TypeError, match="MatrixCapsNet"):
        PreSigmoidLogits(probe_capsnet(0))


def test_lengths_as_logits_hand_attacks_the_lengths_themselves():
    model = probe_capsnet(2)
    images = torch.rand(2, 1, 28, 28, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        assert torch.equal(LengthsAsLogits(model)(images), model.class_scores(images))
        assert torch.allclose(ScoresAsLogits(model)(images), model.class_scores(images).log())


def test_a_chain_attacks_only_the_images_still_right_and_counts_the_rest_wrong():
    model, images, labels = Constant(), torch.zeros(6, 1, 4, 4), torch.tensor([0, 0, 0, 0, 0, 1])
    seen = []

    def brighten_some(x, y):
        seen.append(len(x))
        return torch.where(torch.arange(len(x)).view(-1, 1, 1, 1) % 2 == 0, torch.ones_like(x), x)
    where = torch.tensor([True, True, False, True, True, False])
    right = attacked_correct(model, images, labels, brighten_some, batch_size=3, where=where)
    assert seen == [3, 1]  # four images chosen, in batches of three
    assert right.tolist() == [False, True, False, False, False, False]  # 0, 3, 4 turned to 1; 2, 5 not attacked
    assert not attacked_correct(model, images, labels, brighten_some, where=torch.zeros(6, dtype=torch.bool)).any()
    assert seen == [3, 1]  # nothing left: no call
    with pytest.raises(ValueError, match="where must be a bool tensor of shape"):
        attacked_correct(model, images, labels, None, where=torch.ones(5, dtype=torch.bool))


def margins(model, images, labels):
    with torch.no_grad():
        z = ScoresAsLogits(model)(images)
    return z.gather(1, labels[:, None]).squeeze(1) - z.scatter(1, labels[:, None], float("-inf")).max(dim=1).values


@pytest.mark.tools  # over a second of CPU: the unit tier keeps a margin below its 2.5 s
@pytest.mark.parametrize("make", [lambda m: apgd_targeted(m, 0.05, steps=10), lambda m: square(m, 0.05, queries=50),
                                  lambda m: pgd(m, 0.05, steps=3, logits=LengthsAsLogits(m))])
def test_the_added_attacks_stay_in_the_ball_lower_the_margin_and_leave_the_state_as_found(make):
    generator = torch.Generator().manual_seed(3)
    model = probe_capsnet(3).train()
    images = torch.rand(8, 1, 28, 28, generator=generator)
    with torch.no_grad():
        labels = model.eval().class_scores(images).argmax(dim=1)  # every image right at the start
    model.train()
    state = torch.random.get_rng_state()
    attacked = make(model)(images, labels)
    assert model.training and torch.equal(torch.random.get_rng_state(), state)
    assert float((attacked - images).abs().max()) <= 0.05 + 1e-6 and attacked.min() >= 0 and attacked.max() <= 1
    assert margins(model.eval(), attacked, labels).mean() < margins(model, images, labels).mean()
    assert torch.equal(attacked, make(model)(images, labels))  # seeded


def test_a_logits_view_must_be_a_module():
    with pytest.raises(TypeError, match="logits must be an nn.Module"):
        pgd(probe_capsnet(0), 0.1, logits=lambda x: x)
