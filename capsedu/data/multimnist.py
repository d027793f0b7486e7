r"""MultiMNIST (Sabour et al. 2017, Section 6): two digits of different classes, shifted and overlaid.

Each image is a digit overlaid on a digit of a *different* class from the same split. Both are
placed at the centre of an S x S canvas (36 x 36 in the paper: 4 pixels of padding around a 28 x
28 digit) and each is moved by its own random whole-pixel shift of up to ``max_shift`` pixels in
x and y (4 in the paper); the two are merged by a clipped sum, ``min(a + b, 1)`` (the paper's
official code), or by the pixel-wise maximum (``merge="max"``, the choice of some blog posts).
With ``max_angle``/``max_scale`` (not in the paper; for training on few source digits) each digit
is also rotated and scaled by its own random amount before it is placed.

* :class:`MultiMNIST` - a fixed set of pairs drawn by a seed: the same indices and shifts on every
  machine that has the same digits (the official test split gives the course's test set);
* :class:`FreshPairs` - the training batches, new pairs every epoch (the paper drew 1,000 pairs
  per digit), from a seeded generator;
* :func:`random_pair` - one pair drawn from a generator, as the lesson builds it by hand;
* :class:`PairTargets` - what each item's target holds: the multi-hot classes, both labels and
  both digits alone, shifted as in the merged image (the reconstruction targets).

The pairs are stored as indices and shifts; images are built when a batch is asked for.

Shape legend:
    N      pairs: the items of a MultiMNIST set
    B      batch size
    C      channels (1)
    H, W   height and width of a source digit (28)
    S      canvas side (36)
    J      classes (10)
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import NamedTuple

import torch
from torch.utils.data import Dataset

from capsedu._validate import require_int, require_tensor
from capsedu.data.augment import require_limit, warp
from capsedu.data.mnist import MNISTData, translate

MERGES = ("clip", "max")
MULTIMNIST_TEST = {"num_pairs": 10_000, "seed": 0}  # the course's fixed test set, from the official test split
MULTIMNIST_VALIDATION = {"num_pairs": 10_000, "seed": 1}  # from the validation split (capsedu.data.splits)
NUM_CLASSES = 10  # MNIST's digits: the multi-hot targets have one entry per digit class


class PairTargets(NamedTuple):
    r"""The targets of a batch of MultiMNIST images."""

    multi_hot: torch.Tensor  # (B, J) 1 for both classes of each image
    labels: torch.Tensor  # (B, 2) the classes of the first and the second digit
    digits: torch.Tensor  # (B, 2, C, S, S) each digit alone, exactly as placed in the image


def place(images: torch.Tensor, offsets: torch.Tensor, canvas: int) -> torch.Tensor:
    r"""Digits (B, C, H, W) centred on a ``canvas`` x ``canvas`` frame and moved by ``offsets`` (B, 2)."""
    height, width = images.shape[-2:]
    top, left = (canvas - height) // 2, (canvas - width) // 2
    padding = [left, canvas - width - left, top, canvas - height - top]
    return translate(torch.nn.functional.pad(images, padding), offsets)  # (B, C, S, S)


def merge_digits(first: torch.Tensor, second: torch.Tensor, merge: str = "clip") -> torch.Tensor:
    r"""Overlay two images in [0, 1]: ``min(a + b, 1)`` (``"clip"``) or ``max(a, b)`` (``"max"``)."""
    if merge == "clip":
        return (first + second).clamp(max=1.0)
    if merge == "max":
        return torch.maximum(first, second)
    raise ValueError(f"merge must be one of {MERGES}, got {merge!r}")


def _require_options(digits: MNISTData, max_shift: int, canvas: int, merge: str,
                   max_angle: float = 0.0, max_scale: float = 0.0) -> None:
    if not isinstance(digits, MNISTData):
        raise TypeError(f"digits must be a capsedu.MNISTData split, got {type(digits).__name__}")
    side = digits.images.shape[-1]
    require_int("canvas", canvas, minimum=side)  # at least the digits' side
    room = (canvas - side) // 2  # a larger shift would push ink off the canvas
    require_int("max_shift", max_shift, minimum=0, maximum=room)
    if merge not in MERGES:
        raise ValueError(f"merge must be one of {MERGES}, got {merge!r}")
    require_limit("max_angle", max_angle), require_limit("max_scale", max_scale)
    if digits.labels.unique().numel() < 2:
        raise ValueError("digits must hold at least two classes: a pair needs two different ones")


def draw_pairs(labels: torch.Tensor, num_pairs: int, max_shift: int,
               generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Random pairs of indices of different classes (N, 2), and their shifts (N, 2, 2) as (dx, dy)."""
    count = len(labels)
    first = torch.randint(count, (num_pairs,), generator=generator)  # (N,)
    second = torch.randint(count, (num_pairs,), generator=generator)  # (N,)
    same = labels[first] == labels[second]
    while same.any():  # draw again where the classes agree (about 1 in 10 each round)
        second[same] = torch.randint(count, (int(same.sum()),), generator=generator)
        same = labels[first] == labels[second]
    shifts = torch.randint(-max_shift, max_shift + 1, (num_pairs, 2, 2), generator=generator)
    return torch.stack([first, second], dim=1), shifts  # (N, 2), (N, 2, 2)


