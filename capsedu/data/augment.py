r"""Affine transformations of digits, a batch at a time: the one resampling every lesson uses.

* :func:`affine` - each image rotated, scaled, sheared and shifted about its centre by its own
  amounts, in one batched bilinear resampling (``grid_sample``). It computes exactly what
  torchvision's ``transforms.functional.affine`` computes for a tensor image (the same inverse
  matrix, the same pixel grid: tested equal), without importing torchvision, whose import costs
  every kernel seconds;
* :func:`warp` - rotation and scaling only (the training augmentation of recipes with
  ``max_angle`` or ``max_scale``, :class:`capsedu.zoo.recipes.Recipe`, and of MultiMNIST's
  digits); :func:`random_warp` draws its amounts from a seeded generator;
* :func:`random_flip` - each image mirrored left-right or not, by a seeded coin (the
  augmentation of recipes with ``flip``: clothes, not digits - a mirrored 2 is no digit);
* :func:`require_limit` - the one table of the ranges every transformation accepts.

:func:`random_shift` (:mod:`capsedu.data.mnist`) is the paper's augmentation; lesson 08's
transformed test sets (:mod:`capsedu.data.transforms`) are built on :func:`affine`.

Shape legend:
    N      images;  C, H, W  channels, height and width
"""

from __future__ import annotations

import math

import torch

from capsedu._validate import require_number, require_tensor

LIMITS = {"angle": (-90.0, 90.0), "scale": (0.5, 2.0), "shear": (-0.5, 0.5), "shift": (-8.0, 8.0),
          "max_angle": (0.0, 90.0), "max_scale": (0.0, 0.5)}


def require_limit(name: str, value: float) -> float:
    r"""``value`` as a float, or a ValueError naming ``name`` when it is outside ``LIMITS[name]``."""
    low, high = LIMITS[name]
    return require_number(name, value, low=low, high=high)


def _inverse_matrix(angle: float, scale_x: float, scale_y: float, shear: float, dx: float,
                    dy: float) -> list[float]:
    r"""torchvision's inverse affine matrix about the centre (``_get_inverse_affine_matrix``):
    where each output pixel samples the input. ``angle`` clockwise in degrees, ``shear`` the
    x-shear angle in degrees, (``dx``, ``dy``) in pixels. With ``scale_x == scale_y`` it is
    torchvision's; otherwise the scaling diag(``scale_x``, ``scale_y``) comes first (rows of the
    inverse divided by each)."""
    rot, sx = math.radians(angle), math.radians(shear)
    a, c = math.cos(rot), math.sin(rot)  # with no y-shear, cos(rot - 0) / cos(0) = cos(rot)
    b = -math.cos(rot) * math.tan(sx) - math.sin(rot)
    d = -math.sin(rot) * math.tan(sx) + math.cos(rot)
    matrix = [d / scale_x, -b / scale_x, 0.0, -c / scale_y, a / scale_y, 0.0]
    matrix[2] += matrix[0] * -dx + matrix[1] * -dy
    matrix[5] += matrix[3] * -dx + matrix[4] * -dy
    return matrix


def _resample(images: torch.Tensor, matrices: list[list[float]]) -> torch.Tensor:
    r"""Bilinear resampling of image n by ``matrices[n]`` (2 x 3, pixels from the centre)."""
    n, _, h, w = images.shape
    theta = torch.tensor(matrices, dtype=images.dtype).view(n, 2, 3)  # (N, 2, 3)
    base = torch.empty(1, h, w, 3, dtype=images.dtype)  # pixel centres, as torchvision builds them
    base[..., 0].copy_(torch.linspace(-w * 0.5 + 0.5, w * 0.5 - 0.5, steps=w))
    base[..., 1].copy_(torch.linspace(-h * 0.5 + 0.5, h * 0.5 - 0.5, steps=h).unsqueeze_(-1))
    base[..., 2].fill_(1)
    scaled = theta.transpose(1, 2) / torch.tensor([0.5 * w, 0.5 * h], dtype=images.dtype)  # (N, 3, 2)
    grid = base.view(1, h * w, 3).expand(n, h * w, 3).bmm(scaled).view(n, h, w, 2)  # (N, H, W, 2)
    return torch.nn.functional.grid_sample(images, grid.to(images.device), mode="bilinear",
                                           padding_mode="zeros", align_corners=False)  # (N, C, H, W)


