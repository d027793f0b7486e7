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
    assert not result and result.message == f"{FAILED} {UNSQUARED_HINT}"
    assert UNSQUARED_HINT in capsys.readouterr().out


def test_peer_bug_missing_lambda_gets_its_hint():
    result = check_margin_loss(make_loss(lam=1.0), quiet=True)
    assert not result and result.message == f"{FAILED} {MISSING_LAMBDA_HINT}"


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


# --- check_capsule_margin_loss: Eq. 4 from the capsules (the labml peer, fixed) ----------------

from capsedu.course.checks._kit import FAILED, STUB_HINT  # noqa: E402
from capsedu.course.checks.margin import (  # noqa: E402
    SQRT_EPS_HINT,
    check_capsule_margin_loss,
    check_pull,
    reference_pull,
)


def capsule_loss(squared=True, eps=1e-8, lam=0.5, lam_pos=1.0, batch_sum=False, detach=False):
    """A margin loss on capsules v (B, J, D) and labels (B,), with one optional bug."""
    def loss_fn(v, labels):
        v_norm = torch.sqrt((v ** 2).sum(dim=-1) + eps)
        if detach:
            v_norm = v_norm.detach()
        targets = torch.eye(v.shape[1])[labels]
        power = 2 if squared else 1
        loss = (lam_pos * targets * torch.relu(0.9 - v_norm) ** power
                + lam * (1 - targets) * torch.relu(v_norm - 0.1) ** power)
        per_image = loss.sum(dim=-1)
        return per_image.sum() if batch_sum else per_image.mean()
    return loss_fn


def test_check_capsule_margin_loss_passes_right_answers():
    assert check_capsule_margin_loss(capsule_loss(), quiet=True)
    assert check_capsule_margin_loss(lambda v, labels: margin_loss(v.norm(dim=-1), labels), quiet=True)


@pytest.mark.parametrize("bug, words", [
    ({"squared": False, "eps": 0.0}, UNSQUARED_HINT),  # labml's MarginLoss as published
    ({"eps": 0.0}, SQRT_EPS_HINT),
    ({"lam": 1.0, "lam_pos": 0.5}, "lambda multiplies the wrong term"),
    ({"batch_sum": True}, "summed over the batch"),
    ({"detach": True}, "detached from v"),
])
def test_check_capsule_margin_loss_names_each_bug(bug, words):
    result = check_capsule_margin_loss(capsule_loss(**bug), quiet=True)
    assert not result and words in result.message, result.message


def test_check_capsule_margin_loss_stub_and_shape():
    def stub(v, labels):
        raise NotImplementedError("write it")
    assert STUB_HINT in check_capsule_margin_loss(stub, quiet=True).message
    assert "scalar" in check_capsule_margin_loss(lambda v, y: v.sum(-1), quiet=True).message


# --- check_pull: -dL_k/d||v_k|| by hand ----------------------------------------------------------

def make_pull(sign_flip=False, factor=2.0, lam_on_present=False, no_hinge=False, loss_not_slope=False,
              fixed_lam=False):
    """The pull written the way a learner would, with one optional bug."""
    def pull(lengths, present, lam=0.5, squared=True):
        lam = 0.5 if fixed_lam else lam
        gap = (0.9 - lengths) if present else (lengths - 0.1)
        inside = (gap > 0).float() if not no_hinge else torch.ones_like(lengths)
        weight = (lam if lam_on_present else 1.0) if present else (1.0 if lam_on_present else lam)
        if loss_not_slope:
            slope = gap ** (2 if squared else 1)
        elif squared:
            slope = factor * gap
        else:
            slope = torch.ones_like(lengths)
        value = (1.0 if present else -1.0) * weight * inside * slope
        return -value if sign_flip else value
    return pull


def test_check_pull_passes_right_answers():
    assert check_pull(make_pull(), quiet=True)
    assert check_pull(reference_pull, quiet=True)


@pytest.mark.parametrize("bug, words", [
    ({"sign_flip": True}, "pull is its negative"),
    ({"factor": 1.0}, "the slope of x**2 is 2x"),
    ({"lam_on_present": True}, "lambda scales the absent classes only"),
    ({"no_hinge": True}, "the loss is flat"),
    ({"loss_not_slope": True}, "the loss L_k itself"),
    ({"fixed_lam": True}, "use the lam argument"),
    ({"factor": 3.0}, "the pull is"),
])
def test_check_pull_names_each_mistake(bug, words):
    result = check_pull(make_pull(**bug), quiet=True)
    assert not result and words in result.message, result.message


def test_check_pull_stub_and_shape():
    def stub(lengths, present, lam=0.5, squared=True):
        raise NotImplementedError("write it")
    assert STUB_HINT in check_pull(stub, quiet=True).message
    assert "one pull per length" in check_pull(lambda x, p, lam=0.5, s=True: x.sum(), quiet=True).message
