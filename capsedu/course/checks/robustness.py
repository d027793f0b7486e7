r"""Checks for lesson 08 (a CapsNet against a CNN on turned digits): turning a batch of digits
about their centre with ``affine_grid``/``grid_sample``, how much of a rotation a representation
keeps - read by a linear probe - and the orientation of a drawing, from its moments.

Each check runs the learner's function against a reference, and prints a pass or a hint that
names the most likely mistake.

Shape legend:
    N      images (or examples of a probe);  C  channels;  F  features;  H, W  image height and width
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from capsedu.course.checks._kit import CheckResult, call_learner, diagnose, mistake, other, verdict
from capsedu.data.transforms import transform_images

ProbeFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], object]

_ANGLE = 30.0


def _sample(images: torch.Tensor, theta: torch.Tensor, *, mode: str = "bilinear",
            grid_corners: bool = False) -> torch.Tensor:
    r"""``grid_sample`` of ``images`` (N, C, H, W) through one 2 x 3 ``theta`` for the batch;
    ``grid_corners`` builds the grid with ``align_corners=True`` (sampling always uses False)."""
    grid = torch.nn.functional.affine_grid(theta.expand(len(images), 2, 3), list(images.shape),
                                           align_corners=grid_corners)  # (N, H, W, 2)
    return torch.nn.functional.grid_sample(images, grid, mode=mode, padding_mode="zeros",
                                           align_corners=False)  # (N, C, H, W)


def _turn(radians: float, centre: tuple[float, float] = (0.0, 0.0)) -> torch.Tensor:
    r"""The 2 x 3 sampling matrix of an anticlockwise turn by ``radians`` about ``centre``
    (normalised coordinates, y down): output point p samples the input at R (p - c) + c."""
    cos, sin = math.cos(radians), math.sin(radians)
    rotation = torch.tensor([[cos, -sin], [sin, cos]])  # (2, 2)
    c = torch.tensor(centre)  # (2,)
    return torch.cat([rotation, (c - rotation @ c)[:, None]], dim=1)  # (2, 3)


def _digits() -> torch.Tensor:
    r"""Two 28 x 28 test pictures with no symmetry: an L-shaped glyph and seeded speckles, (2, 1, 28, 28)."""
    generator = torch.Generator().manual_seed(11)
    glyph = torch.zeros(28, 28)
    glyph[5:22, 10:13] = 1.0  # a stem
    glyph[5:8, 10:21] = 0.7  # a bar to the right
    glyph[18:22, 13:17] = 0.4  # a foot
    speckles = torch.rand(28, 28, generator=generator) * (torch.rand(28, 28, generator=generator) > 0.7)
    return torch.stack([glyph, speckles])[:, None]


def check_rotate(fn: Callable[[torch.Tensor, float], object], *, quiet: bool = False) -> CheckResult:
    r"""Check ``fn(images (N, C, H, W), angle)``: each image turned ``angle`` degrees anticlockwise
    about its centre, bilinear, zeros where nothing comes in - as
    :func:`capsedu.data.transforms.transform_images` turns it."""
    images = _digits()
    result, hint = call_learner(fn, images.clone(), _ANGLE, what="your rotate")
    if hint:
        return verdict(hint, "", quiet=quiet)
    expected = transform_images(images, angle=_ANGLE)  # (N, C, H, W)
    a = math.radians(_ANGLE)
    mistakes = [
        (lambda: _sample(images, _turn(_ANGLE)), mistake(
            "degrees-as-radians", "cos and sin take radians: convert the angle first (math.radians)")),
        (lambda: _sample(images, _turn(-a)), mistake(
            "turned-clockwise", "your digits turn clockwise: grid_sample asks where each OUTPUT "
            "pixel comes from, so it needs the inverse turn - and image rows grow downwards")),
        (lambda: _sample(images, _turn(a, (-1.0, -1.0))), mistake(
            "turned-about-corner", "you turned about the top-left corner: turn about the centre "
            "of the image (affine_grid's (0, 0)), with no translation")),
        (lambda: _sample(images, _turn(a), grid_corners=True), mistake(
            "mixed-align-corners", "give affine_grid and grid_sample the same align_corners "
            "(False, the default in both): mixed, the digit shrinks")),
        (lambda: _sample(images, _turn(a), mode="nearest"), mistake(
            "nearest-sampling", "sample bilinearly (mode='bilinear'): nearest-neighbour sampling "
            "makes the strokes jagged")),
    ]
    hint = diagnose(result, expected, mistakes,
                    other("values", f"the pictures differ from the digits turned {_ANGLE:.0f}° "
                          "anticlockwise about their centre (bilinear, zeros outside)"),
                    what="the batch of turned images", rtol=0.0, atol=1e-4)
    return verdict(hint, "rotate turns the digits anticlockwise about their centre, as "
                   "capsedu's transform_images does.", quiet=quiet)


def reference_probe_error(train_features: torch.Tensor, train_angles: torch.Tensor,
                          test_features: torch.Tensor, test_angles: torch.Tensor) -> torch.Tensor:
    r"""RMS error (degrees) on the test examples of the least-squares linear map, with a bias,
    from features (N, F) to angles (N,) fitted on the training examples."""
    def with_bias(x: torch.Tensor) -> torch.Tensor:
        return torch.cat([x, torch.ones(len(x), 1, dtype=x.dtype)], dim=1)  # (N, F + 1)

    weights = torch.linalg.lstsq(with_bias(train_features), train_angles[:, None]).solution  # (F + 1, 1)
    residual = with_bias(test_features) @ weights - test_angles[:, None]  # (N, 1)
    return residual.square().mean().sqrt()


def _probe_data() -> tuple[torch.Tensor, ...]:
    r"""Features that hold the angle linearly, plus an offset and noise: a bias is needed."""
    generator = torch.Generator().manual_seed(8)
    angles = 90 * torch.rand(60, generator=generator) - 45  # (N,)
    mixing = torch.randn(1, 5, generator=generator)  # (1, F)
    features = angles[:, None] * mixing / 45 + 3.0 + 0.05 * torch.randn(60, 5, generator=generator)  # (N, F)
    return features[:40], angles[:40], features[40:], angles[40:]


def check_probe_error(fn: ProbeFn, *, quiet: bool = False) -> CheckResult:
    r"""Check ``fn(train_features, train_angles, test_features, test_angles)`` -> the test RMSE
    (degrees) of a linear probe with a bias fitted by least squares on the training examples."""
    data = _probe_data()
    result, hint = call_learner(fn, *(t.clone() for t in data), what="your probe_error")
    expected = reference_probe_error(*data)
    train_x, train_y, test_x, test_y = data
    try:
        result = torch.tensor(float(result))  # one number, a float or a 0-d tensor
    except (TypeError, ValueError, RuntimeError):
        pass  # diagnose names what came back instead
    mistakes = [(lambda: reference_probe_error(train_x, train_y, train_x, train_y), mistake(
                    "measured-on-training", "that is the error on the TRAINING examples: fit on "
                    "them, measure on the test ones")),
                (lambda: expected.square(), mistake(
                    "mean-squared-not-root", "that is the mean SQUARED error: take its square root "
                    "(degrees, like the angles)")),
                (lambda: _no_bias_error(*data), mistake(
                    "no-bias-column", "add a column of ones to the features: without a bias the "
                    "probe must pass through zero, and features rarely have their mean at zero")),
                (lambda: reference_probe_error(test_x, test_y, test_x, test_y), mistake(
                    "fitted-on-test", "you fitted on the test examples: a probe is judged on "
                    "examples it was not fitted to"))]
    hint = hint or diagnose(result, expected, mistakes,
                            other("values", "fit w = lstsq([features, 1], angles) on the training "
                                  "examples; return sqrt(mean((test prediction - test angle)^2))"),
                            what="one number", rtol=1e-3, atol=1e-3)
    return verdict(hint, "probe_error measures how well a straight line reads the angle off the "
                   "features, on examples it was not fitted to.", quiet=quiet)


def _no_bias_error(train_x: torch.Tensor, train_y: torch.Tensor, test_x: torch.Tensor,
                   test_y: torch.Tensor) -> torch.Tensor:
    weights = torch.linalg.lstsq(train_x, train_y[:, None]).solution
    return (test_x @ weights - test_y[:, None]).square().mean().sqrt()


def reference_orientation(images: torch.Tensor) -> torch.Tensor:
    r"""Angle (degrees, anticlockwise, in (-90, 90]) of the principal axis of each image's ink,
    from its second moments about the centre of mass: (N, 1, H, W) -> (N,)."""
    ink = images[:, 0].double()  # (N, H, W)
    rows = torch.arange(ink.shape[1], dtype=ink.dtype)[:, None]  # (H, 1)
    cols = torch.arange(ink.shape[2], dtype=ink.dtype)  # (W,)
    mass = ink.sum(dim=(1, 2)).clamp_min(1e-12)  # (N,)
    y0 = (ink * rows).sum(dim=(1, 2)) / mass  # (N,)
    x0 = (ink * cols).sum(dim=(1, 2)) / mass
    dx, dy = cols - x0[:, None, None], -(rows - y0[:, None, None])  # y up, as a reader sees it
    mu20, mu02, mu11 = ((ink * dx * dx).sum(dim=(1, 2)), (ink * dy * dy).sum(dim=(1, 2)),
                        (ink * dx * dy).sum(dim=(1, 2)))
    return torch.rad2deg(0.5 * torch.atan2(2 * mu11, mu20 - mu02)).float()  # (N,)


def _strokes() -> torch.Tensor:
    r"""Four thick bars at known angles (0, 30, 60 and -45 degrees), (4, 1, 28, 28)."""
    y, x = torch.meshgrid(torch.arange(28.0), torch.arange(28.0), indexing="ij")
    bars = []
    for degrees in (0.0, 30.0, 60.0, -45.0):
        t = math.radians(degrees)
        along, across = (x - 13.5) * math.cos(t) - (y - 13.5) * math.sin(t), (x - 13.5) * math.sin(t) + (y - 13.5) * math.cos(t)
        bars.append(((along.abs() < 10) & (across.abs() < 2)).float())
    return torch.stack(bars)[:, None]


def check_orientation(fn: Callable[[torch.Tensor], object], *, quiet: bool = False) -> CheckResult:
    r"""Check ``fn(images (N, 1, H, W)) -> (N,)``: each drawing's principal-axis angle in degrees,
    anticlockwise with y pointing up."""
    images = _strokes()
    result, hint = call_learner(fn, images.clone(), what="your orientation")
    expected = reference_orientation(images)
    mistakes = [(expected.neg, mistake(
                    "y-axis-down", "your angles turn the wrong way: image rows grow DOWNWARDS, so "
                    "use dy = -(row - centre row) to measure anticlockwise angles")),
                (lambda: 2 * expected, mistake("angle-not-halved", "halve it: the axis angle is "
                                               "0.5 * atan2(2 mu11, mu20 - mu02)")),
                (lambda: torch.deg2rad(expected), mistake("radians-not-degrees",
                                                          "return degrees, not radians"))]
    hint = hint or diagnose(result, expected, mistakes,
                            other("values", "from the centred second moments: angle = "
                                  "0.5 * atan2(2 mu11, mu20 - mu02), in degrees"),
                            what="one angle per image", rtol=0.0, atol=1.0)
    return verdict(hint, "orientation reads the angle of a drawing from its second moments (bars "
                   "at 0, 30, 60 and -45 degrees).", quiet=quiet)
