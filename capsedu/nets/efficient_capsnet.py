r"""Efficient-CapsNet (Mazzia, Salvetti & Chiaberge 2021): four convolutions, depthwise primary
capsules, one self-attention routing step to the class capsules, and the CapsNet's decoder.

The MNIST network of the paper and its code, layer by layer (161,824 trainable parameters
without the decoder, as the paper reports):

====================================  ==========================  ==============
layer                                 output                      parameters
====================================  ==========================  ==============
conv 5x5, 32, ReLU, batch norm        (B, 32, 24, 24)             832 + 64
conv 3x3, 64, ReLU, batch norm        (B, 64, 22, 22)             18,496 + 128
conv 3x3, 64, ReLU, batch norm        (B, 64, 20, 20)             36,928 + 128
conv 3x3 stride 2, 128, ReLU, bn      (B, 128, 9, 9)              73,856 + 256
depthwise conv 9x9 (one per channel)  (B, 128, 1, 1) -> (B, 16, 8)  10,496
class caps W (I, J, D, D_in), prior   (B, 10, 16)                 20,480 + 160
====================================  ==========================  ==============

The batch norm follows the ReLU, as in the authors' code. The primary capsules are squashed with
:func:`~capsedu.nets.self_attention.efficient_squash`; the class capsules come from
:func:`~capsedu.nets.self_attention.self_attention_routing`. Training uses the margin loss and
the reconstruction loss of Sabour et al. with the same weight (the code's 0.392 on a mean over
784 pixels is 0.0005 on the sum).

Shape legend:
    B      batch size
    C      channels of the last convolution (128) = I * D_in
    I      primary capsules (16)
    D_in   primary capsule dimension (8)
    J      class capsules (10)
    D      class capsule dimension (16)
    H      height
    W      width
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import nn

from capsedu._validate import require_images, require_nonempty_batch, require_tensor
from capsedu.nets.capsnet import CapsNetOutput, decoder_network, mask_capsules
from capsedu.nets.contract import NetworkConfig
from capsedu.nets.self_attention import efficient_squash, self_attention_routing


@dataclass(frozen=True)
class EfficientCapsConfig(NetworkConfig):
    r"""Sizes of Efficient-CapsNet; the defaults are the paper's MNIST network.

    ``num_primary_caps`` was ``primary_caps`` before version 4 of the checkpoints; configs stored
    with the old name load through :data:`RENAMED` (see :meth:`NetworkConfig.from_dict`).
    """

    RENAMED: ClassVar[dict[str, str]] = {"primary_caps": "num_primary_caps"}

    image_size: int = 28
    in_channels: int = 1
    conv_channels: tuple[int, ...] = (32, 64, 64, 128)
    conv_kernels: tuple[int, ...] = (5, 3, 3, 3)
    conv_strides: tuple[int, ...] = (1, 1, 1, 2)
    num_primary_caps: int = 16
    primary_dim: int = 8
    num_classes: int = 10
    digit_dim: int = 16
    decoder_hidden: tuple[int, ...] = (512, 1024)

    @property
    def feature_side(self) -> int:
        r"""Side of the last convolution's map (9 for 28 x 28 input): the depthwise kernel."""
        side = self.image_size
        for kernel, stride in zip(self.conv_kernels, self.conv_strides):
            side = (side - kernel) // stride + 1
        return side


