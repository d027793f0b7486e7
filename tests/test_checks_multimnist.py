"""Tests for capsedu.course.checks.multimnist: right answers pass, each likely mistake gets its hint."""


import pytest
import torch

import capsedu
from capsedu.course.checks._kit import STUB_HINT
from capsedu.course.checks.multimnist import (
    check_own_share,
    check_pair,
    check_two_digit_loss,
)
from capsedu.course.checks.multimnist import reference_two_digit_loss as two_digit_loss
from capsedu.data.multimnist import random_pair

pytestmark = pytest.mark.unit


def stub(*args):
    raise NotImplementedError


# --- Build it: a pair by hand ---------------------------------------------------------------------

def _place(digit, dx, dy):
    frame = torch.zeros(1, 36, 36)
    frame[:, 4 + dy:32 + dy, 4 + dx:32 + dx] = digit
    return frame


def make_pair(same_class=False, clip=True, high=5, shared=False, use_generator=True, corner=False,
              swap_labels=False, same_xy=False):
    def my_pair(images, labels, generator):
        g = generator if use_generator else None
        first = int(torch.randint(len(images), (1,), generator=g))
        second = int(torch.randint(len(images), (1,), generator=g))
        while not same_class and labels[second] == labels[first]:
            second = int(torch.randint(len(images), (1,), generator=g))
        shifts = torch.randint(-4, high, (2, 2), generator=g)
        if shared:
            shifts[1] = shifts[0]
        if same_xy:
            shifts[:, 1] = shifts[:, 0]
        if corner:
            shifts = shifts.clamp(0, 4) - 4
        a, b = (_place(images[k], *s.tolist()) for k, s in zip((first, second), shifts))
        image = (a + b).clamp(max=1.0) if clip else a + b
        pair_labels = labels[[second, first]] if swap_labels else labels[[first, second]]
        return image, pair_labels, torch.stack([a, b])
    return my_pair


def test_right_pairs_pass(capsys):
    assert check_pair(random_pair)
    assert check_pair(make_pair())
    assert check_pair(lambda x, y, g: random_pair(x, y, g, merge="max"))  # the other merge some use
    assert capsys.readouterr().out.count("✅") == 3


@pytest.mark.parametrize("wrong, hint", [
    (make_pair(same_class=True), "same class"),
    (make_pair(clip=False), "pixels above 1"),
    (make_pair(high=4), "never returns high"),
    (make_pair(shared=True), "same shift"),
    (make_pair(same_xy=True), "as far in x as in y"),
    (make_pair(use_generator=False), "the generator you are given"),
    (make_pair(swap_labels=True), "not the classes of the two digits"),
    (lambda x, y, g: random_pair(x, y, g, max_shift=2), "ever shifted by +4"),
    (lambda x, y, g: (lambda r: (r[0][..., :35, :], r[1], r[2]))(random_pair(x, y, g)), "must be a tensor of shape"),
    (lambda x, y, g: stub(), STUB_HINT),
])
def test_pair_mistakes_get_their_hint(wrong, hint):
    result = check_pair(wrong, quiet=True)
    assert not result and hint in result.message, result.message


def test_random_pair_checks_its_arguments():
    images, labels = torch.rand(4, 1, 28, 28), torch.tensor([0, 1, 2, 3])
    with pytest.raises(ValueError, match="labels must have one entry per image"):
        random_pair(images, labels[:3], torch.Generator())
    with pytest.raises(ValueError, match="merge must be one of"):
        random_pair(images, labels, torch.Generator(), merge="sum")
    image, pair_labels, digits = random_pair(images, labels, torch.Generator().manual_seed(0))
    assert image.shape == (1, 36, 36) and digits.shape == (2, 1, 36, 36)
    assert pair_labels[0] != pair_labels[1]


# --- Build it: the two-digit loss -----------------------------------------------------------------

def _loss_with(*, one_hot=False, merged=False, both_at_once=False, first_only=False, swapped=False,
               mean=False, weight=0.0005):
    def loss(model, images, targets):
        batch = len(images)
        v = model.class_capsules(images)
        hot = (torch.nn.functional.one_hot(targets.labels[:, 0], 10).float() if one_hot
               else targets.multi_hot)
        margin = capsedu.margin_loss(v.norm(dim=-1), hot)

        def err(recon, wanted):
            squared = (recon.view(batch, -1) - wanted.reshape(batch, -1)).square()
            return squared.mean() if mean else squared.sum(dim=1).mean()
        if both_at_once:
            return margin + weight * err(model.decoder((v * targets.multi_hot[..., None]).flatten(1)), images)
        ks = (0,) if first_only else (0, 1)
        return margin + weight * sum(
            err(model.decode(v, targets.labels[:, 1 - k if swapped else k]),
                images if merged else targets.digits[:, k]) for k in ks)
    return loss


def test_right_losses_pass(capsys):
    assert check_two_digit_loss(two_digit_loss)
    assert check_two_digit_loss(_loss_with())
    assert check_two_digit_loss(lambda m, x, t: capsedu.TwoDigitObjective()(m, x, t).value)
    assert capsys.readouterr().out.count("✅") == 3


@pytest.mark.parametrize("wrong, hint", [
    (_loss_with(one_hot=True), "sees only the first digit"),
    (_loss_with(merged=True), "compared with the merged image"),
    (_loss_with(both_at_once=True), "decoded both capsules at once"),
    (_loss_with(first_only=True), "only the first digit is reconstructed"),
    (_loss_with(swapped=True), "OTHER label's capsule"),
    (_loss_with(mean=True), "1,296 times too weak"),
    (_loss_with(weight=1.0), "not weighted"),
    (lambda m, x, t: _loss_with()(m, x, t).detach(), "has no gradient"),
    (lambda m, x, t: _loss_with()(m, x, t).reshape(1), "0-d tensor"),
    (lambda m, x, t: 2 * _loss_with()(m, x, t), "differs from Section 6's"),
    (lambda m, x, t: stub(), STUB_HINT),
])
def test_two_digit_loss_mistakes_get_their_hint(wrong, hint):
    result = check_two_digit_loss(wrong, quiet=True)
    assert not result and hint in result.message, result.message


# --- Exercise 1: a measure of segmentation --------------------------------------------------------

def own_share(r, own, other):
    a, b = own > 0.1, other > 0.1
    on_own, on_other = ((r * m).flatten(1).sum(1) for m in (a & ~b, b & ~a))
    return on_own / (on_own + on_other + 1e-8)


def test_right_own_share_passes(capsys):
    assert check_own_share(own_share)
    assert "✅" in capsys.readouterr().out


@pytest.mark.parametrize("wrong, hint", [
    (lambda r, o, t: (r * o).flatten(1).sum(1) / (o * o).flatten(1).sum(1), "draws BOTH digits"),
    (lambda r, o, t: (r * (o > 0)).flatten(1).sum(1) / r.flatten(1).sum(1), "belong to neither"),
    (lambda r, o, t: own_share(r, t, o), "swapped"),
    (lambda r, o, t: (r * (o > 0)).flatten(1).sum(1) / (o > 0).flatten(1).sum(1), "draws BOTH digits"),
    (lambda r, o, t: own_share(r, o, t) * r.flatten(1).amax(1), "faint but clean"),
    (lambda r, o, t: own_share(r, o, t).mean(), "one number per reconstruction"),
    (lambda r, o, t: stub(), STUB_HINT),
])
def test_own_share_mistakes_get_their_hint(wrong, hint):
    result = check_own_share(wrong, quiet=True)
    assert not result and hint in result.message, result.message