def random_pair(images: torch.Tensor, labels: torch.Tensor, generator: torch.Generator, *,
                max_shift: int = 4, canvas: int = 36,
                merge: str = "clip") -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    r"""One pair drawn from digits ``images`` (N, C, H, W) with ``labels`` (N,), every random number
    from ``generator``: ``(image (C, S, S), labels (2,), digits (2, C, S, S))``, the digits alone as
    placed. What :class:`MultiMNIST` does for many pairs at once."""
    images = require_tensor("images", images, ndim=4, shape="(N, C, H, W)")
    labels = require_tensor("labels", labels, ndim=1, shape="(N,)")
    if len(labels) != len(images):
        raise ValueError(f"labels must have one entry per image ({len(images)}), got {len(labels)}")
    if merge not in MERGES:
        raise ValueError(f"merge must be one of {MERGES}, got {merge!r}")
    require_int("max_shift", max_shift, minimum=0, maximum=(canvas - images.shape[-1]) // 2)
    pair, shifts = draw_pairs(labels, 1, max_shift, generator)  # (1, 2), (1, 2, 2)
    digits = place(images[pair[0]], shifts[0], canvas)  # (2, C, S, S)
    return merge_digits(digits[0], digits[1], merge), labels[pair[0]], digits  # (C, S, S), (2,), (2, C, S, S)


class MultiMNIST(Dataset):
    r"""``num_pairs`` two-digit images drawn from ``digits`` by ``seed``: items ``(image, PairTargets)``.

    Args:
        digits: the source split (e.g. ``load_mnist("test")``); both digits of a pair come from it.
        num_pairs: how many pairs (the course's test set: 10,000 from the official test split).
        seed: the pairs and shifts drawn; equal arguments give equal sets on every machine.
        max_shift: largest shift in x and y of each digit, at most ``(canvas - 28) // 2``.
        canvas: side of the images (36 in the paper).
        merge: ``"clip"`` (min(a + b, 1), the paper's code) or ``"max"``.
        max_angle, max_scale: each digit also rotated by an angle from U(-max_angle, max_angle)
            degrees and scaled by a factor from U(1 - max_scale, 1 + max_scale) about its centre
            (:func:`capsedu.data.augment.warp`), drawn with the pairs; 0 (the paper): neither.
    """

    def __init__(self, digits: MNISTData, num_pairs: int, *, seed: int = 0, max_shift: int = 4,
                 canvas: int = 36, merge: str = "clip", max_angle: float = 0.0,
                 max_scale: float = 0.0) -> None:
        _require_options(digits, max_shift, canvas, merge, max_angle, max_scale)
        require_int("num_pairs", num_pairs, minimum=1)
        self.digits, self.canvas, self.merge, self.max_shift = digits, canvas, merge, max_shift
        generator = torch.Generator().manual_seed(seed)
        self.pairs, self.shifts = draw_pairs(digits.labels, num_pairs, max_shift, generator)
        self.angles = self.scales = None  # (N, 2) each, degrees and factors, when warped
        if max_angle or max_scale:
            self.angles = (torch.rand(num_pairs, 2, generator=generator) * 2 - 1) * max_angle
            self.scales = 1 + (torch.rand(num_pairs, 2, generator=generator) * 2 - 1) * max_scale
        self.source = f"{num_pairs:,} pairs of {digits.source} (seed {seed})"

    def __len__(self) -> int:
        return len(self.pairs)

    def batch(self, index: torch.Tensor) -> tuple[torch.Tensor, PairTargets]:
        r"""Images (B, C, S, S) and targets of the pairs at ``index`` (B,), built in one go."""
        pairs, shifts = self.pairs[index], self.shifts[index]  # (B, 2), (B, 2, 2)
        batch = len(pairs)
        sources = self.digits.images[pairs.reshape(-1)]  # (2B, C, H, W)
        if self.angles is not None:
            sources = warp(sources, self.angles[index].reshape(-1), self.scales[index].reshape(-1))
        placed = place(sources, shifts.reshape(-1, 2), self.canvas)  # (2B, C, S, S)
        digits = placed.view(batch, 2, *placed.shape[1:])  # (B, 2, C, S, S)
        labels = self.digits.labels[pairs]  # (B, 2)
        multi_hot = torch.zeros(batch, NUM_CLASSES).scatter_(1, labels, 1.0)  # (B, J)
        images = merge_digits(digits[:, 0], digits[:, 1], self.merge)  # (B, C, S, S)
        return images, PairTargets(multi_hot, labels, digits)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, PairTargets]:
        images, targets = self.batch(torch.tensor([index]))
        return images[0], PairTargets(*(t[0] for t in targets))

    def batches(self, batch_size: int) -> Iterator[tuple[torch.Tensor, PairTargets]]:
        r"""The pairs in order, ``batch_size`` at a time (for testing)."""
        for index in torch.arange(len(self)).split(batch_size):
            yield self.batch(index)


