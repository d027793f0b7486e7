r"""The full CapsNet: conv1 -> primary capsules -> digit capsules (routing) -> decoder, and its loss.

Shape legend (paper configuration in brackets):
    B      batch size
    I      primary capsules = types * grid * grid   [1152 = 32 * 6 * 6]
    J      digit capsules, one per class             [10]
    D_in   primary capsule dimension                 [8]
    D_out  digit capsule dimension                   [16]
    C      channels
    H      height
    W      width
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import nn

from capsedu._validate import require_images, require_labels, require_tensor
from capsedu.nets.contract import NetworkConfig
from capsedu.nets.losses import RECON_WEIGHT, margin_loss, reconstruction_loss
from capsedu.nets.primary import PrimaryCaps
from capsedu.nets.routing import DigitCaps, require_routing


@dataclass(frozen=True)
class CapsNetConfig(NetworkConfig):
    r"""Every size of a CapsNet; ``paper()`` (the defaults) and ``cpu()`` are the two named profiles.

    What it is trained for - the margin loss and the reconstruction loss's weight - is its
    objective's (:class:`capsedu.training.objectives.MarginObjective`), not its config's.

    ``routing`` chooses how ``DigitCaps`` computes Procedure 1: ``"readable"`` (the
    :func:`~capsedu.nets.routing.dynamic_routing` of lesson 03) or ``"factored"`` (the default:
    the same values and gradients, faster; :mod:`capsedu.nets.routing_fast`). ``detach_inner``
    (gradients through the last iteration only) is independent of it. Configs saved before the
    field existed load with the default, ``"factored"``: what they trained with when
    ``detach_inner`` was True; those with ``detach_inner=False`` trained with the readable
    implementation, which gives the same values and gradients up to float rounding.
    """

    image_size: int = 28
    in_channels: int = 1
    conv1_channels: int = 256
    conv1_kernel: int = 9
    primary_types: int = 32
    primary_dim: int = 8
    primary_kernel: int = 9
    primary_stride: int = 2
    num_classes: int = 10
    digit_dim: int = 16
    routing_iterations: int = 3
    detach_inner: bool = True
    decoder_hidden: tuple[int, ...] = (512, 1024)
    routing: str = "factored"

    def __post_init__(self) -> None:
        require_routing("routing", self.routing)

    @classmethod
    def paper(cls) -> CapsNetConfig:
        r"""The paper's MNIST network: 8,215,568 parameters."""
        return cls()

    @classmethod
    def cpu(cls) -> CapsNetConfig:
        r"""A narrower network (same depth, routing and decoder) that trains in minutes on a 2-core CPU.

        32 conv1 channels and 8 primary capsule types (288 primary capsules instead of 1,152):
        the width was tuned with ``benchmarks/time_to_accuracy.py``. The shipped ``capsnet`` is
        this network trained on the 55,000-image train split; ``capsedu.shipped_summary("capsnet")``
        gives its accuracies.
        """
        return cls(conv1_channels=32, primary_types=8, primary_dim=8)

    @property
    def primary_grid(self) -> int:
        r"""Side of the primary-capsule grid: 28 -> 20 (conv1) -> 6 (primary conv) in the paper."""
        after_conv1 = self.image_size - self.conv1_kernel + 1
        return (after_conv1 - self.primary_kernel) // self.primary_stride + 1

    @property
    def num_primary_caps(self) -> int:
        return self.primary_types * self.primary_grid ** 2


class CapsNetOutput(NamedTuple):
    r"""What ``CapsNet.forward`` returns."""

    capsules: torch.Tensor  # (B, J, D_out) digit capsules v_j
    lengths: torch.Tensor  # (B, J) their lengths = class probabilities
    reconstruction: torch.Tensor  # (B, C, H, W) decoder output in [0, 1]
    couplings: torch.Tensor | None  # (B, I, J) coupling coefficients, if asked for


def mask_capsules(capsules: torch.Tensor, labels: torch.Tensor | None = None) -> torch.Tensor:
    r"""Keep only one capsule per image and flatten: (B, J, D_out) -> (B, J*D_out).

    The kept capsule is the true class when ``labels`` is given (training), otherwise the longest
    capsule (the prediction). All other capsules are set to zero.
    """
    require_tensor("capsules", capsules, ndim=3, shape="(B, J, D_out)", floating=True)
    batch, num_classes, _ = capsules.shape
    if labels is None:
        labels = capsules.norm(dim=-1).argmax(dim=1)  # (B,)
    else:
        require_labels("labels", labels, batch=batch, num_classes=num_classes)
    keep = torch.nn.functional.one_hot(labels.long(), num_classes).to(capsules)  # (B, J)
    return (capsules * keep.unsqueeze(-1)).flatten(1)  # (B, J*D_out)


