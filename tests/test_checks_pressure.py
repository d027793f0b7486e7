"""Tests for capsedu.course.checks.pressure: right answers pass, typical mistakes get their own hint."""

import pytest
import torch
import torch.nn.functional as F

import capsedu
from capsedu.course.checks._kit import STUB_HINT
from capsedu.course.checks.pressure import check_fgsm, check_margin_fgsm, check_vote_scores
from capsedu.explore.attacks import ScoresAsLogits, fgsm

pytestmark = pytest.mark.unit


def ce(model, x, y):
    return F.cross_entropy(ScoresAsLogits(model)(x), y)


def margin(model, x, y):
    return capsedu.margin_loss(model.class_scores(x), y)


def on_logs(model, x, y):
    return capsedu.margin_loss(ScoresAsLogits(model)(x), y)


def step(loss, move):
    """An attack that takes loss's gradient right (eval mode, a copy, autograd.grad), then moves."""
    def attack(model, images, labels, eps):
        x = images.detach().clone().requires_grad_(True)
        with capsedu.eval_mode(model):
            (gradient,) = torch.autograd.grad(loss(model, x, labels), x)
        return move(x.detach(), gradient, eps)
    return attack


def right(x, g, e):
    return (x + e * g.sign()).clamp(0, 1)


def in_train_mode(model, images, labels, eps):
    x = images.detach().clone().requires_grad_(True)
    (gradient,) = torch.autograd.grad(ce(model, x, labels), x)
    return right(x.detach(), gradient, eps)


def with_backward(model, images, labels, eps):
    x = images.detach().clone().requires_grad_(True)
    with capsedu.eval_mode(model):
        ce(model, x, labels).backward()
    return right(x.detach(), x.grad, eps)


def always_back_to_train(model, images, labels, eps):
    model.eval()
    attacked = fgsm(model, images, labels, eps)
    model.train()
    return attacked


def in_place(model, images, labels, eps):
    images.requires_grad_(True)
    with capsedu.eval_mode(model):
        (gradient,) = torch.autograd.grad(ce(model, images, labels), images)
    return right(images.detach(), gradient, eps)


# the mistakes either check names before it compares any pixel
ATTACK_MISTAKES = [
    (lambda loss: (lambda m, x, y, e: (m.eval(), fgsm(m, x, y, e))[1]), "left the network in eval mode"),
    (lambda loss: always_back_to_train, "left a network that was in eval mode in training mode"),
    (lambda loss: in_train_mode, "training mode: switch to eval mode"),
    (lambda loss: with_backward, "left gradients in the network's weights"),
    (lambda loss: in_place, "changed the images it was given"),
    (lambda loss: (lambda m, x, y, e: x.clamp_(0.1, 0.9)), "changed the images it was given"),
    (lambda loss: (lambda m, x, y, e: step(loss, right)(m, x, y, e).requires_grad_(True)), "detached"),
    (lambda loss: (lambda m, x, y, e: step(loss, right)(m, x, y, e)[0]), "attacked images of shape"),
    (lambda loss: step(loss, lambda x, g, e: x + e * g.sign()), "clip"),
    (lambda loss: step(loss, lambda x, g, e: (x - e * g.sign()).clamp(0, 1)), "DOWN the loss"),
    (lambda loss: step(loss, lambda x, g, e: (x + e * g).clamp(0, 1)), "SIGN of the gradient: every"),
    (lambda loss: step(loss, lambda x, g, e: (x + e * g / g.norm()).clamp(0, 1)), "scaled to length 1"),
    (lambda loss: step(loss, lambda x, g, e: (x * (1 + e * g.sign())).clamp(0, 1)), "not a fraction"),
]


@pytest.mark.parametrize("wrong, fragment", ATTACK_MISTAKES)
def test_check_fgsm_names_mistakes(wrong, fragment):
    result = check_fgsm(wrong(ce))
    assert not result and fragment in result.message, result.message


def test_check_fgsm_names_the_margin_loss():
    result = check_fgsm(step(margin, right))
    assert not result and "climbs the margin loss" in result.message, result.message