class FreshPairs:
    r"""Training batches of new pairs every epoch: each pass (``iter``) draws ``pairs_per_epoch``
    pairs from ``digits`` with the next seed of a generator seeded by ``seed``.

    ``len()`` is the number of batches per epoch, so :func:`capsedu.fit` (and its one-cycle
    schedule) takes it like a ``DataLoader``. The options are those of :class:`MultiMNIST`.
    """

    def __init__(self, digits: MNISTData, pairs_per_epoch: int, batch_size: int, *, seed: int = 0,
                 max_shift: int = 4, canvas: int = 36, merge: str = "clip", max_angle: float = 0.0,
                 max_scale: float = 0.0) -> None:
        _require_options(digits, max_shift, canvas, merge, max_angle, max_scale)
        require_int("pairs_per_epoch", pairs_per_epoch, minimum=1)
        require_int("batch_size", batch_size, minimum=1)
        self.digits, self.pairs_per_epoch, self.batch_size = digits, pairs_per_epoch, batch_size
        self.options = {"max_shift": max_shift, "canvas": canvas, "merge": merge,
                        "max_angle": max_angle, "max_scale": max_scale}
        self.seeds = torch.Generator().manual_seed(seed)

    def __len__(self) -> int:
        return math.ceil(self.pairs_per_epoch / self.batch_size)

    def __iter__(self) -> Iterator[tuple[torch.Tensor, PairTargets]]:
        seed = int(torch.randint(2**62, (), generator=self.seeds))
        return MultiMNIST(self.digits, self.pairs_per_epoch, seed=seed, **self.options).batches(
            self.batch_size)
