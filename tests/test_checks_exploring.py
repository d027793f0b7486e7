"""capsedu.course.checks.exploring: right answers pass, each typical mistake gets its own hint."""

import pytest
import torch

from capsedu.course.checks.exploring import (
    check_centre_shift,
    check_couplings_for_class,
    check_ink_change,
)
from capsedu.explore.probes import perturbation_sweep

pytestmark = pytest.mark.unit


def extremes(model, image):
    images, _ = perturbation_sweep(model, image)  # (D, V, H, W)
    return images[:, 0], images[:, images.shape[1] // 2], images[:, -1]


def ink(model, image):
    low, _, high = extremes(model, image)
    return high.sum(dim=(1, 2)) - low.sum(dim=(1, 2))


def centre(model, image):
    low, _, high = extremes(model, image)
    x = torch.arange(28, dtype=torch.float32)
    return ((high * x).sum(dim=(1, 2)) / high.sum(dim=(1, 2))) - ((low * x).sum(dim=(1, 2)) / low.sum(dim=(1, 2)))


def test_ink_and_centre_right_answers_pass(model, image, capsys):
    assert check_ink_change(ink, model, image) and check_centre_shift(centre, model, image)
    assert capsys.readouterr().out.count("✅") == 2


@pytest.mark.parametrize("fn, hint", [
    (lambda m, i: ink(m, i).abs(), "keep the sign"),
    (lambda m, i: -ink(m, i), "reversed"),
    (lambda m, i: ink(m, i) / 784, "SUM over the pixels"),
    (lambda m, i: (extremes(m, i)[2] - extremes(m, i)[0]).abs().sum(dim=(1, 2)), "every changed pixel"),
    (lambda m, i: extremes(m, i)[2].sum(dim=(1, 2)) - extremes(m, i)[1].sum(dim=(1, 2)), "two extremes"),
    (lambda m, i: ink(m, i)[:8], "shape"),
    (lambda m, i: ink(m, i) + 1.0, "the numbers differ"),
])
def test_ink_change_mistakes(model, image, fn, hint):
    result = check_ink_change(fn, model, image)
    assert not result and hint in result.message, result.message


def vertical(model, image):
    low, _, high = extremes(model, image)
    y = torch.arange(28, dtype=torch.float32)[:, None]
    return ((high * y).sum(dim=(1, 2)) / high.sum(dim=(1, 2))) - ((low * y).sum(dim=(1, 2)) / low.sum(dim=(1, 2)))


@pytest.mark.parametrize("fn, hint", [
    (vertical, "vertical shift"),
    (lambda m, i: -centre(m, i), "reversed"),
    (lambda m, i: (extremes(m, i)[2] * torch.arange(28.0)).sum(dim=(1, 2))
     - (extremes(m, i)[0] * torch.arange(28.0)).sum(dim=(1, 2)), "average position"),
    (lambda m, i: centre(m, i) + 0.5, "centre = sum_x"),
])
def test_centre_shift_mistakes(model, image, fn, hint):
    result = check_centre_shift(fn, model, image)
    assert not result and hint in result.message, result.message


def right_couplings(c, label, num_types):
    side = round((c.shape[0] / num_types) ** 0.5)
    return c[:, label].reshape(num_types, side, side)


def test_couplings_right_answer_passes():
    assert check_couplings_for_class(right_couplings)


@pytest.mark.parametrize("fn, hint", [
    (lambda c, l, t: c[:, l].reshape(6, 6, t).permute(2, 0, 1), "type-major"),
    (lambda c, l, t: right_couplings(c, l, t).transpose(1, 2), "swapped"),
    (lambda c, l, t: right_couplings(c, (l + 1) % 10, t), "c[:, label]"),
    (lambda c, l, t: c[:, l], "shape"),
    (lambda c, l, t: right_couplings(c, l, t) * 2, "differ"),
])
def test_couplings_mistakes(fn, hint):
    result = check_couplings_for_class(fn)
    assert not result and hint in result.message
