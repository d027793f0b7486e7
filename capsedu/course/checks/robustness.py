r"""Checks for lesson 08 (a CapsNet against a CNN on turned digits): turning a batch of digits
about their centre with ``affine_grid``/``grid_sample``, how much of a rotation a representation
keeps - read by one linear probe per class on the class's own capsule - and the orientation
of a drawing, from its moments.

Each check runs the learner's function against a reference, and prints a pass or a hint that
names the most likely mistake.

Shape legend:
    N      images (or examples of a probe);  C  channels;  H, W  image height and width
    J      classes (capsules per digit)
    D      a capsule's dimension
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from capsedu.course.checks._kit import CheckResult, call_learner, diagnose, mistake, other, verdict
from capsedu.data.transforms import transform_images
from capsedu.explore.probes import linear_probe_error

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


def class_probe_error(capsules: torch.Tensor, labels: torch.Tensor, angles: torch.Tensor, fit: torch.Tensor,
                      held: torch.Tensor, *, kind: str = "right") -> float:
    r"""RMS error (degrees) over the held-out digits of one linear probe per class, each reading the
    pose of the class's own capsule: capsules (N, J, D), labels and angles (N,), ``fit`` and ``held``
    index tensors. A class with no digit to fit on, or none held out, is left out. ``kind`` makes a
    learner's likely mistake instead."""
    rows = torch.arange(len(labels))
    chosen = capsules.norm(dim=-1).argmax(dim=1) if kind == "longest" else labels  # (N,)
    pose = capsules.flatten(1) if kind == "all_capsules" else capsules[rows, chosen]  # (N, D) or (N, J*D)
    if kind == "swapped":
        fit, held = held, fit
    if kind == "shared":
        return linear_probe_error(pose[fit], angles[fit], pose[held], angles[held])
    errors, counts = [], []
    for k in labels.unique():
        f, h = fit[labels[fit] == k], held[labels[held] == k]
        if len(f) and len(h):
            errors.append(linear_probe_error(pose[f], angles[f], pose[h], angles[h]))
            counts.append(len(h))
    if kind == "unweighted":
        return sum(errors) / len(errors)
    if kind == "weighted_errors":
        return sum(e * n for e, n in zip(errors, counts)) / sum(counts)
    return (sum(e * e * n for e, n in zip(errors, counts)) / sum(counts)) ** 0.5


def _class_probe_data() -> tuple[torch.Tensor, ...]:
    r"""Capsules (N, J, D) whose own-class capsule codes the angle in each class's own direction,
    with noise; about one digit in five has a longer rival capsule. Class 3 has no digit to fit on."""
    generator = torch.Generator().manual_seed(9)
    n, classes, dim = 168, 4, 5
    labels = torch.tensor([0, 0, 0, 1, 1, 2, 3]).repeat(n // 7)  # (N,) classes of unequal size
    angles = 90 * torch.rand(n, generator=generator) - 45  # (N,)
    directions = torch.randn(classes, dim, generator=generator)  # (J, D) one code per class
    noise = torch.tensor([0.02, 0.3, 0.08, 0.1])[labels, None]  # (N, 1) some classes code it worse
    capsules = 0.1 * torch.randn(n, classes, dim, generator=generator)  # (N, J, D) short rivals
    own = angles[:, None] * directions[labels] / 45 + noise * torch.randn(n, dim, generator=generator)  # (N, D)
    capsules[torch.arange(n), labels] = own + 1.0  # long, centred away from zero
    rivals = torch.arange(n) % 5 == 0  # (N,) a rival longer than the own capsule
    capsules[rivals, (labels[rivals] + 1) % classes] *= 40.0
    order = torch.randperm(n, generator=generator)
    fit, held = order[: n // 2], order[n // 2:]
    fit = fit[labels[fit] != 3]  # class 3: nothing to fit on
    return capsules, labels, angles, fit, held


_CLASS_PROBE_MISTAKES = [
    ("longest", mistake("longest-capsule", "you read the longest capsule of each digit: read the capsule of its "
                                           "label, the class whose pose a probe for that class learns")),
    ("all_capsules", mistake("all-capsules", "you read all the capsules of each digit (J × D numbers): each "
                                             "class's probe reads that class's own capsule, D numbers")),
    ("shared", mistake("one-shared-probe", "that is one probe for every class: fit one per class, each on that "
                                           "class's digits only")),
    ("unweighted", mistake("mean-of-class-errors", "that is the mean of the classes' errors: a class with more "
                                                   "held-out digits counts more (pool their squared errors)")),
    ("weighted_errors", mistake("weighted-mean-not-rms", "that averages the classes' RMS errors: pool their "
                                                         "squared errors, weighted by held-out digits, then take "
                                                         "the root")),
    ("swapped", mistake("fitted-on-held-out", "you fitted on the held-out digits and measured on the others: fit "
                                              "on `fit`, measure on `held`")),
]


def check_class_probe(fn: Callable, *, quiet: bool = False) -> CheckResult:
    r"""Check ``fn(capsules (N, J, D), labels (N,), angles (N,), fit, held)`` -> the RMS error (degrees)
    over the held-out digits of one linear probe per class on the class's own capsule."""
    data = _class_probe_data()
    result, hint = call_learner(fn, *(t.clone() for t in data), what="your per_class_error")
    try:
        result = torch.tensor(float(result))  # one number, a float or a 0-d tensor
    except (TypeError, ValueError, RuntimeError):
        pass  # diagnose names what came back instead
    mistakes = [(lambda kind=kind: torch.tensor(class_probe_error(*data, kind=kind)), text)
                for kind, text in _CLASS_PROBE_MISTAKES]
    hint = hint or diagnose(result, torch.tensor(class_probe_error(*data)), mistakes,
                            other("values", "the pooled error differs: per class, fit on that class's digits "
                                            "among `fit`, test on its digits among `held`, and skip a class "
                                            "with none on either side (here class 3 has none to fit on)"),
                            what="one number", rtol=1e-3, atol=1e-3)
    return verdict(hint, "per_class_error reads each class's own capsule with its own probe, fitted and "
                         "tested on separate digits.", quiet=quiet)


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
