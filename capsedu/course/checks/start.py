r"""Checks for lesson 00 (start here): reading a capsule's length and its pose angle.

Shape legend:
    J      capsules of one layer (its output capsules), one per row
    D      capsule dimension (2 for the pose-angle exercise, so the vector can be drawn)

A capsule's length :math:`\lVert\mathbf v\rVert = \sqrt{\sum_d v_d^2}` is the probability that its
entity is present; its direction is the pose. For 2-D capsules the pose is one angle,
:math:`\operatorname{atan2}(v_y, v_x)`.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from capsedu.course.checks._kit import CheckResult, call_learner, verdict

TensorFn = Callable[[torch.Tensor], torch.Tensor]


def _probe_capsules() -> torch.Tensor:
    r"""Six 4-D capsules with mixed signs and lengths, (J, D) = (6, 4)."""
    generator = torch.Generator().manual_seed(0)
    return torch.randn(6, 4, generator=generator, dtype=torch.float64) * 0.5  # (J, D)


def _as_output(fn: TensorFn, v: torch.Tensor) -> tuple[torch.Tensor | None, str]:
    r"""The learner's output as a float64 tensor, or a hint."""
    out, hint = call_learner(fn, v.clone())
    if hint:
        return None, hint
    if not isinstance(out, torch.Tensor):
        return None, f"return a torch.Tensor, got {type(out).__name__}"
    return out.detach().to(torch.float64), ""


def _length_hint(out: torch.Tensor, v: torch.Tensor) -> str:
    n, d = v.shape
    if out.dim() == 0:
        return ("you got one number for all capsules together: compute one length per capsule "
                "along the last dimension, e.g. v.norm(dim=-1)")
    if tuple(out.shape) == (n, 1):
        return f"shape {tuple(out.shape)}: return one number per capsule, shape ({n},) (drop keepdim=True)"
    if tuple(out.shape) == (d,):
        return (f"shape {tuple(out.shape)}: you took the length across the capsules (dim 0); "
                "each row is one capsule, so use dim=-1")
    if tuple(out.shape) != (n,):
        return f"expected shape ({n},), one length per capsule, got {tuple(out.shape)}"
    expected = torch.sqrt((v * v).sum(dim=-1))  # (J,)
    if torch.allclose(out, expected, rtol=1e-5, atol=1e-7):
        return ""
    wrong_answers = [
        ((v * v).sum(dim=-1), "that is the squared length sum(v²): take its square root"),
        (v.sum(dim=-1), "you added the components: square them first, then take the square root of the sum"),
        (v.abs().sum(dim=-1), ("that is the sum of |v_d| (the L1 norm): a capsule's length is the "
                              "Euclidean norm sqrt(sum(v²))")),
        (v.abs().max(dim=-1).values, "that is the largest component: the length uses all of them, sqrt(sum(v²))"),
    ]
    return next((hint for wrong, hint in wrong_answers if torch.allclose(out, wrong, rtol=1e-5, atol=1e-7)),
                f"for the capsule {v[0].numpy().round(3).tolist()} the length is {expected[0]:.4f}, "
                f"yours gives {out[0]:.4f}: use sqrt(sum(v²))")


def check_capsule_length(fn: TensorFn, *, quiet: bool = False) -> CheckResult:
    r"""Check ``fn(v)`` returns the Euclidean length of each capsule: (J, D) -> (J,)."""
    v = _probe_capsules()  # (J, D)
    out, hint = _as_output(fn, v)
    return verdict(hint or _length_hint(out, v),
                   "capsule lengths are right: ||v|| = sqrt(sum of squares), one per capsule", quiet=quiet)


def _probe_poses() -> torch.Tensor:
    r"""2-D capsules, two in each quadrant, with different lengths, (J, 2) = (8, 2)."""
    angles = torch.tensor([20.0, 70.0, 110.0, 160.0, -160.0, -110.0, -70.0, -20.0], dtype=torch.float64)
    lengths = torch.linspace(0.2, 0.95, len(angles), dtype=torch.float64)
    radians = torch.deg2rad(angles)
    return torch.stack([lengths * torch.cos(radians), lengths * torch.sin(radians)], dim=-1)  # (J, 2)


def _same_angle(a: torch.Tensor, b: torch.Tensor, period: float) -> bool:
    r"""True when the angles agree up to whole turns (so [0, 360) and (-180, 180] both pass)."""
    difference = torch.remainder(a - b + period / 2, period) - period / 2
    return bool((difference.abs() < 1e-4 * period).all())


def _angle_hint(out: torch.Tensor, v: torch.Tensor) -> str:
    if tuple(out.shape) != (v.shape[0],):
        return (f"expected one angle per capsule, shape ({v.shape[0]},), got {tuple(out.shape)}: "
                "use v[:, 0] for x and v[:, 1] for y")
    x, y = v[:, 0], v[:, 1]
    expected = torch.rad2deg(torch.atan2(y, x))  # (J,)
    if _same_angle(out, expected, 360.0):
        return ""
    if _same_angle(out, torch.atan2(y, x), 2 * math.pi):
        return "those are radians: convert to degrees with torch.rad2deg (or multiply by 180/π)"
    if _same_angle(out, torch.rad2deg(torch.atan(y / x)), 360.0):
        return ("atan(y/x) loses the quadrant (v and -v get the same angle): use torch.atan2(y, x), "
                "which looks at both signs")
    if _same_angle(out, torch.rad2deg(torch.atan2(x, y)), 360.0):
        return "x and y are swapped: atan2 takes y first, atan2(y, x)"
    return (f"the capsule {v[0].numpy().round(3).tolist()} points at {expected[0]:.1f}°, yours "
            f"gives {out[0]:.1f}: use torch.rad2deg(torch.atan2(y, x))")


def check_pose_angle(fn: TensorFn, *, quiet: bool = False) -> CheckResult:
    r"""Check ``fn(v)`` returns each 2-D capsule's direction in degrees: (J, 2) -> (J,)."""
    v = _probe_poses()  # (J, 2)
    out, hint = _as_output(fn, v)
    return verdict(hint or _angle_hint(out, v), "pose angles are right: atan2(y, x) in degrees",
                   quiet=quiet)