class SelfAttentionCaps(nn.Module):
    r"""Fully connected capsule layer: :math:`\hat{\mathbf u}_{j|i} = \mathbf W_{ij}\mathbf u_i`,
    then one self-attention routing pass with learned priors ``prior`` (I, J) - the paper's
    :math:`b_{ij}`, added to the couplings after the softmax - initialised to zero.

    ``W`` (I, J, D, D_in) - the layout of :class:`capsedu.nets.routing.DigitCaps` - starts
    He-normal with the fan-in the authors' Keras code computes (J * I * D_in), so that a fresh
    network starts where theirs does. It is drawn in their (I, J, D_in, D) order, so that a seed
    gives the numbers it gave before the shape changed, and stored as a plain contiguous tensor in
    (I, J, D, D_in) (checkpoints of the earlier transposed view load into it unchanged).
    """

    def __init__(self, in_caps: int, in_dim: int, out_caps: int, out_dim: int) -> None:
        super().__init__()
        self.in_caps, self.in_dim, self.out_caps, self.out_dim = in_caps, in_dim, out_caps, out_dim
        std = math.sqrt(2.0 / (out_caps * in_caps * in_dim))
        drawn = std * torch.randn(in_caps, out_caps, in_dim, out_dim)  # (I, J, D_in, D) in memory
        self.W = nn.Parameter(drawn.transpose(-1, -2).contiguous())  # (I, J, D, D_in)
        self.prior = nn.Parameter(torch.zeros(in_caps, out_caps))  # (I, J)

    def prediction_vectors(self, u: torch.Tensor) -> torch.Tensor:
        r"""Primary capsules (B, I, D_in) -> prediction vectors (B, I, J, D)."""
        shape = f"(B, {self.in_caps}, {self.in_dim})"
        require_tensor("u", u, ndim=3, shape=shape, floating=True)
        require_nonempty_batch("u", u)
        if tuple(u.shape[1:]) != (self.in_caps, self.in_dim):
            raise ValueError(f"u must have shape {shape}, got {tuple(u.shape)}")
        return torch.einsum("bik,ijdk->bijd", u, self.W)  # (B, I, J, D)

    def forward(self, u: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        r"""Class capsules ``v`` (B, J, D) and coupling coefficients ``c`` (B, I, J), routed in float32."""
        with torch.autocast(u.device.type, enabled=False):
            return self_attention_routing(self.prediction_vectors(u.float()), self.prior)

    def extra_repr(self) -> str:
        return (f"in_caps={self.in_caps}, in_dim={self.in_dim}, out_caps={self.out_caps}, "
                f"out_dim={self.out_dim}")


class EfficientCapsNet(nn.Module):
    r"""Efficient-CapsNet with the reconstruction decoder; ``forward`` returns a
    :class:`~capsedu.nets.capsnet.CapsNetOutput`, like :class:`~capsedu.nets.capsnet.CapsNet`."""

    kind = "efficient"
    config_class = EfficientCapsConfig

    def __init__(self, config: EfficientCapsConfig | None = None) -> None:
        super().__init__()
        config = EfficientCapsConfig() if config is None else config
        if not isinstance(config, EfficientCapsConfig):
            raise TypeError(f"config must be an EfficientCapsConfig, got {type(config).__name__}")
        channels = config.conv_channels
        if not len(channels) == len(config.conv_kernels) == len(config.conv_strides):
            raise ValueError("config needs one kernel and one stride per convolution, got "
                             f"{len(channels)}, {len(config.conv_kernels)}, {len(config.conv_strides)}")
        if config.feature_side < 1 or channels[-1] != config.num_primary_caps * config.primary_dim:
            raise ValueError(f"config needs an image that survives the convolutions and "
                             f"conv_channels[-1] = num_primary_caps * primary_dim, got {config}")
        self.config = config
        layers: list[nn.Module] = []
        for width_in, width, kernel, stride in zip((config.in_channels, *channels), channels,
                                                   config.conv_kernels, config.conv_strides):
            conv = nn.Conv2d(width_in, width, kernel, stride)
            nn.init.kaiming_normal_(conv.weight, nonlinearity="relu")
            layers += [conv, nn.ReLU(inplace=True), nn.BatchNorm2d(width)]
        self.convolutions = nn.Sequential(*layers)
        self.primary = nn.Conv2d(channels[-1], channels[-1], config.feature_side, groups=channels[-1])
        self.class_caps = SelfAttentionCaps(config.num_primary_caps, config.primary_dim,
                                            config.num_classes, config.digit_dim)
        self.decoder = decoder_network(config.num_classes * config.digit_dim, config.decoder_hidden,
                                       config.in_channels * config.image_size ** 2)

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        r"""Images (B, C_in, H, W) -> primary capsules u (B, I, D_in)."""
        cfg = self.config
        require_images("x", x, channels=cfg.in_channels, size=cfg.image_size)
        features = self.primary(self.convolutions(x))  # (B, C, 1, 1)
        u = features.view(-1, cfg.num_primary_caps, cfg.primary_dim)  # (B, I, D_in)
        return efficient_squash(u)  # (B, I, D_in)

    def decode(self, capsules: torch.Tensor, labels: torch.Tensor | None = None) -> torch.Tensor:
        r"""Class capsules (B, J, D) -> reconstructed images (B, C_in, H, W)."""
        cfg = self.config
        flat = self.decoder(mask_capsules(capsules, labels))  # (B, C_in*H*W)
        return flat.view(-1, cfg.in_channels, cfg.image_size, cfg.image_size)  # (B, C_in, H, W)

    def forward(self, x: torch.Tensor, y: torch.Tensor | None = None, *,
                return_couplings: bool = False) -> CapsNetOutput:
        r"""Classify and reconstruct ``x`` (the decoder masked by ``y`` when given)."""
        v, c = self.class_caps(self.encode(x))  # (B, J, D), (B, I, J)
        return CapsNetOutput(v, v.norm(dim=-1), self.decode(v, y), c if return_couplings else None)

    def class_capsules(self, x: torch.Tensor) -> torch.Tensor:
        r"""Images -> class capsules v (B, J, D), without the decoder."""
        return self.class_caps(self.encode(x))[0]  # (B, J, D)

    def class_scores(self, x: torch.Tensor) -> torch.Tensor:
        r"""Images -> the class capsules' lengths (B, J), each in [0, 1)."""
        return self.class_capsules(x).norm(dim=-1)  # (B, J)

    def classifier_parameters(self) -> int:
        r"""Trainable parameters without the decoder (the figure papers report)."""
        return sum(p.numel() for name, p in self.named_parameters() if not name.startswith("decoder."))
