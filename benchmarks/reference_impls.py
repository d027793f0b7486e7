r"""Reference CapsNets written in three routing styles common in open-source tutorials.

These are *our own* re-implementations, for benchmarking only (``benchmarks/speed.py``): they
compute exactly what ``capsedu.CapsNet`` computes (same weights in, same outputs out), but in the
way popular tutorials write the digit-capsule layer, so that speed and memory can be compared
side by side. They are not used by the course.

1. ``BroadcastMatmulDigitCaps``: ``W`` (1, I, J, D_out, D_in) times ``u`` (B, I, 1, D_in, 1)
   with a broadcasting ``torch.matmul``, agreement by another broadcasting matmul, a loop over
   the iterations.
2. ``EinsumDigitCaps``: ``torch.einsum`` for the prediction vectors, ``s`` and the agreement.
3. ``TiledDigitCaps``: weights and inputs ``repeat``-ed to the batch before one big ``matmul``,
   iterations written out one after another.

Every head takes ``detach_inner``: ``True`` gives the inner iterations ``u_hat.detach()`` (as
many tutorials do, and capsedu's default). The benchmark passes capsedu's setting to all of them
so that outputs *and* gradients agree.

Shape legend:
    B      batch size
    I      input (primary) capsules, 1152 in the paper
    J      output (digit) capsules, 10
    D_in   primary capsule dimension, 8
    D_out  digit capsule dimension, 16
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from capsedu import CapsNet, CapsNetOutput


def tutorial_squash(s: torch.Tensor, dim: int = -1) -> torch.Tensor:
    r"""Eq. 1 as tutorials write it (with capsedu's ``eps`` inside the root, so values agree)."""
    squared_norm = (s ** 2).sum(dim=dim, keepdim=True)
    scale = squared_norm / (1 + squared_norm)
    return scale * s / torch.sqrt(squared_norm + 1e-8)


class _Head(nn.Module):
    r"""Common constructor: a weight ``W`` stored as (1, I, J, D_out, D_in)."""

    def __init__(self, weight: torch.Tensor, num_iterations: int = 3,
                 detach_inner: bool = True) -> None:
        super().__init__()
        self.W = nn.Parameter(weight.detach().clone().unsqueeze(0))  # (1, I, J, D_out, D_in)
        self.num_iterations, self.detach_inner = num_iterations, detach_inner

    def predict(self, u: torch.Tensor) -> torch.Tensor:
        r"""Prediction vectors in this style's own layout."""
        raise NotImplementedError

    def route(self, u_hat: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        r"""Routing from ``predict``'s output to ``(v (B, J, D_out), c (B, I, J))``."""
        raise NotImplementedError

    def forward(self, u: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.route(self.predict(u))


class BroadcastMatmulDigitCaps(_Head):
    r"""Style 1: broadcasting ``torch.matmul`` of 5-D tensors, loop over iterations."""

    def predict(self, u: torch.Tensor) -> torch.Tensor:
        return torch.matmul(self.W, u[:, :, None, :, None])  # (B, I, J, D_out, 1)

    def route(self, u_hat: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        u_hat_inner = u_hat.detach() if self.detach_inner else u_hat
        b = u_hat.new_zeros(*u_hat.shape[:3], 1, 1)  # (B, I, J, 1, 1)
        for r in range(self.num_iterations):
            last = r == self.num_iterations - 1
            uh = u_hat if last else u_hat_inner
            c = torch.softmax(b, dim=2)  # (B, I, J, 1, 1)
            s = (c * uh).sum(dim=1, keepdim=True)  # (B, 1, J, D_out, 1)
            v = tutorial_squash(s, dim=-2)  # (B, 1, J, D_out, 1)
            if not last:
                b = b + torch.matmul(uh.transpose(-1, -2), v)  # (B, I, J, 1, 1)
        return v.squeeze(-1).squeeze(1), c.squeeze(-1).squeeze(-1)


class EinsumDigitCaps(_Head):
    r"""Style 2: ``torch.einsum`` for u_hat, s and the agreement."""

    def predict(self, u: torch.Tensor) -> torch.Tensor:
        return torch.einsum("ijdk,bik->bijd", self.W[0], u)  # (B, I, J, D_out)

    def route(self, u_hat: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        u_hat_inner = u_hat.detach() if self.detach_inner else u_hat
        b = u_hat.new_zeros(u_hat.shape[:3])  # (B, I, J)
        for r in range(self.num_iterations):
            last = r == self.num_iterations - 1
            uh = u_hat if last else u_hat_inner
            c = torch.softmax(b, dim=2)  # (B, I, J)
            s = torch.einsum("bij,bijd->bjd", c, uh)  # (B, J, D_out)
            v = tutorial_squash(s)  # (B, J, D_out)
            if not last:
                b = b + torch.einsum("bijd,bjd->bij", uh, v)  # (B, I, J)
        return v, c


class TiledDigitCaps(_Head):
    r"""Style 3: ``repeat`` weights and inputs to the batch, iterations written out (r = 3 only)."""

    def predict(self, u: torch.Tensor) -> torch.Tensor:
        batch, num_out = u.shape[0], self.W.shape[2]
        W = self.W.repeat(batch, 1, 1, 1, 1)  # (B, I, J, D_out, D_in)
        x = u[:, :, None, :, None].repeat(1, 1, num_out, 1, 1)  # (B, I, J, D_in, 1)
        return torch.matmul(W, x).squeeze(-1)  # (B, I, J, D_out)

    def route(self, u_hat: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.num_iterations != 3:
            raise ValueError("TiledDigitCaps writes out exactly 3 iterations")
        u_hat_inner = u_hat.detach() if self.detach_inner else u_hat
        b = u_hat.new_zeros(u_hat.shape[:3])  # (B, I, J)
        # iteration 1
        c = torch.softmax(b, dim=2)
        v = tutorial_squash((c[..., None] * u_hat_inner).sum(dim=1))  # (B, J, D_out)
        b = b + (u_hat_inner * v[:, None]).sum(dim=-1)  # (B, I, J)
        # iteration 2
        c = torch.softmax(b, dim=2)
        v = tutorial_squash((c[..., None] * u_hat_inner).sum(dim=1))
        b = b + (u_hat_inner * v[:, None]).sum(dim=-1)
        # iteration 3 (the only one gradients reach when detach_inner)
        c = torch.softmax(b, dim=2)
        v = tutorial_squash((c[..., None] * u_hat).sum(dim=1))
        return v, c


class ReferenceCapsNet(nn.Module):
    r"""A tutorial-style CapsNet holding a copy of a ``capsedu.CapsNet``'s weights.

    conv1 -> ReLU -> primary conv -> reshape -> squash -> ``head`` -> decoder, written as
    tutorials write it (plain NCHW convolutions, mask by one-hot). Returns a ``CapsNetOutput``.
    """

    def __init__(self, model: CapsNet, head: type[_Head]) -> None:
        super().__init__()
        cfg = model.config
        self.config = cfg
        self.conv1 = copy.deepcopy(model.conv1)
        self.primary_conv = copy.deepcopy(model.primary.conv)
        self.class_caps = head(model.class_caps.W, cfg.routing_iterations, cfg.detach_inner)
        self.decoder = copy.deepcopy(model.decoder)

    def forward(self, x: torch.Tensor, y: torch.Tensor | None = None) -> CapsNetOutput:
        cfg = self.config
        out = self.primary_conv(torch.relu(self.conv1(x)))  # (B, T*D_in, 6, 6)
        batch, _, height, width = out.shape
        u = out.view(batch, cfg.primary_types, cfg.primary_dim, height, width)
        u = u.permute(0, 1, 3, 4, 2).reshape(batch, -1, cfg.primary_dim)  # (B, I, D_in)
        v, c = self.class_caps(tutorial_squash(u))  # (B, J, D_out), (B, I, J)
        lengths = v.norm(dim=-1)  # (B, J)
        labels = lengths.argmax(dim=1) if y is None else y
        mask = torch.nn.functional.one_hot(labels, cfg.num_classes).to(v)  # (B, J)
        flat = self.decoder((v * mask[:, :, None]).view(batch, -1))  # (B, C*H*W)
        recon = flat.view(batch, cfg.in_channels, cfg.image_size, cfg.image_size)
        return CapsNetOutput(v, lengths, recon, c)


REFERENCE_HEADS: dict[str, type[_Head]] = {
    "broadcast-matmul": BroadcastMatmulDigitCaps,
    "einsum": EinsumDigitCaps,
    "tiled-repeat": TiledDigitCaps,
}


def reference_models(model: CapsNet) -> dict[str, ReferenceCapsNet]:
    r"""One tutorial-style copy of ``model`` per routing style, all with ``model``'s weights."""
    return {name: ReferenceCapsNet(model, head) for name, head in REFERENCE_HEADS.items()}
