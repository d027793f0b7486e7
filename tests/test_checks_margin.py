"""Tests for capsedu.course.checks.margin: right answers pass, each typical bug gets its own hint."""

from __future__ import annotations

import pytest
import torch

from capsedu import margin_loss
from capsedu.course.checks.margin import (
    MISSING_LAMBDA_HINT,
    UNSQUARED_HINT,
    check_margin_loss,
    check_multi_hot,
)

pytestmark = pytest.mark.unit


def make_loss(pos_power=2, neg_power=2, lam=0.5, lam_pos=1.0, m_pos=0.9, m_neg=0.1,
              hinge=True, class_mean=False, batch_sum=False):
    """Eq. 4 written the way a learner would, with one optional bug."""
    def loss_fn(lengths, targets):
        clip = torch.relu if hinge else (lambda x: x)
        present = lam_pos * targets * clip(m_pos - lengths) ** pos_power
        absent = lam * (1 - targets) * clip(lengths - m_neg) ** neg_power
        per_image = (present + absent).mean(1) if class_mean else (present + absent).sum(1)
        return per_image.sum() if batch_sum else per_image.mean()
    return loss_fn


def test_check_margin_loss_passes_right_answers(capsys):
    assert check_margin_loss(margin_loss)
    assert check_margin_loss(make_loss())
    assert "✅" in capsys.readouterr().out


def test_peer_bug_unsquared_hinge_gets_its_hint(capsys):
    result = check_margin_loss(make_loss(pos_power=1, neg_power=1))
    assert not result and result.message == f"❌ {UNSQUARED_HINT}"
    assert UNSQUARED_HINT in capsys.readouterr().out


def test_peer_bug_missing_lambda_gets_its_hint():
    result = check_margin_loss(make_loss(lam=1.0), quiet=True)
    assert not result and result.message == f"❌ {MISSING_LAMBDA_HINT}"


@pytest.mark.parametrize("bug, words", [
    ({"pos_power": 1}, "present-class hinge"),
    ({"neg_power": 1}, "absent-class hinge"),
    ({"lam": 1.0, "lam_pos": 0.5}, "lambda multiplies the wrong term"),
    ({"m_pos": 0.1, "m_neg": 0.9}, "margins are swapped"),
    ({"hinge": False}, "max(0, .) is missing"),
    ({"class_mean": True}, "averaged over the classes"),
    ({"batch_sum": True}, "summed over the batch"),
    ({"lam": 0.3}, "differs from Eq. 4"),
])
def test_check_margin_loss_names_other_bugs(bug, words):
    result = check_margin_loss(make_loss(**bug), quiet=True)
    assert not result and words in result.message


def test_check_margin_loss_rejects_non_scalars_and_errors():
    per_image = check_margin_loss(lambda lengths, targets: lengths.sum(1), quiet=True)
    assert "scalar tensor" in per_image.message and "(6,)" in per_image.message
    assert "raised" in check_margin_loss(lambda lengths, targets: 1 / 0, quiet=True).message


def reference_multi_hot(label_lists, num_classes):
    targets = torch.zeros(len(label_lists), num_classes)
    for row, labels in enumerate(label_lists):
        targets[row, labels] = 1.0
    return targets


def test_check_multi_hot_passes_reference():
    assert check_multi_hot(reference_multi_hot, quiet=True)


def test_check_multi_hot_hints():
    def adds(label_lists, num_classes):
        targets = torch.zeros(len(label_lists), num_classes)
        for row, labels in enumerate(label_lists):
            for label in labels:
                targets[row, label] += 1
        return targets

    def first_only(label_lists, num_classes):
        return torch.nn.functional.one_hot(torch.tensor([ls[0] for ls in label_lists]),
                                           num_classes).float()

    cases = [
        (adds, "above 1"),
        (first_only, "only one class per image"),
        (lambda ls, n: reference_multi_hot(ls, n).long(), "floating point"),
        (lambda ls, n: reference_multi_hot(ls, n).T, "(4, 10) tensor"),
        (lambda ls, n: 1 - reference_multi_hot(ls, n), "some entries are wrong"),
        (lambda ls, n: ls[7], "raised IndexError"),
    ]
    for fn, words in cases:
        result = check_multi_hot(fn, quiet=True)
        assert not result and words in result.message, (fn, result.message)
