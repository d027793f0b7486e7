r"""Checks for lesson 08 (a CapsNet against a CNN on transformed digits): rotating digits,
accuracy per angle, and where two accuracy curves cross.

Each check runs the learner's function, compares it with :mod:`capsedu.data.transforms` and
:func:`capsedu.predict`, and prints a pass or a hint that names the most likely mistake.

Shape legend:
    N      images;  A angles;  H, W image height and width (28)
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torchvision.transforms import InterpolationMode
from torchvision.transforms import functional as TF

from capsedu.course.checks._kit import CheckResult, call_learner, close, shape_of, verdict
from capsedu.data.mnist import MNISTData
from capsedu.data.transforms import transform_images
from capsedu.training.prediction import predict


def _probe_digits() -> torch.Tensor:
    r"""Three (3, 1, 28, 28) strokes, none symmetric under the rotations the check uses."""
    images = torch.zeros(3, 1, 28, 28)
    images[0, 0, 2:26, 13:15] = 1.0  # a vertical bar
    images[1, 0, torch.arange(3, 25), torch.arange(3, 25)] = 1.0  # a diagonal
    images[2, 0, 4:8, 4:24] = 0.7  # a bar at the top
    return images


def _rotation_hint(result: torch.Tensor, images: torch.Tensor, angle: float) -> str:
    wrong = [(transform_images(images, angle=-angle), "your digits turn clockwise: the angle is "
              "anticlockwise, as TF.rotate(img, angle) does it"),
             (TF.rotate(images, angle, InterpolationMode.NEAREST),
              "nearest-neighbour interpolation: pass interpolation=InterpolationMode.BILINEAR")]
    for candidate, hint in wrong:
        if close(result, candidate, atol=1e-5):
            return hint
    return (f"the pixels differ from capsedu's transform_images(images, angle={angle}): "
            "TF.rotate(images, angle, InterpolationMode.BILINEAR), values kept in [0, 1]")


def check_rotate_digits(fn: Callable[[torch.Tensor, float], torch.Tensor], *,
                        quiet: bool = False) -> CheckResult:
    r"""``fn(images, angle)`` must rotate (N, 1, 28, 28) images anticlockwise about their centre,
    bilinearly, into the same 28x28 frame, as :func:`capsedu.data.transforms.transform_images`."""
    images = _probe_digits()
    original = images.clone()
    hint = ""
    for angle in (30.0, -45.0):
        result, hint = call_learner(fn, images, angle)
        if hint:
            break
        if not isinstance(result, torch.Tensor) or tuple(result.shape) != (3, 1, 28, 28):
            hint = f"expected a (N, 1, 28, 28) tensor, got {shape_of(result)}"
            if isinstance(result, torch.Tensor) and tuple(result.shape[-2:]) != (28, 28):
                hint += ": keep the 28x28 frame (no expand=True, or crop a padded canvas back)"
            break
        if not torch.equal(images, original):
            hint = "you changed the input images in place: return a new tensor"
            break
        if not close(result, transform_images(images, angle=angle), atol=1e-5):
            hint = _rotation_hint(result, images, angle)
            break
    return verdict(hint, "rotate_digits turns digits anticlockwise, bilinearly, as capsedu does.",
                   quiet=quiet)


def reference_accuracy_per_angle(model: torch.nn.Module, data: MNISTData,
                                 angles: list[float]) -> torch.Tensor:
    r"""Accuracy (A,) of ``model`` on ``data`` rotated by each angle, as fractions in [0, 1]."""
    return torch.tensor([float((predict(model, transform_images(data.images, angle=a)) == data.labels)
                               .float().mean()) for a in angles])


def check_accuracy_per_angle(fn: Callable[..., torch.Tensor], model: torch.nn.Module,
                             data: MNISTData, *, quiet: bool = False) -> CheckResult:
    r"""``fn(model, data, angles)`` must return the accuracy (A,) at each angle, as fractions."""
    angles = [-45.0, 0.0, 30.0]
    small = data.subset(min(len(data), 200), seed=0)
    result, hint = call_learner(fn, model, small, angles)
    if not hint:
        expected = reference_accuracy_per_angle(model, small, angles)
        if isinstance(result, (list, tuple)):
            result = torch.tensor([float(x) for x in result])
        if not isinstance(result, torch.Tensor) or result.shape != (len(angles),):
            hint = f"expected one accuracy per angle, a ({len(angles)},) tensor, got {shape_of(result)}"
        elif close(result, 100 * expected, atol=1e-3):
            hint = "these are percentages: return fractions in [0, 1] (the plots format them)"
        elif close(result, 1 - expected, atol=1e-3):
            hint = "these are error rates: accuracy is the share of predictions EQUAL to the labels"
        elif not close(result, expected, atol=1e-3):
            hint = ("the values differ from capsedu's: for each angle, rotate data.images "
                    "(transform_images or your rotate_digits), capsedu.predict(model, rotated), and "
                    "compare with data.labels")
    return verdict(hint, "accuracy_per_angle matches capsedu on 200 test digits at three angles.",
                   quiet=quiet)


def reference_crossings(angles: list[float], first: list[float], second: list[float]) -> list[float]:
    r"""Angles where the curves ``first`` and ``second`` (measured at ``angles``) cross, by linear
    interpolation between neighbouring angles; a shared measured point counts once."""
    gap = [a - b for a, b in zip(first, second)]
    crossings: list[float] = []
    for k in range(len(angles) - 1):
        left, right = gap[k], gap[k + 1]
        if left == 0 and (k == 0 or gap[k - 1] != 0):
            crossings.append(float(angles[k]))
        elif left * right < 0:
            crossings.append(float(angles[k] + (angles[k + 1] - angles[k]) * left / (left - right)))
    if gap and gap[-1] == 0 and (len(gap) == 1 or gap[-2] != 0):
        crossings.append(float(angles[-1]))
    return crossings


CROSSING_CASES = [  # (angles, first, second, what the case is about)
    ([-30, 0, 30], [0.5, 0.9, 0.4], [0.6, 0.8, 0.5], "curves crossing twice"),
    ([0, 10, 20], [0.9, 0.8, 0.7], [0.5, 0.6, 0.8], "a crossing between 10° and 20°"),
    ([0, 10, 20], [0.9, 0.8, 0.7], [0.5, 0.6, 0.65], "curves that never cross"),
    ([0, 10, 20], [0.9, 0.7, 0.5], [0.5, 0.7, 0.9], "curves meeting exactly at a measured angle"),
]


def check_crossings(fn: Callable[..., list[float]], *, quiet: bool = False) -> CheckResult:
    r"""``fn(angles, first, second)`` must return the crossing angles, interpolated linearly."""
    hint = ""
    for angles, first, second, about in CROSSING_CASES:
        result, hint = call_learner(fn, angles, first, second)
        if hint:
            break
        expected = reference_crossings(angles, first, second)
        try:
            got = sorted(float(x) for x in result)
        except TypeError:
            hint = f"expected a list of angles, got {type(result).__name__}"
            break
        if len(got) != len(expected) or any(abs(g - e) > 1e-6 for g, e in zip(got, expected)):
            hint = f"for {about} ({angles}, {first}, {second}) expected {expected}, got {got}"
            if not expected:
                hint += ": curves that never cross give an empty list"
            elif len(got) == 2 * len(expected):
                hint += ": a point where the curves meet exactly counts once, not on both sides"
            elif len(got) == len(expected):
                hint += (": interpolate between the two angles where the difference changes sign, "
                         "a + (b - a) * d_a / (d_a - d_b)")
            break
    return verdict(hint, "crossings finds every crossing, interpolated, and none where there is none.",
                   quiet=quiet)