def decoder_network(in_features: int, hidden: tuple[int, ...], pixels: int) -> nn.Sequential:
    r"""The reconstruction decoder (Figure 2): fully connected ReLU layers, then ``pixels``
    sigmoid outputs. (B, J*D_out) -> (B, pixels)."""
    sizes = [in_features, *hidden]
    layers: list[nn.Module] = []
    for width_in, width_out in zip(sizes[:-1], sizes[1:]):
        layers += [nn.Linear(width_in, width_out), nn.ReLU(inplace=True)]
    return nn.Sequential(*layers, nn.Linear(sizes[-1], pixels), nn.Sigmoid())


class CapsNet(nn.Module):
    r"""CapsNet of Sabour et al. (2017), Figure 1 (encoder) and Figure 2 (decoder).

    Its input is checked once, in :meth:`encode` (shape and NaN/inf); the layers inside check
    shapes only.
    """

    kind = "capsnet"
    config_class = CapsNetConfig

    def __init__(self, config: CapsNetConfig | None = None) -> None:
        super().__init__()
        config = CapsNetConfig.paper() if config is None else config
        if not isinstance(config, CapsNetConfig):
            raise TypeError(f"config must be a CapsNetConfig, got {type(config).__name__}")
        if config.primary_grid < 1:
            raise ValueError(f"config gives an empty primary-capsule grid for {config.image_size}px images")
        self.config = config
        self.conv1 = nn.Conv2d(config.in_channels, config.conv1_channels, config.conv1_kernel)
        self.primary = PrimaryCaps(config.conv1_channels, config.primary_types, config.primary_dim,
                                   config.primary_kernel, config.primary_stride)
        self.class_caps = DigitCaps(config.num_primary_caps, config.primary_dim, config.num_classes,
                                    config.digit_dim, config.routing_iterations, config.detach_inner,
                                    config.routing)
        self.decoder = decoder_network(config.num_classes * config.digit_dim, config.decoder_hidden,
                                       config.in_channels * config.image_size ** 2)

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        r"""Images (B, C, H, W) -> primary capsules u (B, I, D_in)."""
        require_images("x", x, channels=self.config.in_channels, size=self.config.image_size)
        features = torch.relu(self.conv1(x))  # (B, conv1_channels, 20, 20)
        return self.primary(features)  # (B, I, D_in)

    def decode(self, capsules: torch.Tensor, labels: torch.Tensor | None = None) -> torch.Tensor:
        r"""Digit capsules (B, J, D_out) -> reconstructed images (B, C, H, W)."""
        cfg = self.config
        flat = self.decoder(mask_capsules(capsules, labels))  # (B, C*H*W)
        return flat.view(-1, cfg.in_channels, cfg.image_size, cfg.image_size)  # (B, C, H, W)

    def class_capsules(self, x: torch.Tensor) -> torch.Tensor:
        r"""Images (B, C, H, W) -> digit capsules v (B, J, D_out), without the decoder."""
        return self.class_caps(self.encode(x))[0]  # (B, J, D_out)

    def forward(self, x: torch.Tensor, y: torch.Tensor | None = None, *,
                return_couplings: bool = False,
                routing_iterations: int | None = None) -> CapsNetOutput:
        r"""Classify and reconstruct ``x``; the decoder is masked by ``y`` when given.

        Args:
            x: images, (B, C, H, W) with values in [0, 1].
            y: true labels (B,) for training-time masking, or None to mask by the longest capsule.
            return_couplings: also return the coupling coefficients (B, I, J).
            routing_iterations: override the configured number of routing iterations.
        """
        u = self.encode(x)  # (B, I, D_in)
        v, c = self.class_caps(u, routing_iterations)  # (B, J, D_out), (B, I, J)
        lengths = v.norm(dim=-1)  # (B, J)
        reconstruction = self.decode(v, y)  # (B, C, H, W)
        return CapsNetOutput(v, lengths, reconstruction, c if return_couplings else None)

    def class_scores(self, x: torch.Tensor) -> torch.Tensor:
        r"""Images (B, C, H, W) -> the digit capsules' lengths (B, J), each in [0, 1)."""
        return self.class_capsules(x).norm(dim=-1)  # (B, J)


def require_capsnet(model: object, name: str = "model") -> CapsNet:
    r"""Raise ``TypeError`` naming ``name`` unless ``model`` is a :class:`CapsNet`."""
    if not isinstance(model, CapsNet):
        raise TypeError(f"{name} must be a capsedu.CapsNet, got {type(model).__name__}")
    return model


def capsnet_loss(model: nn.Module, images: torch.Tensor, labels: torch.Tensor,
                 recon_weight: float = RECON_WEIGHT) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Total loss of one batch (Eq. 4 + ``recon_weight`` x Section 4.1) and its lengths (B, J).

    ``model`` is a :class:`CapsNet` or any network whose ``model(images, labels)`` returns a
    :class:`CapsNetOutput` (Efficient-CapsNet, lesson 12). The decoder is masked by the true
    ``labels``, as in training. This is what :class:`capsedu.training.objectives.MarginObjective`
    computes for :func:`capsedu.fit`.
    """
    out = model(images, labels)
    loss = margin_loss(out.lengths, labels) + recon_weight * reconstruction_loss(out.reconstruction, images)
    return loss, out.lengths
