r"""Primary capsules: a convolution whose channels are read as capsule vectors (lesson 02).

Shape legend:
    B      batch size
    C, H, W   channels, height, width of a feature map
    T      primary capsule types (the paper's 32 channels of 8-D capsules)
    I      primary capsules = T * H' * W' (1152 = 32 * 6 * 6 in the paper)
    D_in   primary capsule dimension (8)
"""

from __future__ import annotations

import torch
from torch import nn

from capsedu._validate import require_int, require_nonempty_batch, require_tensor
from capsedu.nets.squash import squash


class PrimaryCaps(nn.Module):
    r"""A convolution whose output channels are grouped into ``num_types`` capsule types.

    (B, C, H, W) -> conv -> (B, T*D_in, H', W') -> (B, T*H'*W', D_in), squashed (Eq. 1).

    The channels of each capsule type are contiguous (channel ``t*D_in + d`` is dimension ``d``
    of type ``t``), and capsules are ordered type-major: index ``i = t*H'*W' + y*W' + x``.
    Shapes are checked here; NaN/inf are checked once by the network that owns the layer.
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
        features = self.conv(x)  # (B, T*D_in, H', W')
        batch, _, height, width = features.shape
        u = features.view(batch, self.num_types, self.caps_dim, height, width)  # (B, T, D_in, H', W')
        u = u.permute(0, 1, 3, 4, 2)  # (B, T, H', W', D_in): the capsule vector last
        u = u.reshape(batch, self.num_types * height * width, self.caps_dim)  # (B, I, D_in)
        return squash(u.float(), dim=-1)  # (B, I, D_in), squashed in float32

    def extra_repr(self) -> str:
        return f"num_types={self.num_types}, caps_dim={self.caps_dim}"
