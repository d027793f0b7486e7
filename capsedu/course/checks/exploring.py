r"""Checks for lesson 07 (exploring a trained CapsNet): what a capsule dimension does to the
drawing - its ink (stroke width, length) and its position - and the routing couplings laid out on
the primary-capsule grid.

Each check runs the learner's function, compares it with :mod:`capsedu.explore`, and prints a
pass or a hint that names the most likely mistake.

Shape legend:
    I      primary capsules = T * G * G
    J      digit capsules
    D_out  digit capsule dimension (16)
    T      primary capsule types
    G      side of their grid
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from capsedu.course.checks._kit import CheckResult, call_learner, diagnose, verdict
from capsedu.course.checks._kit import close as _strict_close
from capsedu.explore.probes import couplings_on_grid, perturbation_sweep
from capsedu.nets.capsnet import CapsNet


def _close(a: object, b: torch.Tensor) -> bool:
    return _strict_close(a, b, rtol=0.0, atol=1e-5)


def _matching_hint(result: object, wrong: list[tuple[torch.Tensor, str]], default: str) -> str:
    r"""The hint of the first typical mistake whose output ``result`` equals, else ``default``."""
    return next((text for candidate, text in wrong if _close(result, candidate)), default)


def _shape_hint(result: object, expected: tuple[int, ...], what: str) -> str | None:
    if result is None:
        return "your function returned None: did you forget the `return`?"
    if not isinstance(result, torch.Tensor):
        return f"expected a torch.Tensor {what}, got {type(result).__name__}"
    if tuple(result.shape) != expected:
        return f"expected shape {expected} {what}, got {tuple(result.shape)}"
    return None


def _extremes(model: CapsNet, image: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    r"""Reconstructions at -0.25, unperturbed and +0.25, each (D_out, H, W)."""
    images, _ = perturbation_sweep(model, image)  # (D_out, V, H, W)
    return images[:, 0], images[:, images.shape[1] // 2], images[:, -1]


def reference_ink_change(model: CapsNet, image: torch.Tensor) -> torch.Tensor:
    r"""Total ink of the +0.25 reconstruction minus that of the -0.25 one, per dimension (D_out,)."""
    low, _, high = _extremes(model, image)
    return high.sum(dim=(1, 2)) - low.sum(dim=(1, 2))  # (D_out,)


def check_ink_change(fn: Callable[[CapsNet, torch.Tensor], torch.Tensor], model: CapsNet,
                     image: torch.Tensor, *, quiet: bool = False) -> CheckResult:
    r"""``fn(model, image)`` must return, per dimension, how much ink (the sum of the pixels) the
    reconstruction gains from -0.25 to +0.25: positive where the stroke gets bolder or longer."""
    result, hint = call_learner(fn, model, image, what="your ink_change")
    low, middle, high = _extremes(model, image)
    expected = reference_ink_change(model, image)  # (D_out,)
    mistakes = [(expected.abs, "keep the sign: a dimension that thins the stroke loses ink (negative)"),
                (expected.neg, "the sign is reversed: ink at +0.25 minus ink at -0.25"),
                (lambda: high.mean(dim=(1, 2)) - low.mean(dim=(1, 2)),
                 "that is the mean pixel: the total ink is the SUM over the pixels"),
                (lambda: (high - low).abs().sum(dim=(1, 2)), "that counts every changed pixel as "
                 "gained ink: sum the pixels of each picture first, then subtract"),
                (lambda: high.sum(dim=(1, 2)) - middle.sum(dim=(1, 2)), "compare the two extremes, "
                 "-0.25 (column 0) and +0.25 (column -1), not +0.25 with the plain reconstruction")]
    hint = hint or diagnose(result, expected, mistakes, "the numbers differ from sum(image(+0.25)) - "
                            "sum(image(-0.25)) per dimension", what="one number per dimension",
                            rtol=1e-4, atol=1e-3)
    return verdict(hint, "ink_change measures which dimensions thicken and which thin the stroke.",
                   quiet=quiet)


def _centre_x(images: torch.Tensor) -> torch.Tensor:
    r"""Horizontal centre of the ink of each image (N, H, W) -> (N,), in pixel columns."""
    columns = torch.arange(images.shape[-1], dtype=images.dtype)  # (W,)
    return (images * columns).sum(dim=(1, 2)) / images.sum(dim=(1, 2)).clamp_min(1e-8)


def reference_centre_shift(model: CapsNet, image: torch.Tensor) -> torch.Tensor:
    r"""How far (pixels, right positive) the ink's centre moves from -0.25 to +0.25, per dimension."""
    low, _, high = _extremes(model, image)
    return _centre_x(high) - _centre_x(low)  # (D_out,)


