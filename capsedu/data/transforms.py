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
  from ranges close to affNIST's: rotation within ±20°, shear within ±0.2, one scale within
  0.8-1.2 for both axes (:func:`affnist_like_40` scales each axis, as affNIST does), plus a
  shift of up to ``max_shift`` pixels. Unlike the real affNIST (Tieleman 2013: 40x40 images,
  other digits and ranges drawn per axis, not downloadable here), the digits stay on a 28x28
  crop. A learner with the real affNIST files can evaluate on them the same way: resize or crop
  them to 28x28 and wrap them in :class:`MNISTData`;
* :func:`on_canvas` - the paper's "expanded" 40x40 set (Section 5.2): each digit placed at a
  random position (seeded) on a black 40x40 canvas, exactly as the 40x40 networks were trained;
* :func:`affnist_like_40` - affNIST-like 40x40 images: each digit rotated, sheared and scaled
  (independently in x and y) by its own random amounts from :data:`AFFNIST_RANGES`, then moved
  anywhere its ink stays inside the canvas; ``parts`` keeps some of the four transformations
  only (the same draws), for the per-transformation breakdown.

Shape legend:
    N      images;  C, H, W  channels (1), height and width (28, or 40 on the canvas)
"""

from __future__ import annotations

import math

import torch

from capsedu.data.augment import affine, require_limit
from capsedu.data.mnist import MNISTData, random_shift, translate

CANVAS = 40
ROTATIONS = tuple(range(-60, 61, 15))
# affNIST's ranges as TensorFlow Federated's affNIST-like transform states them ("approximately
# equivalent to the one described at https://www.cs.toronto.edu/~tijmen/affNIST/"): rotation
# within +-20 degrees, shear factor within +-0.2, each axis scaled by 0.8-1.25 (log-uniform)
AFFNIST_RANGES = {"rotation": 20.0, "shear": 0.2, "scale": (0.8, 1.25)}
PARTS = ("rotation", "shear", "scale", "translation")


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
    angle, scale, shear = require_limit("angle", angle), require_limit("scale", scale), require_limit("shear", shear)
    dx, dy = require_limit("shift", shift[0]), require_limit("shift", shift[1])
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
    require_limit("shift", max_shift)
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


def _require_data(data: MNISTData) -> MNISTData:
    if not isinstance(data, MNISTData):
        raise TypeError(f"data must be an MNISTData (capsedu.load_mnist), got {type(data).__name__}")
    return data


def on_canvas(data: MNISTData, *, seed: int = 0) -> MNISTData:
    r"""Each 28x28 digit of ``data`` placed at a random position on a black 40x40 canvas (its
    frame moved by up to 6 pixels each way from the centre, uniformly, seeded): the paper's
    "padded and translated MNIST", the training and expanded test images of Section 5.2."""
    canvas = _canvas(_require_data(data).images)  # (N, C, 40, 40)
    placed = random_shift(canvas, (CANVAS - 28) // 2, torch.Generator().manual_seed(seed))
    return MNISTData(placed, data.labels, f"{data.source}, placed on a 40x40 canvas (seed {seed})")


def _ink_box(images: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Each image's first and last column and row with ink: (N, 2) as (x, y) each."""
    ink = images.sum(dim=1) > 0  # (N, H, W)
    cols, rows = ink.any(dim=1), ink.any(dim=2)  # (N, W), (N, H)
    side = torch.arange(images.shape[-1])
    first = torch.stack([torch.where(cols, side, CANVAS).amin(1), torch.where(rows, side, CANVAS).amin(1)], 1)
    last = torch.stack([torch.where(cols, side, -1).amax(1), torch.where(rows, side, -1).amax(1)], 1)
    empty = first > last  # an image without ink stays where it is
    return first.masked_fill(empty, 0), last.masked_fill(empty, CANVAS - 1)


def _draw_affine(n: int, seed: int) -> dict[str, torch.Tensor]:
    r"""Each image's amounts from :data:`AFFNIST_RANGES` (float64, seeded, in a fixed order)."""
    generator = torch.Generator().manual_seed(seed)

    def uniform(low: float, high: float, *shape: int) -> torch.Tensor:
        return torch.empty(n, *shape, dtype=torch.float64).uniform_(low, high, generator=generator)

    low, high = AFFNIST_RANGES["scale"]
    return {"angle": uniform(-AFFNIST_RANGES["rotation"], AFFNIST_RANGES["rotation"]),
            "shear": uniform(-AFFNIST_RANGES["shear"], AFFNIST_RANGES["shear"]),
            "scale": uniform(math.log(low), math.log(high), 2).exp(),  # (N, 2) x and y
            "position": uniform(0.0, 1.0, 2)}  # (N, 2) where in its free room each digit goes


def affnist_like_40(data: MNISTData, *, seed: int = 0, parts: tuple[str, ...] = PARTS,
                    max_move: int | None = None) -> MNISTData:
    r"""Each digit of ``data`` on a 40x40 canvas under its own affNIST-like transformation
    (seeded): rotated, sheared and scaled about its centre (bilinear), then moved to a random
    place where all its ink stays on the canvas - or, with ``max_move``, by at most that many
    pixels each way (the same draws, scaled down). ``parts`` (a subset of :data:`PARTS`) keeps
    only those transformations, with the same draws; ``()`` leaves each digit centred."""
    _require_data(data)
    if max_move is not None:
        require_limit("shift", max_move)
    unknown = set(parts) - set(PARTS)
    if not isinstance(parts, tuple) or unknown:
        raise ValueError(f"parts must be a tuple of names from {PARTS}, got {parts!r}")
    canvas = _canvas(data.images)  # (N, C, 40, 40)
    n, amounts = len(canvas), _draw_affine(len(canvas), seed)
    zero = torch.zeros(n, dtype=torch.float64)
    moved = affine(canvas, amounts["angle"] if "rotation" in parts else zero,
                   amounts["scale"] if "scale" in parts else torch.ones(n, 2, dtype=torch.float64),
                   amounts["shear"] if "shear" in parts else zero,
                   torch.zeros(n, 2)).clamp_(0, 1)  # (N, C, 40, 40)
    if "translation" in parts:
        first, last = _ink_box(moved)  # (N, 2), (N, 2)
        low, high = -first, CANVAS - 1 - last  # (N, 2) each: the moves that keep the ink on
        if max_move is not None:
            low, high = low.clamp(min=-int(max_move)), high.clamp(max=int(max_move))
        room = high - low  # (N, 2)
        offsets = low + (amounts["position"] * (room + 1)).floor().long().clamp(max=room)  # (N, 2)
        moved = translate(moved, offsets)  # (N, C, 40, 40)
    described = ("+".join(parts) or "centred") + (f", moves within {max_move} px" if max_move is not None else "")
    return MNISTData(moved, data.labels, f"{data.source}, affNIST-like 40x40 ({described}, seed {seed})")
