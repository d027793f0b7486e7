"""capsedu.course.checks.exploring: right answers pass, each typical mistake gets its own hint."""

import pytest

from capsedu.course.checks.exploring import (
    check_couplings_for_class,
    check_dimension_effects,
    check_dimension_names,
    check_perturb_dimension,
    reference_dimension_effects,
)
from capsedu.explore.probes import perturbation_sweep


def right_perturb(capsules, label, dim, delta):
    moved = capsules.clone()
    moved[label, dim] += delta
    return moved


def in_place(capsules, label, dim, delta):
    capsules[label, dim] += delta
    return capsules


def whole_row(capsules, label, dim, delta):
    moved = capsules.clone()
    moved[label] += delta
    return moved


def whole_column(capsules, label, dim, delta):
    moved = capsules.clone()
    moved[:, dim] += delta
    return moved


def swapped(capsules, label, dim, delta):
    moved = capsules.clone()
    moved[dim, label] += delta
    return moved


def scaled(capsules, label, dim, delta):
    moved = capsules.clone()
    moved[label, dim] *= delta
    return moved


def test_perturb_right_answer_passes(capsys):
    assert check_perturb_dimension(right_perturb)
    assert "✅" in capsys.readouterr().out


@pytest.mark.parametrize("fn, hint", [
    (in_place, "in place"), (whole_row, "every dimension of capsule"),
    (whole_column, "of every capsule"), (swapped, "[dim, label]"), (scaled, "multiplied"),
    (lambda c, l, d, x: None, "return"), (lambda c, l, d, x: c[l], "shape"),
    (lambda c, l, d, x: c.clone() + 1, "differ"),
])
def test_perturb_mistakes_get_specific_hints(fn, hint):
    result = check_perturb_dimension(fn)
    assert not result and hint in result.message and result.message.startswith("❌")


def test_dimension_effects_right_answer_passes(model, image):
    assert check_dimension_effects(reference_dimension_effects, model, image)


def signed(model, image):
    images, _ = perturbation_sweep(model, image)
    return (images[:, -1] - images[:, 0]).mean(dim=(1, 2))


def against_middle(model, image):
    images, _ = perturbation_sweep(model, image)
    return (images[:, -1] - images[:, 5]).abs().mean(dim=(1, 2))


def summed(model, image):
    images, _ = perturbation_sweep(model, image)
    return (images[:, -1] - images[:, 0]).abs().sum(dim=(1, 2))


def per_pixel(model, image):
    images, _ = perturbation_sweep(model, image)
    return (images[:, -1] - images[:, 0]).abs()


@pytest.mark.parametrize("fn, hint", [(signed, ".abs()"), (against_middle, "extremes"),
                                      (summed, "summed"), (per_pixel, "shape (16,)"),
                                      (lambda m, i: [0.0] * 16, "torch.Tensor")])
def test_dimension_effects_mistakes(model, image, fn, hint):
    result = check_dimension_effects(fn, model, image)
    assert not result and hint in result.message


def test_dimension_names(model, image):
    ranking = reference_dimension_effects(model, image).argsort(descending=True).tolist()
    top, weakest = ranking[:3], ranking[-1]

    def naming(names):
        return lambda effects: names

    assert check_dimension_names(naming(dict(zip(top, ["stroke width", "slant", "wider"]))), model, image)
    cases = [([1, 2, 3], "dict"), ({top[0]: "a b c"}, "at least 3"),
             ({top[0]: "stroke width", str(top[1]): "slant", top[2]: "wider"}, "keys"),
             ({top[0]: "stroke width", top[1]: "...", top[2]: "wider"}, "describe"),
             ({top[0]: "stroke width", top[1]: "slant", weakest: "wider"}, "barely change"),
             ({top[0]: "stroke width", top[1]: "slant", 99: "wider"}, "keys")]
    for names, hint in cases:
        result = check_dimension_names(naming(names), model, image)
        assert not result and hint in result.message, (names, result.message)


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
