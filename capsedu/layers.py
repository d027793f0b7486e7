r"""Capsule layers: primary capsules (a convolution) and digit capsules (prediction + routing).

Shape legend:
    B      batch size
    C, H, W   channels, height, width of a feature map
    T      primary capsule types (the paper's 32 channels of 8-D capsules)
    I      input capsules = T * H' * W' (1152 = 32 * 6 * 6 in the paper)
    J      output capsules (10 digit classes)
    D_in   input capsule dimension (8)
    D_out  output capsule dimension (16)
"""

from __future__ import annotations

import torch
from torch import nn

from capsedu._validate import require_finite, require_int, require_nonempty_batch, require_tensor
from capsedu.routing import dynamic_routing_fast
from capsedu.squash import squash_unchecked


class PrimaryCaps(nn.Module):
    r"""A convolution whose output channels are grouped into ``num_types`` capsule types.

    (B, C, H, W) -> conv -> (B, T*D_in, H', W') -> (B, T*H'*W', D_in), squashed (Eq. 1).

    The channels of each capsule type are contiguous (channel ``t*D_in + d`` is dimension ``d``
    of type ``t``), and capsules are ordered type-major: index ``i = t*H'*W' + y*W' + x``.
    """

    def __init__(self, in_channels: int, num_types: int, caps_dim: int,
                 kernel_size: int = 9, stride: int = 2) -> None:
        super().__init__()
        for name, value in [("in_channels", in_channels), ("num_types", num_types),
                            ("caps_dim", caps_dim), ("kernel_size", kernel_size), ("stride", stride)]:
            require_int(name, value, minimum=1)
        self.in_channels, self.num_types, self.caps_dim = in_channels, num_types, caps_dim
        self.conv = nn.Conv2d(in_channels, num_types * caps_dim, kernel_size, stride)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        require_tensor("x", x, ndim=4, shape=f"(B, {self.in_channels}, H, W)", floating=True)
        require_nonempty_batch("x", x)
        if x.shape[1] != self.in_channels:
            raise ValueError(f"x must have {self.in_channels} channels (B, {self.in_channels}, H, W), "
                             f"got shape {tuple(x.shape)}")
        require_finite("x", x)
        features = self.conv(x)  # (B, T*D_in, H', W')
        batch, _, height, width = features.shape
        u = features.view(batch, self.num_types, self.caps_dim, height, width)  # (B, T, D_in, H', W')
        u = u.permute(0, 1, 3, 4, 2)  # (B, T, H', W', D_in): the capsule vector last
        u = u.reshape(batch, self.num_types * height * width, self.caps_dim)  # (B, I, D_in)
        return squash_unchecked(u, dim=-1)  # (B, I, D_in), x was checked above

    def extra_repr(self) -> str:
        return f"num_types={self.num_types}, caps_dim={self.caps_dim}"


class DigitCaps(nn.Module):
    r"""Fully connected capsule layer: prediction vectors (Eq. 2) then dynamic routing.

    Routing runs :func:`capsedu.routing.dynamic_routing_fast`, tested equal (values and
    gradients) to the readable :func:`capsedu.dynamic_routing` that the lessons build.

    ``W`` has shape (I, J, D_out, D_in) and :math:`\hat{\mathbf u}_{j|i} = \mathbf W_{ij}\mathbf u_i`.
    It is initialised with a normal distribution of standard deviation 0.01.
    """

    def __init__(self, in_caps: int, in_dim: int, out_caps: int, out_dim: int,
                 num_iterations: int = 3, detach_inner: bool = True) -> None:
        super().__init__()
        for name, value in [("in_caps", in_caps), ("in_dim", in_dim), ("out_caps", out_caps),
                            ("out_dim", out_dim), ("num_iterations", num_iterations)]:
            require_int(name, value, minimum=1)
        self.in_caps, self.in_dim, self.out_caps, self.out_dim = in_caps, in_dim, out_caps, out_dim
        self.num_iterations, self.detach_inner = num_iterations, detach_inner
        self.W = nn.Parameter(0.01 * torch.randn(in_caps, out_caps, out_dim, in_dim))

    def predict(self, u: torch.Tensor) -> torch.Tensor:
        r"""Prediction vectors :math:`\hat{\mathbf u}_{j|i} = \mathbf W_{ij}\mathbf u_i`, (B, I, J, D_out)."""
        shape = f"(B, {self.in_caps}, {self.in_dim})"
        require_tensor("u", u, ndim=3, shape=shape, floating=True)
        require_nonempty_batch("u", u)
        if tuple(u.shape[1:]) != (self.in_caps, self.in_dim):
            raise ValueError(f"u must have shape {shape}, got {tuple(u.shape)}")
        return torch.einsum("ijdk,bik->bijd", self.W, u)  # (B, I, J, D_out)

    def forward(self, u: torch.Tensor,
                num_iterations: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        r"""Return output capsules ``v`` (B, J, D_out) and coupling coefficients ``c`` (B, I, J)."""
        u_hat = self.predict(u)  # (B, I, J, D_out)
        iterations = self.num_iterations if num_iterations is None else num_iterations
        return dynamic_routing_fast(u_hat, iterations, detach_inner=self.detach_inner)

    def extra_repr(self) -> str:
        return (f"in_caps={self.in_caps}, in_dim={self.in_dim}, out_caps={self.out_caps}, "
                f"out_dim={self.out_dim}, num_iterations={self.num_iterations}")
