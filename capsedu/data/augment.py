r"""Random rotations and scalings of training digits, a batch at a time (no torchvision needed).

:func:`random_shift` (:mod:`capsedu.data.mnist`) is the paper's augmentation; recipes with
``max_angle`` or ``max_scale`` (:class:`capsedu.zoo.recipes.Recipe`) also turn and scale each
training digit by its own random amount before it is shifted (or, for MultiMNIST, placed):

* :func:`warp` - each image rotated and scaled about its centre by its own given amount, in one
  batched bilinear resampling (torch's ``affine_grid`` and ``grid_sample``);
* :func:`random_warp` - the same with the amounts drawn from a seeded generator.

Lesson 08's transformed *test* sets (:mod:`capsedu.data.transforms`) use torchvision's
``affine``, one transformation at a time; this module stays free of torchvision, whose import
costs every kernel seconds, because :mod:`capsedu.data.multimnist` needs it on ``import capsedu``.

Shape legend:
    N      images;  C, H, W  channels, height and width
"""

from __future__ import annotations

import math

import torch

from capsedu._validate import require_number, require_tensor

LIMITS = {"max_angle": (0.0, 90.0), "max_scale": (0.0, 0.5)}


def check_limit(name: str, value: float) -> float:
    r"""``value`` as a float, or a ValueError naming ``name`` when it is outside ``LIMITS[name]``."""
    low, high = LIMITS[name]
    return require_number(name, value, low=low, high=high)


def _warp(images: torch.Tensor, radians: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    zero = torch.zeros(len(images))
    cos, sin = torch.cos(radians) / scales, torch.sin(radians) / scales  # (N,), (N,)
    # theta maps each output pixel to where it samples the input: R(angle) / scale
    theta = torch.stack([torch.stack([cos, -sin, zero], 1), torch.stack([sin, cos, zero], 1)], 1)  # (N, 2, 3)
    grid = torch.nn.functional.affine_grid(theta, list(images.shape), align_corners=False)  # (N, H, W, 2)
    return torch.nn.functional.grid_sample(images, grid, mode="bilinear", padding_mode="zeros",
                                           align_corners=False)  # (N, C, H, W)


def warp(images: torch.Tensor, angles: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    r"""Image ``n`` of ``images`` (N, C, H, W) rotated by ``angles[n]`` degrees (anticlockwise)
    and scaled by ``scales[n]`` about its centre (bilinear; ink moved out of the frame is lost,
    new pixels are 0): (N, C, H, W)."""
    require_tensor("images", images, ndim=4, shape="(N, C, H, W)", floating=True)
    for name, value in (("angles", angles), ("scales", scales)):
        if not isinstance(value, torch.Tensor) or value.shape != (len(images),):
            raise ValueError(f"{name} must be a ({len(images)},) tensor, one per image, "
                             f"got {getattr(value, 'shape', value)}")
    if not (scales > 0).all():
        raise ValueError("scales must all be > 0")
    return _warp(images, torch.deg2rad(angles), scales)


def random_warp(images: torch.Tensor, max_angle: float = 15.0, max_scale: float = 0.1,
                generator: torch.Generator | None = None) -> torch.Tensor:
    r"""Each image (N, C, H, W) rotated by its own angle drawn from U(-max_angle, max_angle)
    degrees and scaled by a factor from U(1 - max_scale, 1 + max_scale): (N, C, H, W)."""
    require_tensor("images", images, ndim=4, shape="(N, C, H, W)", floating=True)
    max_angle, max_scale = check_limit("max_angle", max_angle), check_limit("max_scale", max_scale)
    radians = (torch.rand(len(images), generator=generator) * 2 - 1) * math.radians(max_angle)  # (N,)
    scales = 1 + (torch.rand(len(images), generator=generator) * 2 - 1) * max_scale  # (N,)
    return _warp(images, radians, scales)
