"""Tests for capsedu.course.checks.training: right answers pass, typical mistakes get their own hint."""

import pytest
import torch

from capsedu import capsnet_loss, margin_loss
from capsedu.course.checks.training import check_accuracy, check_confusion_matrix, check_train_step


def assert_hint(result, *fragments):
    assert not result.passed and result.message.startswith("❌"), result.message
    for fragment in fragments:
        assert fragment in result.message, result.message


# ---------------------------------------------------------------- one training step

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


def test_check_train_step_passes(capsys):
    result = check_train_step(train_step)
    assert result.passed and result.message.startswith("✅")
    assert result.message in capsys.readouterr().out
    assert check_train_step(lambda m, o, x, y: torch.tensor(train_step(m, o, x, y)))


@pytest.mark.parametrize("wrong, fragment", [
    (no_zero_grad, "zero_grad"),
    (no_step, "did not change"),
    (margin_only, "only the margin loss"),
    (masked_by_prediction, "TRUE class"),
    (loss_after_step, "before the update"),
    (double_loss_gradient, "differently"),
    (lambda m, o, x, y: None, "as a number"),
    (lambda m, o, x: 0.0, "raised TypeError"),
])
def test_check_train_step_hints(wrong, fragment):
    assert_hint(check_train_step(wrong), fragment)


# ---------------------------------------------------------------- accuracy

def accuracy(model, loader):
    correct = total = 0
    with torch.no_grad():
        for images, labels in loader:
            correct += int((model(images).lengths.argmax(dim=1) == labels).sum())
            total += len(labels)
    return correct / total


def per_batch_mean(model, loader):
    scores = [float((model(x).lengths.argmax(dim=1) == y).float().mean()) for x, y in loader]
    return sum(scores) / len(scores)


def test_check_accuracy_passes():
    assert check_accuracy(accuracy)


@pytest.mark.parametrize("wrong, fragment", [
    (lambda m, loader: 100 * accuracy(m, loader), "percentage"),
    (lambda m, loader: accuracy(m, loader) * 10 / 3, "number of batches"),
    (per_batch_mean, "smaller"),
    (lambda m, loader: accuracy(m, loader[-1:]), "only one batch"),
    (lambda m, loader: sum(int((m(x).lengths.argmin(dim=1) == y).sum()) for x, y in loader) / 10,
     "LONGEST"),
    (lambda m, loader: 0.123, "expected 0.7"),
    (lambda m, loader: "high", "return one number"),
])
def test_check_accuracy_hints(wrong, fragment):
    assert_hint(check_accuracy(wrong), fragment)


# ---------------------------------------------------------------- confusion matrix

def confusion(predictions, labels, num_classes):
    matrix = torch.zeros(num_classes, num_classes, dtype=torch.long)
    for t, p in zip(labels, predictions):
        matrix[t, p] += 1
    return matrix


def test_check_confusion_matrix_passes():
    assert check_confusion_matrix(confusion)
    assert check_confusion_matrix(
        lambda p, t, n: torch.bincount(t * n + p, minlength=n * n).view(n, n))


@pytest.mark.parametrize("wrong, fragment", [
    (lambda p, t, n: confusion(t, p, n), "swapped"),
    (lambda p, t, n: confusion(p, t, int(max(p.max(), t.max())) + 1)[:9, :9], "num_classes"),
    (lambda p, t, n: confusion(p, t, n).float() / confusion(p, t, n).sum(dim=1, keepdim=True).clamp_min(1),
     "fractions"),
    (lambda p, t, n: confusion(p[:-5], t[:-5], n), "add up to 45"),
    (lambda p, t, n: confusion(p, t, n).roll(1, dims=1), "some counts are off"),
    (lambda p, t, n: confusion(p, t), "raised TypeError"),
])
def test_check_confusion_matrix_hints(wrong, fragment):
    assert_hint(check_confusion_matrix(wrong), fragment)
