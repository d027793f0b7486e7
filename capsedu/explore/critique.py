r"""The scaling critique, measured (lesson 13): how much routing depends on the image, and which
capsules never switch on or never switch off (Mitterreiter et al. 2023, *Why Capsule Neural
Networks Do Not Scale*).

Shape legend:
    N  images;  I  lower (child) capsules;  J  upper (parent) capsules
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch

from capsedu._numbers import require_number
from capsedu._validate import require_tensor


class Activity(NamedTuple):
    r"""Which capsules are on (length above a threshold), over a set of images."""

    dead: float  # share of capsules on for no image
    always_on: float  # share of capsules on for every image
    on_share: torch.Tensor  # (I,) share of the images on which each capsule is on


def coupling_spread(c: torch.Tensor) -> torch.Tensor:
    r"""How much couplings (N, I, J) of N images depend on the image: the standard deviation of
    each c_ij across the images (population, ``correction=0``), averaged over i and j."""
    require_tensor("c", c, ndim=3, shape="(N, I, J)", floating=True)
    return c.std(dim=0, correction=0).mean()


def coupling_entropy(c: torch.Tensor) -> torch.Tensor:
    r"""How undecided each child is: the entropy of its couplings over the J parents, divided by
    log J (1: uniform, 0: all to one parent, as in a parse tree), averaged over images and children."""
    require_tensor("c", c, ndim=3, shape="(N, I, J)", floating=True)
    if c.shape[-1] < 2:
        raise ValueError(f"c must have at least 2 parents J to have an entropy, got shape {tuple(c.shape)}")
    entropy = -(c * c.clamp_min(1e-30).log()).sum(dim=-1)  # (N, I)
    return entropy.mean() / math.log(c.shape[-1])


def capsule_activity(lengths: torch.Tensor, threshold: float = 0.5) -> Activity:
    r"""Dead and always-on capsules among ``lengths`` (N, I): a capsule is on for an image when its
    length exceeds ``threshold`` (0.5: for Eq. 1's squash, where the length of s is 1; for
    Efficient-CapsNet's, where it is log 2)."""
    require_tensor("lengths", lengths, ndim=2, shape="(N, I)", floating=True)
    require_number("threshold", threshold, low=0.0, high=1.0)
    on_share = (lengths > threshold).float().mean(dim=0)  # (I,)
    return Activity(float((on_share == 0).float().mean()), float((on_share == 1).float().mean()), on_share)
