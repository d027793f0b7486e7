r"""One digit, transformed in small steps, seen by a CapsNet and by a CNN (lesson 08).

:func:`capsule_trajectory` rotates (or shifts) a digit through a list of steps and records, for
the CapsNet, the capsule of one class (its 16 pose numbers and its length), all ten lengths, and
the reconstruction from that capsule; :func:`feature_trajectory` records the CNN's penultimate
features and class probabilities for the same steps. :func:`smoothness` and
:func:`projection_2d` turn a trajectory into numbers and a picture: how far consecutive steps
move relative to the whole path, and the path in the plane of its two principal directions.

Shape legend:
    A      steps of the transformation (angles or shifts)
    J      classes;  D_out digit capsule dimension (16);  F CNN features
    H, W   image height and width (28)
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from capsedu.data.transforms import transform_images
from capsedu.explore.probes import require_image
from capsedu.nets.capsnet import CapsNet, require_capsnet
from capsedu.nets.cnn import BaselineCNN, require_cnn
from capsedu.training.modes import eval_mode


class CapsuleTrajectory(NamedTuple):
    r"""What the CapsNet outputs for each step of a transformation."""

    images: torch.Tensor  # (A, 1, H, W) the transformed digit
    poses: torch.Tensor  # (A, D_out) the capsule of ``label`` at each step
    lengths: torch.Tensor  # (A, J) every capsule's length
    reconstructions: torch.Tensor  # (A, H, W) decoded from the capsule of ``label``
    label: int


def _steps(image: torch.Tensor, angles: list[float] | None,
           shifts: list[tuple[float, float]] | None) -> torch.Tensor:
    r"""The digit (1, 1, H, W) under every angle, or every (dx, dy) shift: (A, 1, H, W)."""
    if (angles is None) == (shifts is None):
        raise ValueError("pass exactly one of angles (a list of degrees) or shifts (a list of (dx, dy))")
    if not (angles or shifts):
        raise ValueError("angles or shifts is empty: expected at least one step")
    x = require_image(image)  # (1, 1, H, W)
    if angles is not None:
        return torch.cat([transform_images(x, angle=float(a)) for a in angles])
    return torch.cat([transform_images(x, shift=(float(dx), float(dy))) for dx, dy in shifts])


@torch.no_grad()
def capsule_trajectory(model: CapsNet, image: torch.Tensor, label: int, *,
                       angles: list[float] | None = None,
                       shifts: list[tuple[float, float]] | None = None) -> CapsuleTrajectory:
    r"""The capsule of ``label``, all lengths and its reconstruction for each transformed copy."""
    images = _steps(image, angles, shifts)  # (A, 1, H, W)
    with eval_mode(require_capsnet(model)):
        out = model(images)
        labels = torch.full((len(images),), label, dtype=torch.long)
        recon = model.decode(out.capsules, labels)[:, 0]  # (A, H, W)
    return CapsuleTrajectory(images, out.capsules[:, label], out.lengths, recon, label)


@torch.no_grad()
def feature_trajectory(model: BaselineCNN, image: torch.Tensor, *,
                       angles: list[float] | None = None,
                       shifts: list[tuple[float, float]] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    r"""The CNN's penultimate features (A, F) and class probabilities (A, J) for each step."""
    images = _steps(image, angles, shifts)
    with eval_mode(require_cnn(model, "model")):
        return model.features(images), model.probabilities(images)


def smoothness(path: torch.Tensor) -> float:
    r"""The largest step between consecutive points of ``path`` (A, n) over the path's whole extent
    (its largest distance from the first point): near 0 for a path that changes gradually."""
    if path.dim() != 2 or len(path) < 2:
        raise ValueError(f"path must be (A, n) with A >= 2 steps, got {tuple(path.shape)}")
    steps = (path[1:] - path[:-1]).norm(dim=1)  # (A-1,)
    extent = (path - path[0]).norm(dim=1).max()
    return float(steps.max() / extent.clamp_min(1e-12))


def projection_2d(path: torch.Tensor) -> torch.Tensor:
    r"""``path`` (A, n) centred and projected on its two principal directions: (A, 2)."""
    centred = path - path.mean(dim=0)
    _, _, right = torch.linalg.svd(centred, full_matrices=False)
    return centred @ right[:2].T  # (A, 2)