def test_check_fgsm_passes_fgsm_and_hints_a_stub():
    assert check_fgsm(fgsm)
    assert check_fgsm(step(ce, right))

    def stub(model, images, labels, eps):
        raise NotImplementedError
    result = check_fgsm(stub)
    assert not result and STUB_HINT in result.message


@pytest.mark.parametrize("wrong, fragment", ATTACK_MISTAKES)
def test_check_margin_fgsm_names_the_same_mistakes(wrong, fragment):
    result = check_margin_fgsm(wrong(margin))
    assert not result and fragment in result.message, result.message


@pytest.mark.parametrize("wrong, fragment", [
    (step(ce, right), "cross-entropy FGSM"),
    (fgsm, "cross-entropy FGSM"),
    (step(on_logs, right), "not their logarithm"),
])
def test_check_margin_fgsm_names_the_wrong_loss(wrong, fragment):
    result = check_margin_fgsm(wrong)
    assert not result and fragment in result.message, result.message


def test_check_margin_fgsm_passes_the_margin_step_and_hints_a_stub():
    assert check_margin_fgsm(step(margin, right))
    assert check_margin_fgsm(lambda m, x, y, e: fgsm(m, x, y, e, loss="margin"))

    def stub(model, images, labels, eps):
        raise NotImplementedError
    result = check_margin_fgsm(stub)
    assert not result and STUB_HINT in result.message


def votes(model, images):
    return model.class_caps.prediction_vectors(model.encode(images))  # (B, I, J, D)


def uniform(model, images):
    u_hat = votes(model, images)
    return capsedu.squash(u_hat.sum(dim=1) / u_hat.shape[2], dim=-1).norm(dim=-1)


def detached(model, images):
    with torch.no_grad():
        return uniform(model, images)


@pytest.mark.parametrize("wrong, fragment", [
    (lambda m, x: (votes(m, x).sum(dim=1) / 10).norm(dim=-1), "squash the weighted sum"),
    (lambda m, x: capsedu.squash(votes(m, x).mean(dim=1), dim=-1).norm(dim=-1), "not the mean over the I"),
    (lambda m, x: capsedu.squash(votes(m, x).sum(dim=1), dim=-1).norm(dim=-1), "c_ij = 1/J before summing"),
    (lambda m, x: m.class_scores(x), "routed network's lengths"),
    (lambda m, x: capsedu.squash(votes(m, x).sum(dim=1) / 10, dim=-1), "of shape (3, 10)"),
    (detached, "no gradient back to the images"),
])
def test_check_vote_scores_names_mistakes(wrong, fragment):
    result = check_vote_scores(wrong)
    assert not result and fragment in result.message, result.message


def test_check_vote_scores_passes_the_uniform_couplings_and_hints_a_stub():
    assert check_vote_scores(uniform)

    def stub(model, images):
        raise NotImplementedError("write it")
    result = check_vote_scores(stub)
    assert not result and STUB_HINT in result.message


def test_check_pre_squash_passes_the_lengths_before_the_squash_and_names_mistakes(capsys):
    from capsedu.course.checks.pressure import check_pre_squash, reference_pre_squash

    assert check_pre_squash(reference_pre_squash)

    def votes_of(model, images):
        return model.class_caps.prediction_vectors(model.encode(images))

    def in_place(model, images):
        images.data.mul_(0.5)  # past autograd's guard on a leaf that requires grad
        return reference_pre_squash(model, images)

    cases = {"after the squash": lambda m, x: m.class_scores(x),
             "couplings routing starts with": lambda m, x: (votes_of(m, x).sum(dim=1) / 10).norm(dim=-1),
             "weigh each vote by its coupling": lambda m, x: votes_of(m, x).sum(dim=1).norm(dim=-1),
             "carry no gradient": lambda m, x: reference_pre_squash(m, x).detach(),
             "changed the images in place": in_place,
             "one length per image and class": lambda m, x: reference_pre_squash(m, x).sum(dim=1)}
    for fragment, wrong in cases.items():
        result = check_pre_squash(wrong)
        assert not result and fragment in result.message, (fragment, result.message)
