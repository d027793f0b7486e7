r"""A CapsNet with more than one routed capsule layer (lesson 13, the scaling critique).

Sabour et al. route once, from the primary capsules to the class capsules. A parse tree of
parts and wholes needs more levels: here ``hidden_caps`` routed layers sit between the two,
each a :class:`~capsedu.nets.routing.DigitCaps` (Eq. 2 and Procedure 1). No decoder: the network
is trained by the margin loss alone (Eq. 4), which is enough to ask whether gradient reaches
the lower layers and whether their couplings pick one parent per child. A network of the course
like the others (kind ``"deep_capsnet"`` in :mod:`capsedu.nets.registry`): it saves and loads as a
checkpoint and trains by :func:`capsedu.fit` (its own :meth:`DeepCapsNet.loss`) and by a recipe.

The routed layers are the ModuleList ``routed``; the last one, the class capsules, is also
``class_caps``, the name every network of the course gives its class-capsule layer.

Shape legend:
    B      batch size
    I      input (primary) capsules
    D_in   primary capsule dimension
    J_l    output capsules of routed layer l (the last layer's J_L: the J classes)
    D_l    their capsule dimension (the last layer's: D_out)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from capsedu._validate import require_images, require_int
from capsedu.nets.capsnet import CapsNetConfig
from capsedu.nets.contract import Loss
from capsedu.nets.losses import margin_loss
from capsedu.nets.primary import PrimaryCaps
from capsedu.nets.routing import DigitCaps


@dataclass(frozen=True)
class DeepCapsConfig(CapsNetConfig):
    r"""A :class:`CapsNetConfig` and the (capsules, dimension) of each hidden routed layer
    (``decoder_hidden`` is inherited and unused: the network has no decoder)."""

    hidden_caps: tuple[tuple[int, int], ...] = ((32, 12),)

    def to_dict(self) -> dict[str, Any]:
        r"""Plain data, ``hidden_caps`` as a list of ``[capsules, dimension]`` lists."""
        return super().to_dict() | {"hidden_caps": [list(layer) for layer in self.hidden_caps]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DeepCapsConfig:
        r"""The config :meth:`to_dict` wrote (its pairs - lists in a checkpoint or JSON - as tuples)."""
        layers = data.get("hidden_caps")
        if isinstance(layers, (list, tuple)):
            data = {**data, "hidden_caps": tuple(tuple(layer) if isinstance(layer, (list, tuple))
                                                 else layer for layer in layers)}
        return super().from_dict(data)


class DeepCapsNet(nn.Module):
    r"""conv1 -> primary capsules -> ``len(hidden_caps)`` routed layers -> class capsules."""

    kind = "deep_capsnet"
    config_class = DeepCapsConfig

    def __init__(self, config: DeepCapsConfig) -> None:
        super().__init__()
        if not isinstance(config, DeepCapsConfig):
            raise TypeError(f"config must be a DeepCapsConfig, got {type(config).__name__}")
        if not all(isinstance(layer, tuple) and len(layer) == 2 for layer in config.hidden_caps):
            raise ValueError(f"hidden_caps must be a tuple of (capsules, dimension) pairs, e.g. "
                             f"((32, 12),), got {config.hidden_caps!r}")
        for caps, dim in config.hidden_caps:
            require_int("hidden_caps capsules", caps, minimum=1)
            require_int("hidden_caps dimension", dim, minimum=1)
        self.config = config
        self.conv1 = nn.Conv2d(config.in_channels, config.conv1_channels, config.conv1_kernel)
        self.primary = PrimaryCaps(config.conv1_channels, config.primary_types, config.primary_dim,
                                   config.primary_kernel, config.primary_stride)
        sizes = [(config.num_primary_caps, config.primary_dim), *config.hidden_caps,
                 (config.num_classes, config.digit_dim)]
        self.routed = nn.ModuleList(DigitCaps(i, d_in, j, d_out, config.routing_iterations,
                                              config.detach_inner, config.routing)
                                    for (i, d_in), (j, d_out) in zip(sizes, sizes[1:]))

    @property
    def class_caps(self) -> DigitCaps:
        r"""The class-capsule layer: the last routed layer, ``routed[-1]``."""
        return self.routed[-1]

    def forward(self, x: torch.Tensor) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        r"""The capsules of every level, primary first [(B, I, D_in), ..., (B, J, D_out)], and the
        couplings of every routed layer [(B, I, J_1), ..., (B, J_{L-1}, J)]."""
        require_images("x", x, channels=self.config.in_channels, size=self.config.image_size)
        u = self.primary(torch.relu(self.conv1(x)))  # (B, I, D_in)
        capsules, couplings = [u], []
        for layer in self.routed:
            u, c = layer(u)  # (B, J_l, D_l), (B, J_{l-1}, J_l)
            capsules.append(u)
            couplings.append(c)
        return capsules, couplings

    def class_scores(self, x: torch.Tensor) -> torch.Tensor:
        r"""Images (B, C, H, W) -> the class capsules' lengths (B, J)."""
        return self(x)[0][-1].norm(dim=-1)  # (B, J)

    def loss(self, images: torch.Tensor, labels: torch.Tensor) -> Loss:
        r"""The margin loss (Eq. 4) and the number of images classified right, for :func:`capsedu.fit`."""
        lengths = self.class_scores(images)  # (B, J)
        return Loss(margin_loss(lengths, labels), (lengths.argmax(dim=1) == labels).sum())
