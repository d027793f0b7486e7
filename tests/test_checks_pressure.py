"""Tests for capsedu.course.checks.pressure: right answers pass, typical mistakes get their own hint."""

import pytest
import torch.nn.functional as F

import capsedu
from capsedu.course.checks.pressure import check_activity, check_fgsm
from capsedu.explore.attacks import ScoresAsLogits, fgsm

pytestmark = pytest.mark.unit


def step(model, images, labels, eps, move):
    x = images.clone().requires_grad_(True)
    with capsedu.eval_mode(model):
        F.cross_entropy(ScoresAsLogits(model)(x), labels).backward()
    return move(x.detach(), x.grad, eps)


@pytest.mark.parametrize("wrong, fragment", [
    (lambda m, x, y, e: step(m, x, y, e, lambda x, g, e: x + e * g.sign()), "clip"),
    (lambda m, x, y, e: step(m, x, y, e, lambda x, g, e: (x - e * g.sign()).clamp(0, 1)), "DOWN the loss"),
    (lambda m, x, y, e: step(m, x, y, e, lambda x, g, e: (x + e * g).clamp(0, 1)), "SIGN"),
    (lambda m, x, y, e: (m.eval(), fgsm(m, x, y, e))[1], "eval mode"),
    (lambda m, x, y, e: x.clamp_(0.1, 0.9), "changed the images"),
    (lambda m, x, y, e: fgsm(m, x.requires_grad_(True), y, e), "changed the images"),
    (lambda m, x, y, e: fgsm(m, x, y, e).requires_grad_(True), "detached"),
    (lambda m, x, y, e: fgsm(m, x, y, e)[0], "attacked images of shape"),
])
def test_check_fgsm_names_mistakes(wrong, fragment):
    result = check_fgsm(wrong)
    assert not result and fragment in result.message, result.message


def test_check_fgsm_passes_fgsm_and_hints_a_stub():
    assert check_fgsm(fgsm)

    def stub(model, images, labels, eps):
        raise NotImplementedError
    result = check_fgsm(stub)
    assert not result and "not written yet" in result.message


@pytest.mark.parametrize("wrong, fragment", [
    (lambda lengths, t: ((lengths > t).float().mean(1).eq(0).float().mean(), (lengths > t).float().mean(1).eq(1).float().mean()), "IMAGES"),
    (lambda lengths, t: ((lengths >= t).float().mean(0).eq(0).float().mean(), (lengths >= t).float().mean(0).eq(1).float().mean()), "ABOVE"),
    (lambda lengths, t: ((lengths > t).float().mean(0).eq(1).float().mean(), (lengths > t).float().mean(0).eq(0).float().mean()), "order"),
    (lambda lengths, t: None, "a pair (dead, always_on)"),
])
def test_check_activity_names_mistakes(wrong, fragment):
    result = check_activity(wrong)
    assert not result and fragment in result.message, result.message


def test_check_activity_passes_the_shares():
    on = lambda lengths, t: (lengths > t).float().mean(0)  # noqa: E731
    assert check_activity(lambda lengths, t: (float((on(lengths, t) == 0).float().mean()),
                                              float((on(lengths, t) == 1).float().mean())))
