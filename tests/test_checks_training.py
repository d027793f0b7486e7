"""Tests for capsedu.course.checks.training: right answers pass, typical mistakes get their own hint."""

import pytest
import torch
from conftest import assert_hint

from capsedu import capsnet_loss, margin_loss, squash
from capsedu.course.checks._kit import STUB_HINT
from capsedu.course.checks.training import (
    check_margin_violations,
    check_train_step,
    check_uniform_lengths,
)
from capsedu.training.step import train_step as capsedu_train_step

pytestmark = pytest.mark.unit


# ---------------------------------------------------------------- one training step

def stub(*args):
    raise NotImplementedError("write your solution here, then run the check below")


def train_step(model, optimizer, images, labels):
    optimizer.zero_grad()
    loss, _ = capsnet_loss(model, images, labels)
    loss.backward()
    optimizer.step()
    return loss.item()


def no_zero_grad(model, optimizer, images, labels):
    loss, _ = capsnet_loss(model, images, labels)
    loss.backward()
    optimizer.step()
    return loss.item()


def no_step(model, optimizer, images, labels):
    optimizer.zero_grad()
    loss, _ = capsnet_loss(model, images, labels)
    loss.backward()
    return loss.item()


def margin_only(model, optimizer, images, labels):
    optimizer.zero_grad()
    loss = margin_loss(model(images, labels).lengths, labels)
    loss.backward()
    optimizer.step()
    return loss.item()


def masked_by_prediction(model, optimizer, images, labels):
    optimizer.zero_grad()
    out = model(images)
    loss = margin_loss(out.lengths, labels) + 0.0005 * ((out.reconstruction - images) ** 2).sum(
        dim=(1, 2, 3)).mean()
    loss.backward()
    optimizer.step()
    return loss.item()


def loss_after_step(model, optimizer, images, labels):
    train_step(model, optimizer, images, labels)
    return capsnet_loss(model, images, labels)[0].item()


def double_loss_gradient(model, optimizer, images, labels):
    optimizer.zero_grad()
    loss, _ = capsnet_loss(model, images, labels)
    (2 * loss).backward()
    optimizer.step()
    return loss.item()


def step_before_backward(model, optimizer, images, labels):
    optimizer.zero_grad()
    loss, _ = capsnet_loss(model, images, labels)
    optimizer.step()
    loss.backward()
    return loss.item()


def returns_the_tensor(model, optimizer, images, labels):
    optimizer.zero_grad()
    loss, _ = capsnet_loss(model, images, labels)
    loss.backward()
    optimizer.step()
    return loss


def test_check_train_step_passes(capsys):
    result = check_train_step(train_step)
    assert result.passed and result.message.startswith("✅")
    assert result.message in capsys.readouterr().out
    assert check_train_step(capsedu_train_step)


def test_check_train_step_stub():
    assert_hint(check_train_step(stub), STUB_HINT)


@pytest.mark.parametrize("wrong, fragment", [
    (no_zero_grad, "previous batch were added"),
    (no_step, "after loss.backward() call optimizer.step()"),
    (step_before_backward, "BEFORE loss.backward()"),
    (returns_the_tensor, "loss.item(), a Python float"),
    (lambda m, o, x, y: torch.tensor(train_step(m, o, x, y)), "you returned the loss tensor"),
    (margin_only, "only the margin loss"),
    (masked_by_prediction, "learned from the wrong capsules"),
    (loss_after_step, "before the update"),
    (double_loss_gradient, "differently"),
    (lambda m, o, x, y: None, "as a number"),
    (lambda m, o, x: 0.0, "raised TypeError"),
])
def test_check_train_step_hints(wrong, fragment):
    assert_hint(check_train_step(wrong), fragment)


# ---------------------------------------------------------------- where the margin loss pulls

def violations(lengths, labels):
    present = torch.nn.functional.one_hot(labels, lengths.shape[1]).bool()
    too_short = (lengths < 0.9) & present
    too_long = (lengths > 0.1) & ~present
    return (too_short | too_long).any(dim=1)


def test_check_margin_violations_passes():
    assert check_margin_violations(violations)
    assert check_margin_violations(lambda lengths, labels: margin_loss(
        lengths, labels) * 0 + torch.stack([margin_loss(lengths[k:k + 1], labels[k:k + 1]) > 0
                                            for k in range(len(labels))]))


@pytest.mark.parametrize("wrong, fragment", [
    (lambda lengths, labels: lengths.gather(1, labels[:, None])[:, 0] < 0.9, "only the true capsule"),
    (lambda lengths, labels: violations(lengths, labels) & (lengths.gather(1, labels[:, None])[:, 0] >= 0.9)
     | ((lengths > 0.1) & ~torch.nn.functional.one_hot(labels, 10).bool()).any(1), "only the absent"),
    (lambda lengths, labels: ((lengths.gather(1, labels[:, None])[:, 0] <= 0.9)
                              | ((lengths >= 0.1) & ~torch.nn.functional.one_hot(labels, 10).bool()).any(1)),
     "exactly at a margin"),
    (lambda lengths, labels: lengths.argmax(dim=1) != labels, "misclassified"),
    (lambda lengths, labels: violations(lengths, labels).sum(), "one True/False per digit"),
    (lambda lengths, labels: torch.ones(len(labels), dtype=torch.bool), "two terms of Eq. 4"),
])
def test_check_margin_violations_hints(wrong, fragment):
    assert_hint(check_margin_violations(wrong), fragment)


# ---------------------------------------------------------------- uniform couplings

def uniform(model, images):
    u_hat = model.class_caps.prediction_vectors(model.encode(images))  # (B, I, J, D)
    return squash(u_hat.sum(dim=1) / u_hat.shape[2]).norm(dim=-1)


def test_check_uniform_lengths_passes():
    assert check_uniform_lengths(uniform)
    assert check_uniform_lengths(lambda model, images: model(images, routing_iterations=1).lengths)


@pytest.mark.parametrize("wrong, fragment", [
    (lambda m, x: squash(m.class_caps.prediction_vectors(m.encode(x)).mean(dim=1)).norm(dim=-1), "mean over the I"),
    (lambda m, x: (m.class_caps.prediction_vectors(m.encode(x)).sum(dim=1) / 10).norm(dim=-1), "squash s_j"),
    (lambda m, x: m(x).lengths, "network's own routing"),
    (lambda m, x: m(x, routing_iterations=1).capsules, "LENGTHS"),
    (lambda m, x: m(x, routing_iterations=2).lengths, "(1/J) sum_i u_hat"),
])
def test_check_uniform_lengths_hints(wrong, fragment):
    assert_hint(check_uniform_lengths(wrong), fragment)


# ---------------------------------------------------------------- capsedu's reference step

def test_capsedu_train_step_is_one_step_on_capsnet_loss():
    from capsedu.course.checks._probe import probe_capsnet

    images, labels = torch.rand(4, 1, 28, 28, generator=torch.Generator().manual_seed(0)), torch.tensor([1, 2, 3, 4])
    mine, theirs = probe_capsnet(3).train(), probe_capsnet(3).train()
    expected = train_step(mine, torch.optim.SGD(mine.parameters(), lr=0.1), images, labels)
    value = capsedu_train_step(theirs, torch.optim.SGD(theirs.parameters(), lr=0.1), images, labels)
    assert isinstance(value, float) and value == pytest.approx(expected)
    for a, b in zip(mine.parameters(), theirs.parameters()):
        torch.testing.assert_close(a, b)
    with pytest.raises(TypeError, match="optimizer"):
        capsedu_train_step(theirs, "adam", images, labels)
