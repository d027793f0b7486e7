r"""Transformed test sets (lesson 08): digits rotated, scaled, sheared, shifted, or all of it at once.

Every image is placed on a 40x40 canvas (6 pixels of zero padding on each side, the size of
affNIST's images) and transformed there by :func:`capsedu.data.augment.affine` (bilinear, about
the centre: what torchvision's ``affine`` computes); the networks, trained on 28x28 digits, see the central 28x28 crop. The crop is exactly
the image a transformation of the 28x28 digit itself would give (outside the digit both are
zero); the canvas is there to measure what the crop loses: ``ink_kept``, the share of each
transformed digit's ink inside the 28x28 frame (all of it for moderate rotations, less for
large shifts and scales).

* :func:`transform_images` - one transformation for a whole batch;
* :func:`transformed_set` - a test split under one transformation, as an :class:`MNISTData`;
* :func:`affnist_like` - every image under its own random affine transformation drawn (seeded)
  from affNIST's ranges: rotation within ±20°, shear within ±0.2, scale within 0.8-1.2, plus a
  shift of up to ``max_shift`` pixels. Unlike the real affNIST (Tieleman 2013: 40x40 images,
  other digits and ranges drawn per axis, not downloadable here), the digits stay on a 28x28
  crop. A learner with the real affNIST files can evaluate on them the same way: resize or crop
  them to 28x28 and wrap them in :class:`MNISTData`.

Shape legend:
    N      images;  C, H, W  channels (1), height and width (28)
"""

from __future__ import annotations

import torch

from capsedu.data.augment import affine, check_limit
from capsedu.data.mnist import MNISTData

CANVAS = 40
ROTATIONS = tuple(range(-60, 61, 15))


def _canvas(images: torch.Tensor) -> torch.Tensor:
    if not isinstance(images, torch.Tensor) or images.dim() != 4 or images.shape[-2:] != (28, 28):
        raise ValueError(f"images must be a (N, C, 28, 28) tensor, got {getattr(images, 'shape', images)}")
    if len(images) == 0:
        raise ValueError("images is empty: expected at least one image")
    pad = (CANVAS - 28) // 2
    return torch.nn.functional.pad(images, [pad] * 4)  # (N, C, 40, 40)


def _crop(canvas: torch.Tensor) -> torch.Tensor:
    pad = (CANVAS - 28) // 2
    return canvas[..., pad:pad + 28, pad:pad + 28]  # (N, C, 28, 28)


def _affine(canvas: torch.Tensor, angles: torch.Tensor, scales: torch.Tensor, shears: torch.Tensor,
            shifts: torch.Tensor) -> torch.Tensor:
    r""":func:`~capsedu.data.augment.affine` with the shifts rounded to whole pixels."""
    return affine(canvas, angles, scales, shears, shifts.round())  # (N, C, 40, 40)


def transform_images(images: torch.Tensor, *, angle: float = 0.0, scale: float = 1.0,
                     shear: float = 0.0, shift: tuple[float, float] = (0.0, 0.0),
                     return_ink_kept: bool = False) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    r"""``images`` (N, C, 28, 28) rotated by ``angle`` degrees (anticlockwise), scaled, sheared
    (x by ``shear`` times y) and shifted by ``shift`` = (dx, dy) pixels (right, down): (N, C, 28, 28).

    With ``return_ink_kept`` also the share of each transformed digit's ink inside the crop (N,).
    """
    angle, scale, shear = check_limit("angle", angle), check_limit("scale", scale), check_limit("shear", shear)
    dx, dy = check_limit("shift", shift[0]), check_limit("shift", shift[1])
    canvas = _canvas(images)  # (N, C, 40, 40)
    n, exact = len(canvas), torch.float64  # the amounts exactly as given (0.8 is not a float32)
    moved = _affine(canvas, torch.full((n,), angle, dtype=exact), torch.full((n,), scale, dtype=exact),
                    torch.full((n,), shear, dtype=exact),
                    torch.tensor([[dx, dy]], dtype=exact).expand(n, 2)).clamp_(0, 1)  # (N, C, 40, 40)
    cropped = _crop(moved)  # (N, C, 28, 28)
    if not return_ink_kept:
        return cropped
    return cropped, cropped.sum(dim=(1, 2, 3)) / moved.sum(dim=(1, 2, 3)).clamp_min(1e-6)


def transformed_set(data: MNISTData, **transformation: float) -> MNISTData:
    r"""``data`` under one transformation (keywords of :func:`transform_images`), same labels."""
    if not isinstance(data, MNISTData):
        raise TypeError(f"data must be an MNISTData (capsedu.load_mnist), got {type(data).__name__}")
    described = ", ".join(f"{k}={v}" for k, v in transformation.items()) or "unchanged"
    return MNISTData(transform_images(data.images, **transformation), data.labels,
                     f"{data.source}, {described}")


def affnist_like(data: MNISTData, *, seed: int = 0, max_shift: int = 2) -> MNISTData:
    r"""Every image of ``data`` under its own affine transformation from affNIST's ranges (seeded):
    rotation U(-20°, 20°), shear U(-0.2, 0.2), scale U(0.8, 1.2), shift of up to ``max_shift`` px."""
    if not isinstance(data, MNISTData):
        raise TypeError(f"data must be an MNISTData (capsedu.load_mnist), got {type(data).__name__}")
    check_limit("shift", max_shift)
    canvas = _canvas(data.images)  # (N, C, 40, 40)
    generator = torch.Generator().manual_seed(seed)
    n = len(data)
    angle = torch.empty(n).uniform_(-20, 20, generator=generator)
    shear = torch.empty(n).uniform_(-0.2, 0.2, generator=generator)
    scale = torch.empty(n).uniform_(0.8, 1.2, generator=generator)
    shifts = torch.randint(-max_shift, max_shift + 1, (n, 2), generator=generator)
    out = _affine(canvas, angle, scale, shear, shifts.float())  # (N, C, 40, 40)
    return MNISTData(_crop(out.clamp_(0, 1)), data.labels,
                     f"{data.source}, affNIST-like (seed {seed})")
