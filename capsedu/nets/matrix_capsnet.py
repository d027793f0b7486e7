r"""A matrix-capsule network with EM routing (Hinton, Sabour & Frosst 2018), small enough for a CPU.

Layers (the paper's smallNORB network with A, B, C, D = 64, 8, 16, 16, the configuration the
best-known PyTorch port reports 99.1 % MNIST accuracy for, about 70 k parameters)::

    image (N, 1, 28, 28) --conv 5x5/2, ReLU--> (N, A, 12, 12)
      --PrimaryMatrixCaps 1x1--> poses (N, B, 12, 12, 16), activations (N, B, 12, 12)
      --ConvMatrixCaps 3x3/2, EM--> (N, C, 5, 5, 16), (N, C, 5, 5)
      --ConvMatrixCaps 3x3/1, EM--> (N, D, 3, 3, 16), (N, D, 3, 3)
      --ClassMatrixCaps (shared W, coordinate addition), EM--> poses (N, 10, 16), activations (N, 10)

A pose is a 4x4 matrix stored as 16 numbers; a vote is pose @ W, with one 4x4 ``W`` per kernel
position, input type and output type, shared across the grid (a convolution's weight sharing).
Each output position routes the K*K*types capsules of its own patch (the common simplification:
the paper's convolutional routing also normalises a child's assignments across the parents of
overlapping patches). The class layer shares ``W`` over positions and adds each capsule's scaled
(x, y) grid position to the first two entries of its vote's last column (coordinate addition).

Loss: the spread loss :math:`L = \sum_{i \ne t}\max(0, m - (a_t - a_i))^2`, batch mean, with the
margin ``m`` an explicit attribute (:attr:`MatrixCapsNet.margin`) that :func:`margin_schedule`
(an epoch callback for :func:`capsedu.fit`) moves from 0.2 to 0.9, as the paper does.

Shape legend:
    N      batch size;  H, W  grid height and width;  K  kernel size
    T_in, T_out  capsule types in and out;  L  output positions (H' * W')
    I, J   input and output capsules of one routing;  16 = a 4x4 pose
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from capsedu.nets.em_routing import DEFAULT_INVERSE_TEMPERATURE, em_routing_unchecked
from capsedu.nets.registry import Loss, NetworkConfig


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
    r"""A 1x1 convolution read as matrix capsules: (N, A, H, W) -> poses (N, T, H, W, 16), activations (N, T, H, W)."""

    def __init__(self, in_channels: int, types: int) -> None:
        super().__init__()
        self.types = types
        self.pose = nn.Conv2d(in_channels, types * 16, kernel_size=1)
        self.activation = nn.Conv2d(in_channels, types, kernel_size=1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        n, _, h, w = x.shape
        poses = self.pose(x).view(n, self.types, 16, h, w).permute(0, 1, 3, 4, 2)  # (N, T, H, W, 16)
        return poses, torch.sigmoid(self.activation(x))  # (N, T, H, W)


class ConvMatrixCaps(nn.Module):
    r"""K x K convolutional capsules: every output position routes the capsules of its patch by EM."""

    def __init__(self, in_types: int, out_types: int, kernel: int, stride: int,
                 iterations: int, inverse_temperature: float, normalise_cost: bool = False,
                 beta_a_logit_units: bool = False) -> None:
        r"""``beta_a_logit_units``: the parameter ``beta_a`` holds :math:`\lambda\beta_a` and routing
        gets it divided by λ - the same function, but Adam moves the activation offset by about
        the learning rate in logit units per step, where with λ = 0.001 it would need thousands
        of steps to move :math:`\beta_a` as far as the activations need."""
        super().__init__()
        self.kernel, self.stride, self.in_types, self.out_types = kernel, stride, in_types, out_types
        self.lambdas = [inverse_temperature] * iterations
        self.normalise_cost = normalise_cost
        self.beta_a_scale = 1.0 / inverse_temperature if beta_a_logit_units else 1.0
        self.W = nn.Parameter(0.5 * torch.randn(kernel, kernel, in_types, out_types, 4, 4))
        self.beta_u = nn.Parameter(torch.zeros(out_types))
        self.beta_a = nn.Parameter(torch.zeros(out_types))

    def _patches(self, x: torch.Tensor) -> torch.Tensor:
        r"""(N, C, H, W) -> (N, L, K, K, C): the K x K patch of every output position."""
        n, c = x.shape[:2]
        k = self.kernel
        cols = F.unfold(x, k, stride=self.stride)  # (N, C*K*K, L)
        return cols.view(n, c, k, k, -1).permute(0, 4, 2, 3, 1)  # (N, L, K, K, C)

    def forward(self, poses: torch.Tensor, activations: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        n, t, h, w, _ = poses.shape
        k, out_h, out_w = self.kernel, (h - self.kernel) // self.stride + 1, (w - self.kernel) // self.stride + 1
        pose_patches = self._patches(poses.permute(0, 1, 4, 2, 3).reshape(n, t * 16, h, w))  # (N, L, K, K, T*16)
        pose_patches = pose_patches.reshape(n, -1, k, k, t, 16)  # (N, L, K, K, T_in, 16)
        act_patches = self._patches(activations)  # (N, L, K, K, T_in)
        votes = _matmul4(pose_patches, self.W, "nlxytpq,xytcqr->nlcxytpr")  # (N, L, T_out, K, K, T_in, 16)
        votes = votes.reshape(-1, self.out_types, k * k * t, 16)  # (N*L, J, I, 16): routing's layout
        mu, a_out, _ = em_routing_unchecked(votes, act_patches.reshape(-1, k * k * t),
                                            self.beta_u, self.beta_a * self.beta_a_scale,
                                            self.lambdas, normalise_cost=self.normalise_cost)
        mu = mu.view(n, out_h, out_w, self.out_types, 16).permute(0, 3, 1, 2, 4)  # (N, T_out, H', W', 16)
        return mu, a_out.view(n, out_h, out_w, self.out_types).permute(0, 3, 1, 2)  # (N, T_out, H', W')


class ClassMatrixCaps(nn.Module):
    r"""Class capsules: one W per input type shared over the grid, plus coordinate addition."""

    def __init__(self, in_types: int, num_classes: int, iterations: int, inverse_temperature: float,
                 normalise_cost: bool = False, beta_a_logit_units: bool = False) -> None:
        super().__init__()
        self.num_classes = num_classes
        self.lambdas = [inverse_temperature] * iterations
        self.normalise_cost = normalise_cost
        self.beta_a_scale = 1.0 / inverse_temperature if beta_a_logit_units else 1.0  # as ConvMatrixCaps
        self.W = nn.Parameter(0.5 * torch.randn(in_types, num_classes, 4, 4))
        self.beta_u = nn.Parameter(torch.zeros(num_classes))
        self.beta_a = nn.Parameter(torch.zeros(num_classes))

    def votes(self, poses: torch.Tensor) -> torch.Tensor:
        r"""Votes (N, I, J, 16) of poses (N, T, H, W, 16), I = T*H*W, with each capsule's scaled
        (x, y) position added to entries 3 and 7 (the top two of the vote matrix's last column)."""
        n, t, h, w, _ = poses.shape
        votes = _matmul4(poses, self.W, "nthwpq,tcqr->nthwcpr")  # (N, T, H, W, J, 16)
        rows = (torch.arange(h, dtype=poses.dtype) + 0.5) / h  # (H,) scaled centre of each row
        cols = (torch.arange(w, dtype=poses.dtype) + 0.5) / w  # (W,)
        offset = poses.new_zeros(h, w, 16)  # (H, W, 16): entries 3 and 7 are the last column's top two
        offset[..., 3] = cols.view(1, w)
        offset[..., 7] = rows.view(h, 1)
        votes = votes + offset.view(1, 1, h, w, 1, 16)  # coordinate addition
        return votes.reshape(n, t * h * w, self.num_classes, 16)  # (N, I, J, 16)

    def forward(self, poses: torch.Tensor, activations: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        votes = self.votes(poses).transpose(1, 2).contiguous()  # (N, J, I, 16): routing's layout
        mu, a_out, _ = em_routing_unchecked(votes, activations.reshape(len(poses), -1),
                                            self.beta_u, self.beta_a * self.beta_a_scale,
                                            self.lambdas, normalise_cost=self.normalise_cost)
        return mu, a_out  # (N, J, 16), (N, J)


def spread_loss(activations: torch.Tensor, labels: torch.Tensor, margin: float) -> torch.Tensor:
    r"""Spread loss :math:`\frac1N\sum_n\sum_{i\ne t}\max(0, m - (a_t - a_i))^2` of activations (N, J)."""
    if activations.dim() != 2 or len(activations) == 0:
        raise ValueError(f"activations must be (N, J) with N >= 1, got {tuple(activations.shape)}")
    if (labels.shape != activations.shape[:1] or labels.dtype.is_floating_point
            or labels.min() < 0 or labels.max() >= activations.shape[1]):
        raise ValueError(f"labels must be ({len(activations)},) integer classes in [0, "
                         f"{activations.shape[1]}), got shape {tuple(labels.shape)}, dtype "
                         f"{labels.dtype}, values {labels.min().item()}..{labels.max().item()}")
    if not 0 < margin <= 1:
        raise ValueError(f"margin must be in (0, 1], got {margin}")
    target = activations.gather(1, labels.view(-1, 1))  # (N, 1)
    gaps = F.relu(margin - (target - activations)) ** 2  # (N, J): the target's own term is m^2
    return (gaps.sum(dim=1) - margin ** 2).mean()


class MatrixCapsNet(nn.Module):
    r"""conv1 -> primary matrix capsules -> two convolutional capsule layers -> class capsules."""

    kind = "em"
    config_class = MatrixCapsConfig

    def __init__(self, config: MatrixCapsConfig | None = None) -> None:
        super().__init__()
        self.config = config = config or MatrixCapsConfig()
        r, lam, options = config.routing_iterations, config.inverse_temperature, (
            config.normalise_cost, config.beta_a_logit_units)
        class_lam = lam if config.class_inverse_temperature is None else config.class_inverse_temperature
        self.conv1 = nn.Conv2d(config.in_channels, config.conv1_channels, kernel_size=5, stride=2)
        self.primary = PrimaryMatrixCaps(config.conv1_channels, config.primary_types)
        self.caps1 = ConvMatrixCaps(config.primary_types, config.conv_caps1_types, 3, 2, r, lam, *options)
        self.caps2 = ConvMatrixCaps(config.conv_caps1_types, config.conv_caps2_types, 3, 1, r, lam, *options)
        self.classes = ClassMatrixCaps(config.conv_caps2_types, config.num_classes, r, class_lam, *options)
        self.margin = 0.2  # the spread loss's margin, moved from 0.2 to 0.9 by the training recipe

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        r"""Images (N, C, H, W) -> class poses (N, J, 16) and class activations (N, J)."""
        poses, activations = self.primary(F.relu(self.conv1(x)))  # (N, B, 12, 12, 16), (N, B, 12, 12)
        poses, activations = self.caps1(poses, activations)  # (N, C, 5, 5, 16), (N, C, 5, 5)
        poses, activations = self.caps2(poses, activations)  # (N, D, 3, 3, 16), (N, D, 3, 3)
        return self.classes(poses, activations)  # (N, J, 16), (N, J)

    def class_scores(self, x: torch.Tensor) -> torch.Tensor:
        return self(x)[1]  # (N, J)

    def loss(self, images: torch.Tensor, labels: torch.Tensor) -> Loss:
        r"""The spread loss at the current :attr:`margin`, and the number of images right."""
        activations = self(images)[1]  # (N, J)
        value = spread_loss(activations, labels, self.margin)
        return Loss(value, (activations.argmax(dim=1) == labels).sum())


def margin_schedule(model: MatrixCapsNet, ramp_epochs: int, start: float = 0.2,
                    end: float = 0.9) -> Callable[[int, dict], None]:
    r"""An epoch callback for :func:`capsedu.fit`: sets ``model.margin`` to ``start`` now and moves
    it linearly to ``end`` over ``ramp_epochs`` epochs (the paper: "a small margin of 0.2 ...
    linearly increased during training to 0.9"), then keeps it there."""
    if isinstance(ramp_epochs, bool) or not isinstance(ramp_epochs, int) or ramp_epochs < 1:
        raise ValueError(f"ramp_epochs must be an int >= 1, got {ramp_epochs!r}")
    if not 0 < start <= end <= 1:
        raise ValueError(f"start and end must satisfy 0 < start <= end <= 1, got {start}, {end}")
    model.margin = start

    def callback(epoch: int, history: dict) -> None:
        model.margin = start + (end - start) * min(epoch / ramp_epochs, 1.0)

    return callback