def check_centre_shift(fn: Callable[[CapsNet, torch.Tensor], torch.Tensor], model: CapsNet,
                       image: torch.Tensor, *, quiet: bool = False) -> CheckResult:
    r"""``fn(model, image)`` must return, per dimension, how many pixels to the right the centre
    of the reconstruction's ink moves from the -0.25 to the +0.25 perturbation."""
    result, hint = call_learner(fn, model, image, what="your centre_shift")
    low, _, high = _extremes(model, image)
    expected = reference_centre_shift(model, image)  # (D_out,)
    rows = torch.arange(high.shape[-2], dtype=high.dtype)[:, None]  # (H, 1)
    columns = torch.arange(high.shape[-1], dtype=high.dtype)  # (W,)

    def vertical() -> torch.Tensor:
        return (high * rows).sum(dim=(1, 2)) / high.sum(dim=(1, 2)) - (low * rows).sum(dim=(1, 2)) / low.sum(dim=(1, 2))

    mistakes = [(vertical, "that is the vertical shift (rows): the horizontal centre weights each "
                 "COLUMN index by its ink"),
                (expected.neg, "the sign is reversed: centre at +0.25 minus centre at -0.25"),
                (lambda: (high * columns).sum(dim=(1, 2)) - (low * columns).sum(dim=(1, 2)),
                 "divide each weighted sum by the picture's total ink: a centre is an average "
                 "position, not a sum")]
    hint = hint or diagnose(result, expected, mistakes, "centre = sum_x x * ink(x) / sum ink, over "
                            "columns x; return centre(+0.25) - centre(-0.25)",
                            what="one number per dimension", rtol=1e-4, atol=1e-4)
    return verdict(hint, "centre_shift finds the dimensions that move the digit sideways.", quiet=quiet)


def check_couplings_for_class(fn: Callable[[torch.Tensor, int, int], torch.Tensor], *,
                              quiet: bool = False) -> CheckResult:
    r"""``fn(c, label, num_types)`` must lay c[:, label] (I, J) out as (T, G, G), type-major."""
    types, side, classes, label = 4, 6, 10, 2
    c = torch.softmax(torch.randn(types * side * side, classes,
                                  generator=torch.Generator().manual_seed(3)), dim=1)  # (I, J)
    result, stub = call_learner(fn, c, label, types)
    if stub:
        return verdict(stub, "", quiet=quiet)
    expected = couplings_on_grid(c, label, types)  # (T, G, G)
    hint = _shape_hint(result, tuple(expected.shape), "(T, G, G)")
    if hint is None and not _close(result, expected):
        column = c[:, label]
        wrong = [(column.reshape(side, side, types).permute(2, 0, 1),
                  ("primary capsules are ordered type-major (i = t*G*G + y*G + x): reshape to "
                   "(T, G, G) directly, no permute")),
                 (expected.transpose(1, 2), ("rows and columns are swapped: i = t*G*G + y*G + x, so "
                                             "y (the row) comes before x")),
                 (c[:, (label + 1) % classes].reshape(types, side, side),
                  "wrong class column: take c[:, label]")]
        hint = _matching_hint(result, wrong, "the values differ from c[:, label] laid out as (T, G, G)")
    return verdict(hint, "couplings_for_class puts every primary capsule in its place.", quiet=quiet)