def affine(images: torch.Tensor, angles: torch.Tensor, scales: torch.Tensor, shears: torch.Tensor,
           shifts: torch.Tensor) -> torch.Tensor:
    r"""Image ``n`` of ``images`` (N, C, H, W) rotated by ``angles[n]`` degrees (anticlockwise),
    scaled by ``scales[n]`` (one factor, or (x, y) factors when ``scales`` is (N, 2): affNIST's
    independent horizontal and vertical scaling), sheared (x by ``shears[n]`` times y) and moved
    by ``shifts[n]`` = (dx, dy) pixels (right, down), about its centre; bilinear, new pixels 0:
    (N, C, H, W)."""
    require_tensor("images", images, ndim=4, shape="(N, C, H, W)", floating=True)
    n = len(images)
    if isinstance(scales, torch.Tensor) and scales.dim() == 1:
        scales = scales[:, None].expand(-1, 2)  # (N, 2) the same factor in x and y
    for name, value, shape in (("angles", angles, (n,)), ("scales", scales, (n, 2)),
                               ("shears", shears, (n,)), ("shifts", shifts, (n, 2))):
        if not isinstance(value, torch.Tensor) or tuple(value.shape) != shape:
            raise ValueError(f"{name} must be a {shape} tensor, one entry per image"
                             f"{' (or (N,) for one factor)' if name == 'scales' else ''}, "
                             f"got {getattr(value, 'shape', value)}")
    if not (scales > 0).all():
        raise ValueError("scales must all be > 0")
    matrices = [_inverse_matrix(-float(angle), sx, sy, math.degrees(math.atan(float(shear))), dx, dy)
                for angle, (sx, sy), shear, (dx, dy) in zip(angles, scales.tolist(), shears,
                                                           shifts.tolist())]
    return _resample(images, matrices)


def warp(images: torch.Tensor, angles: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    r"""Image ``n`` of ``images`` (N, C, H, W) rotated by ``angles[n]`` degrees (anticlockwise)
    and scaled by ``scales[n]`` about its centre (bilinear; ink moved out of the frame is lost,
    new pixels are 0): (N, C, H, W)."""
    n = len(require_tensor("images", images, ndim=4, shape="(N, C, H, W)", floating=True))
    return affine(images, angles, scales, torch.zeros(n), torch.zeros(n, 2))


def random_warp(images: torch.Tensor, max_angle: float = 15.0, max_scale: float = 0.1,
                generator: torch.Generator | None = None) -> torch.Tensor:
    r"""Each image (N, C, H, W) rotated by its own angle drawn from U(-max_angle, max_angle)
    degrees and scaled by a factor from U(1 - max_scale, 1 + max_scale): (N, C, H, W)."""
    require_tensor("images", images, ndim=4, shape="(N, C, H, W)", floating=True)
    max_angle, max_scale = require_limit("max_angle", max_angle), require_limit("max_scale", max_scale)
    angles = (torch.rand(len(images), generator=generator) * 2 - 1) * max_angle  # (N,) degrees
    scales = 1 + (torch.rand(len(images), generator=generator) * 2 - 1) * max_scale  # (N,)
    return warp(images, angles, scales)


def random_flip(images: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    r"""Each image (N, C, H, W) mirrored left-right with probability 1/2, by its own coin: (N, C, H, W)."""
    require_tensor("images", images, ndim=4, shape="(N, C, H, W)", floating=True)
    heads = torch.rand(len(images), generator=generator) < 0.5  # (N,)
    return torch.where(heads.to(images.device)[:, None, None, None], images.flip(-1), images)
