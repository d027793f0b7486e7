r"""A matrix-capsule network with EM routing (Hinton, Sabour & Frosst 2018), small enough for a CPU.

Layers (the paper's smallNORB network with its widths A, B, C, D = 64, 8, 16, 16 - here
``conv1_channels``, ``primary_types``, ``conv_caps1_types``, ``conv_caps2_types`` - the
configuration the best-known PyTorch port reports 99.1 % MNIST accuracy for, about 70 k
parameters)::

    image (B, 1, 28, 28) --conv 5x5/2, ReLU--> (B, 64, 12, 12)
      --PrimaryMatrixCaps 1x1--> poses (B, 8, 12, 12, 16), activations (B, 8, 12, 12)
      --ConvMatrixCaps 3x3/2, EM--> (B, 16, 5, 5, 16), (B, 16, 5, 5)
      --ConvMatrixCaps 3x3/1, EM--> (B, 16, 3, 3, 16), (B, 16, 3, 3)
      --ClassMatrixCaps (shared W, coordinate addition), EM--> poses (B, 10, 16), activations (B, 10)

A pose is a 4x4 matrix stored as 16 numbers; a vote is pose @ W, with one 4x4 ``W`` per kernel
position, input type and output type, shared across the grid (a convolution's weight sharing).
Each output position routes the K*K*types capsules of its own patch (the common simplification:
the paper's convolutional routing also normalises a child's assignments across the parents of
overlapping patches). The class layer shares ``W`` over positions and adds each capsule's scaled
(x, y) grid position to the first two entries of its vote's last column (coordinate addition).

The network is trained with the spread loss (:func:`capsedu.nets.losses.spread_loss`), its
margin moved from 0.2 to 0.9 during training as the paper does: that schedule is part of the
objective (:class:`capsedu.training.objectives.SpreadObjective`), not of the network.

Shape legend:
    B      batch size
    H, W   height and width of a capsule grid (H', W' after a layer)
    K      kernel size
    T_in, T_out  capsule types in and out of a layer (T where there is one)
    Q      output positions of a convolutional capsule layer (H' * W')
    I      input capsules of one routing
    J      output capsules of one routing
    M      pose entries (16 = a 4 x 4 pose; the shapes below write 16)
    C      channels
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from capsedu._validate import require_images
from capsedu.nets.contract import NetworkConfig
from capsedu.nets.em_routing import DEFAULT_INVERSE_TEMPERATURE, em_routing


@dataclass(frozen=True)
class MatrixCapsConfig(NetworkConfig):
    r"""Sizes of :class:`MatrixCapsNet` (defaults: the port's 64/8/16/16 MNIST configuration)."""

    image_size: int = 28
    in_channels: int = 1
    conv1_channels: int = 64  # A
    primary_types: int = 8  # B
    conv_caps1_types: int = 16  # C
    conv_caps2_types: int = 16  # D
    num_classes: int = 10
    routing_iterations: int = 2
    inverse_temperature: float = DEFAULT_INVERSE_TEMPERATURE
    class_inverse_temperature: float | None = None  # the class layer's lambda (None: the same)
    normalise_cost: bool = False  # em_routing's option, in every layer (off: Procedure 1)
    beta_a_logit_units: bool = False  # learn lambda * beta_a instead of beta_a (see ConvMatrixCaps)


def _matmul4(poses: torch.Tensor, W: torch.Tensor, spec: str) -> torch.Tensor:
    r"""4x4 products of poses (..., 16) with matrices W (..., 4, 4), index letters given by ``spec``."""
    return torch.einsum(spec, poses.unflatten(-1, (4, 4)), W).flatten(-2)


class PrimaryMatrixCaps(nn.Module):
    r"""A 1x1 convolution read as matrix capsules: (B, C, H, W) -> poses (B, T, H, W, 16),
    activations (B, T, H, W)."""

    def __init__(self, in_channels: int, types: int) -> None:
        super().__init__()
        self.types = types
        self.pose = nn.Conv2d(in_channels, types * 16, kernel_size=1)
        self.activation = nn.Conv2d(in_channels, types, kernel_size=1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        batch, _, h, w = x.shape
        poses = self.pose(x).view(batch, self.types, 16, h, w).permute(0, 1, 3, 4, 2)  # (B, T, H, W, 16)
        return poses, torch.sigmoid(self.activation(x))  # (B, T, H, W)


class RoutedCaps(nn.Module):
    r"""What a layer that routes by EM holds: one λ per iteration (``inverse_temperatures``) and
    the cost offsets :math:`\beta_u`, :math:`\beta_a` (one per output type).

    ``beta_a_logit_units``: the parameter ``beta_a`` holds :math:`\lambda\beta_a` and routing
    gets it divided by λ - the same function, but Adam moves the activation offset by about the
    learning rate in logit units per step, where with λ = 0.001 it would need thousands of steps
    to move :math:`\beta_a` as far as the activations need. :meth:`routing_betas` gives the
    offsets routing really uses, whichever the units.
    """

    def __init__(self, routing_iterations: int, inverse_temperature: float, normalise_cost: bool,
                 beta_a_logit_units: bool) -> None:
        super().__init__()
        self.inverse_temperatures = [inverse_temperature] * routing_iterations
        self.normalise_cost = normalise_cost
        self.beta_a_scale = 1.0 / inverse_temperature if beta_a_logit_units else 1.0

    def _add_betas(self, out_types: int) -> None:
        self.beta_u = nn.Parameter(torch.zeros(out_types))
        self.beta_a = nn.Parameter(torch.zeros(out_types))

    def routing_betas(self) -> tuple[torch.Tensor, torch.Tensor]:
        r"""``(beta_u, beta_a)`` (J,) each, as :func:`~capsedu.nets.em_routing.em_routing` gets them."""
        return self.beta_u, self.beta_a * self.beta_a_scale

    def route(self, votes: torch.Tensor, activations: torch.Tensor, *,
              logits: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        r"""EM routing of votes (B', I, J, 16) weighted by activations (B', I): mu (B', J, 16), a (B', J)
        (with ``logits``, the logits of a), in float32 (also under autocast: variances and
        logarithms need its range)."""
        with torch.autocast(votes.device.type, enabled=False):
            mu, a_out, _ = em_routing(votes.float(), activations.float(), *self.routing_betas(),
                                      len(self.inverse_temperatures), self.inverse_temperatures,
                                      normalise_cost=self.normalise_cost, logits=logits)
        return mu, a_out


class ConvMatrixCaps(RoutedCaps):
    r"""K x K convolutional capsules: every output position routes the capsules of its patch by EM."""

    def __init__(self, in_types: int, out_types: int, kernel: int, stride: int,
                 routing_iterations: int, inverse_temperature: float, normalise_cost: bool = False,
                 beta_a_logit_units: bool = False) -> None:
        super().__init__(routing_iterations, inverse_temperature, normalise_cost, beta_a_logit_units)
        self.kernel, self.stride, self.in_types, self.out_types = kernel, stride, in_types, out_types
        self.W = nn.Parameter(0.5 * torch.randn(kernel, kernel, in_types, out_types, 4, 4))
        self._add_betas(out_types)

    def _patches(self, x: torch.Tensor) -> torch.Tensor:
        r"""(B, C, H, W) -> (B, Q, K, K, C): the K x K patch of every output position."""
        batch, channels = x.shape[:2]
        k = self.kernel
        cols = F.unfold(x, k, stride=self.stride)  # (B, C*K*K, Q)
        return cols.view(batch, channels, k, k, -1).permute(0, 4, 2, 3, 1)  # (B, Q, K, K, C)

    def forward(self, poses: torch.Tensor, activations: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        batch, t, h, w, _ = poses.shape
        k, out_h, out_w = self.kernel, (h - self.kernel) // self.stride + 1, (w - self.kernel) // self.stride + 1
        pose_patches = self._patches(poses.permute(0, 1, 4, 2, 3).reshape(batch, t * 16, h, w))  # (B, Q, K, K, T_in*16)
        pose_patches = pose_patches.reshape(batch, -1, k, k, t, 16)  # (B, Q, K, K, T_in, 16)
        act_patches = self._patches(activations)  # (B, Q, K, K, T_in)
        votes = _matmul4(pose_patches, self.W, "nlxytpq,xytcqr->nlcxytpr")  # (B, Q, T_out, K, K, T_in, 16)
        votes = votes.reshape(-1, self.out_types, k * k * t, 16)  # (B*Q, J, I, 16): routing's inner layout
        mu, a_out = self.route(votes.transpose(1, 2), act_patches.reshape(-1, k * k * t))  # (B*Q, J, 16), (B*Q, J)
        mu = mu.view(batch, out_h, out_w, self.out_types, 16).permute(0, 3, 1, 2, 4)  # (B, T_out, H', W', 16)
        return mu, a_out.view(batch, out_h, out_w, self.out_types).permute(0, 3, 1, 2)  # (B, T_out, H', W')


class ClassMatrixCaps(RoutedCaps):
    r"""Class capsules: one W per input type shared over the grid, plus coordinate addition."""

    def __init__(self, in_types: int, num_classes: int, routing_iterations: int,
                 inverse_temperature: float, normalise_cost: bool = False,
                 beta_a_logit_units: bool = False) -> None:
        super().__init__(routing_iterations, inverse_temperature, normalise_cost, beta_a_logit_units)
        self.num_classes = num_classes
        self.W = nn.Parameter(0.5 * torch.randn(in_types, num_classes, 4, 4))
        self._add_betas(num_classes)

    def votes(self, poses: torch.Tensor) -> torch.Tensor:
        r"""Votes (B, I, J, 16) of poses (B, T, H, W, 16), I = T*H*W, with each capsule's scaled
        (x, y) position added to entries 3 and 7 (the top two of the vote matrix's last column)."""
        batch, t, h, w, _ = poses.shape
        votes = _matmul4(poses, self.W, "nthwpq,tcqr->nthwcpr")  # (B, T, H, W, J, 16)
        rows = (torch.arange(h, dtype=poses.dtype, device=poses.device) + 0.5) / h  # (H,) scaled centre of each row
        cols = (torch.arange(w, dtype=poses.dtype, device=poses.device) + 0.5) / w  # (W,)
        offset = poses.new_zeros(h, w, 16)  # (H, W, 16): entries 3 and 7 are the last column's top two
        offset[..., 3] = cols.view(1, w)
        offset[..., 7] = rows.view(h, 1)
        votes = votes + offset.view(1, 1, h, w, 1, 16)  # coordinate addition
        return votes.reshape(batch, t * h * w, self.num_classes, 16)  # (B, I, J, 16)

    def forward(self, poses: torch.Tensor, activations: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.route(self.votes(poses), activations.reshape(len(poses), -1))  # (B, J, 16), (B, J)


class MatrixCapsNet(nn.Module):
    r"""conv1 -> primary matrix capsules -> two convolutional capsule layers -> class capsules."""

    kind = "em"
    config_class = MatrixCapsConfig

    def __init__(self, config: MatrixCapsConfig | None = None) -> None:
        super().__init__()
        config = MatrixCapsConfig() if config is None else config
        if not isinstance(config, MatrixCapsConfig):
            raise TypeError(f"config must be a MatrixCapsConfig, got {type(config).__name__}")
        self.config = config
        r, inverse_temperature = config.routing_iterations, config.inverse_temperature
        options = (config.normalise_cost, config.beta_a_logit_units)
        class_inverse_temperature = (inverse_temperature if config.class_inverse_temperature is None
                                     else config.class_inverse_temperature)
        self.conv1 = nn.Conv2d(config.in_channels, config.conv1_channels, kernel_size=5, stride=2)
        self.primary = PrimaryMatrixCaps(config.conv1_channels, config.primary_types)
        self.caps1 = ConvMatrixCaps(config.primary_types, config.conv_caps1_types, 3, 2, r,
                                    inverse_temperature, *options)
        self.caps2 = ConvMatrixCaps(config.conv_caps1_types, config.conv_caps2_types, 3, 1, r,
                                    inverse_temperature, *options)
        self.class_caps = ClassMatrixCaps(config.conv_caps2_types, config.num_classes, r,
                                          class_inverse_temperature, *options)

    def class_votes(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        r"""Images (B, C, H, W) -> the class layer's votes (B, I, J, 16) and its input activations
        (B, I): everything before the last routing (lesson 11 traces that routing). The images are
        checked here (shape, NaN and inf), once; the layers inside check nothing more."""
        require_images("x", x, channels=self.config.in_channels, size=self.config.image_size)
        poses, activations = self.primary(F.relu(self.conv1(x)))  # (B, T, 12, 12, 16), (B, T, 12, 12)
        poses, activations = self.caps1(poses, activations)  # (B, T, 5, 5, 16), (B, T, 5, 5)
        poses, activations = self.caps2(poses, activations)  # (B, T, 3, 3, 16), (B, T, 3, 3)
        return self.class_caps.votes(poses), activations.reshape(len(x), -1)  # (B, I, J, 16), (B, I)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        r"""Images (B, C, H, W) -> class poses (B, J, 16) and class activations (B, J)."""
        votes, activations = self.class_votes(x)  # (B, I, J, 16), (B, I)
        return self.class_caps.route(votes, activations)  # (B, J, 16), (B, J)

    def class_scores(self, x: torch.Tensor) -> torch.Tensor:
        r"""Images (B, C, H, W) -> the class capsules' activations (B, J)."""
        return self(x)[1]  # (B, J)

    def class_logits(self, x: torch.Tensor) -> torch.Tensor:
        r"""Images (B, C, H, W) -> the logits of the class capsules' activations (B, J), before
        the sigmoid: their order is the activations' order, their gradient does not vanish where
        an activation is near 0 or 1 (lesson 13's attacks)."""
        votes, activations = self.class_votes(x)  # (B, I, J, 16), (B, I)
        return self.class_caps.route(votes, activations, logits=True)[1]  # (B, J)
