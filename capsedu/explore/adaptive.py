r"""Attacks adapted to capsule networks (lesson 13): the gradient of the function a network
computes, losses on what capsules output, and each image's worst case over a set of attacks.

Three ways an attack on a capsule network can follow the wrong gradient, and what undoes each:

* **The routing's surrogate gradient.** The shipped CapsNets route with ``detach_inner=True``:
  their backward holds the coupling coefficients fixed, which is not the derivative of what the
  forward computes (lesson 10 measured the difference). :func:`full_routing_gradient` is the same
  network with gradients through every routing iteration: the same outputs, the true gradient.
* **Routing itself** can make the gradient a poor guide. The vote attack (Gu, Wu & Tresp 2021)
  attacks the votes instead: :class:`UniformCouplings` is the network with one routing iteration
  (every coupling 1/J, each class capsule the squashed sum of its votes); images crafted on it
  are shown to the routed network.
* **A saturated output.** EM's class activations are sigmoids near 0 or 1: the logarithm of a
  saturated sigmoid has a vanishing gradient. :class:`PreSigmoidLogits` hands attacks the
  logits before the sigmoid. :class:`LengthsAsLogits` hands them the capsule lengths themselves,
  so that Auto-PGD's DLR loss is a margin between the lengths (no hinge, unlike Eq. 4's).

Every view is an ``nn.Module`` from images to (B, J), for the ``logits`` argument of
:func:`capsedu.explore.attacks.pgd`, :func:`~capsedu.explore.attacks.apgd` and the others, or a
network in its own right (:func:`full_routing_gradient`, :class:`UniformCouplings` have
``class_scores``).

Shape legend:
    B  batch size;  C, H, W  channels, height, width;  J  classes
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from capsedu.nets.capsnet import CapsNet, require_capsnet
from capsedu.nets.matrix_capsnet import MatrixCapsNet
from capsedu.training.prediction import require_class_scores


def full_routing_gradient(model: nn.Module) -> CapsNet:
    r"""A copy of the CapsNet ``model`` whose routing passes gradients through every iteration
    (``detach_inner=False``): the same outputs, the gradient of the function it computes.
    ``model`` itself is left unchanged."""
    copied = copy.deepcopy(require_capsnet(model))
    copied.class_caps.detach_inner = False
    return copied


class UniformCouplings(nn.Module):
    r"""The CapsNet ``model`` with one routing iteration: every coupling 1/J, so each class capsule
    is the squashed sum of its votes. The target of the vote attack (Gu, Wu & Tresp 2021):
    attack the votes, not the routing, and show the images to the routed network."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = require_capsnet(model)

    def class_scores(self, x: torch.Tensor) -> torch.Tensor:
        r"""Images (B, C, H, W) -> the class capsules' lengths (B, J) after one routing iteration."""
        return self.model.class_caps(self.model.encode(x), 1)[0].norm(dim=-1)  # (B, J)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.class_scores(x)  # (B, J)


class LengthsAsLogits(nn.Module):
    r"""A capsule network's class scores (capsule lengths) handed to an attack as its logits:
    Auto-PGD's DLR loss on them is the margin between the true capsule's length and the longest
    other one, divided by the spread of the longest lengths."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = require_class_scores(model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model.class_scores(x)  # (B, J)


class PreSigmoidLogits(nn.Module):
    r"""An EM network's class activations before their sigmoid (:meth:`MatrixCapsNet.class_logits`)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        if not isinstance(model, MatrixCapsNet):
            raise TypeError(f"model must be a capsedu MatrixCapsNet (EM routing), got {type(model).__name__}")
        self.model = model

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model.class_logits(x)  # (B, J)
