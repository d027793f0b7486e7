r"""A CapsNet with more than one routed capsule layer (lesson 13, the scaling critique).

Sabour et al. route once, from the primary capsules to the class capsules. A parse tree of
parts and wholes needs more levels: here ``hidden_caps`` routed layers sit between the two,
each a :class:`~capsedu.nets.routing.DigitCaps` (Eq. 2 and Procedure 1). No decoder: the network
is trained by the margin loss alone (Eq. 4), which is enough to ask whether gradient reaches
the lower layers and whether their couplings pick one parent per child.

Shape legend:
    B      batch size
    I      primary capsules;  D_in  their dimension
    K_l    capsules of routed layer l;  D_l  their dimension (the last layer: J classes, D_out)
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from capsedu._validate import require_images, require_int
from capsedu.nets.capsnet import CapsNetConfig
from capsedu.nets.contract import Loss
from capsedu.nets.losses import margin_loss_unchecked
from capsedu.nets.primary import PrimaryCaps
from capsedu.nets.routing import DigitCaps


@dataclass(frozen=True)
class DeepCapsConfig(CapsNetConfig):
    r"""A :class:`CapsNetConfig` and the (capsules, dimension) of each hidden routed layer
    (``decoder_hidden`` is inherited and unused: the network has no decoder)."""

    hidden_caps: tuple[tuple[int, int], ...] = ((32, 12),)


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
        self.routed = nn.ModuleList(DigitCaps(i, d_in, j, d_out, config.routing_iterations, config.detach_inner)
                                    for (i, d_in), (j, d_out) in zip(sizes, sizes[1:]))

    def forward(self, x: torch.Tensor) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        r"""The capsules of every level, primary first [(B, I, D_in), ..., (B, J, D_out)], and the
        couplings of every routed layer [(B, I, K_1), ..., (B, K_L, J)]."""
        require_images("x", x, channels=self.config.in_channels, size=self.config.image_size)
        u = self.primary(torch.relu(self.conv1(x)))  # (B, I, D_in)
        capsules, couplings = [u], []
        for layer in self.routed:
            u, c = layer(u)  # (B, K_l, D_l), (B, K_{l-1}, K_l)
            capsules.append(u)
            couplings.append(c)
        return capsules, couplings

    def class_scores(self, x: torch.Tensor) -> torch.Tensor:
        r"""Images (B, C, H, W) -> the class capsules' lengths (B, J)."""
        return self(x)[0][-1].norm(dim=-1)  # (B, J)

    def loss(self, images: torch.Tensor, labels: torch.Tensor) -> Loss:
        r"""The margin loss (Eq. 4) and the number of images classified right, for :func:`capsedu.fit`."""
        lengths = self.class_scores(images)  # (B, J)
        return Loss(margin_loss_unchecked(lengths, labels), (lengths.argmax(dim=1) == labels).sum())
