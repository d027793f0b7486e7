r"""Dynamic routing by agreement (Sabour et al. 2017, Procedure 1, Eqs. 2-3) and ``DigitCaps``.

Everything lesson 03 builds lives here: the readable :func:`dynamic_routing` that the lessons
teach, the fast formulation the network runs (tested equal to it, values and gradients), and
the fully connected capsule layer :class:`DigitCaps` (prediction vectors, Eq. 2, then routing).

Shape legend:
    B      batch size
    I      number of input (lower-level) capsules, e.g. 1152 primary capsules
    J      number of output (higher-level) capsules, e.g. 10 digit capsules
    D      output capsule dimension (D_out), e.g. 16
    D_in   input capsule dimension, e.g. 8

Symbols follow the paper: ``u_hat`` are the prediction vectors :math:`\hat{\mathbf u}_{j|i}`,
``b`` the routing logits, ``c`` the coupling coefficients (softmax of ``b`` over the *output*
capsules J), ``s`` the weighted sums and ``v`` the squashed output capsules.
"""

from __future__ import annotations

import torch
from torch import nn

from capsedu._validate import require_finite, require_int, require_nonempty_batch, require_tensor
from capsedu.nets.squash import squash, squash_unchecked


def dynamic_routing(u_hat: torch.Tensor, num_iterations: int = 3,
                    detach_inner: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Route prediction vectors ``u_hat`` to output capsules (Procedure 1).

    For ``r`` iterations:

    .. math::

        c_{ij} = \operatorname{softmax}_j(b_{ij}), \quad
        \mathbf s_j = \sum_i c_{ij}\hat{\mathbf u}_{j|i} \; (\text{Eq. 2}), \quad
        \mathbf v_j = \operatorname{squash}(\mathbf s_j) \; (\text{Eq. 1}), \quad
        b_{ij} \leftarrow b_{ij} + \hat{\mathbf u}_{j|i}\cdot\mathbf v_j .

    Args:
        u_hat: prediction vectors, (B, I, J, D).
        num_iterations: routing iterations r >= 1 (the paper uses 3).
        detach_inner: if True, every iteration but the last sees ``u_hat.detach()``, so gradients
            reach ``u_hat`` only through the last iteration (as most open-source CapsNets do);
            if False, gradients flow through all iterations (as the paper's code does).

    Returns:
        ``(v, c)``: output capsules (B, J, D) and the coupling coefficients (B, I, J) used in
        the last iteration (they sum to 1 over J).
    """
    require_tensor("u_hat", u_hat, ndim=4, shape="(B, I, J, D)", floating=True)
    require_nonempty_batch("u_hat", u_hat)
    require_finite("u_hat", u_hat)
    require_int("num_iterations", num_iterations, minimum=1)
    u_hat_inner = u_hat.detach() if detach_inner else u_hat
    b = torch.zeros(u_hat.shape[:3], dtype=u_hat.dtype, device=u_hat.device)  # (B, I, J)
    for iteration in range(num_iterations):
        last = iteration == num_iterations - 1
        u = u_hat if last else u_hat_inner  # (B, I, J, D)
        c = torch.softmax(b, dim=2)  # (B, I, J): each input capsule shares itself among the J outputs
        s = (c.unsqueeze(-1) * u).sum(dim=1)  # (B, J, D)  Eq. 2
        v = squash(s, dim=-1)  # (B, J, D)  Eq. 1
        if not last:
            b = b + (u * v.unsqueeze(1)).sum(dim=-1)  # (B, I, J)  agreement u_hat . v
    return v, c


def dynamic_routing_fast(u_hat: torch.Tensor, num_iterations: int = 3,
                         detach_inner: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Same result as :func:`dynamic_routing` (Procedure 1, Eqs. 1-3), with batched matmuls.

    ``dynamic_routing`` is the version to read; this one is what ``DigitCaps`` runs. Both sums
    over a capsule axis become one ``torch.bmm`` each, so no (B, I, J, D) product is ever
    materialised:

    * Eq. 2, :math:`\mathbf s_j = \sum_i c_{ij}\hat{\mathbf u}_{j|i}`: ``c^T`` (B, J, I) times
      ``u_hat`` seen as (B, I, J*D) gives every ``sum_i c_ij u_hat_{k|i}`` (B, J, J, D); the
      wanted ``s_j`` are its diagonal blocks ``k = j``.
    * agreement :math:`\hat{\mathbf u}_{j|i}\cdot\mathbf v_j`: ``u_hat`` (B, I, J*D) times the
      block-diagonal (B, J*D, J) matrix whose column ``j`` holds ``v_j`` in rows ``j*D:(j+1)*D``.

    The J-fold redundant multiply-adds are cheap next to reading ``u_hat`` from memory.
    It checks shapes only: the network checks its input for NaN/inf once, where it enters.

    Args and returns: as :func:`dynamic_routing`.
    """
    require_tensor("u_hat", u_hat, ndim=4, shape="(B, I, J, D)", floating=True)
    require_nonempty_batch("u_hat", u_hat)
    require_int("num_iterations", num_iterations, minimum=1)
    batch, num_in, num_out, dim = u_hat.shape
    u_flat = u_hat.reshape(batch, num_in, num_out * dim)  # (B, I, J*D)
    u_inner = u_flat.detach() if detach_inner else u_flat
    eye = torch.eye(num_out, dtype=u_hat.dtype, device=u_hat.device)  # (J, J)
    b = u_hat.new_zeros(batch, num_in, num_out)  # (B, I, J)
    for iteration in range(num_iterations):
        last = iteration == num_iterations - 1
        u = u_flat if last else u_inner  # (B, I, J*D)
        c = torch.softmax(b, dim=2)  # (B, I, J)
        s_all = torch.bmm(c.transpose(1, 2), u).view(batch, num_out, num_out, dim)  # (B, J, J, D)
        s = s_all.diagonal(dim1=1, dim2=2).transpose(1, 2)  # (B, J, D)  Eq. 2
        v = squash_unchecked(s, dim=-1)  # (B, J, D)  Eq. 1
        if not last:
            v_blocks = (v.unsqueeze(-1) * eye.unsqueeze(1)).view(batch, num_out * dim, num_out)
            b = b + torch.bmm(u, v_blocks)  # (B, I, J)  agreement u_hat . v
    return v, c


class DigitCaps(nn.Module):
    r"""Fully connected capsule layer: prediction vectors (Eq. 2) then dynamic routing.

    ``W`` has shape (I, J, D_out, D_in) and :math:`\hat{\mathbf u}_{j|i} = \mathbf W_{ij}\mathbf u_i`;
    it is initialised with a normal distribution of standard deviation 0.01. Routing runs
    :func:`dynamic_routing_fast`, tested equal (values and gradients) to :func:`dynamic_routing`.
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

    def _check_input(self, u: torch.Tensor) -> None:
        shape = f"(B, {self.in_caps}, {self.in_dim})"
        require_tensor("u", u, ndim=3, shape=shape, floating=True)
        require_nonempty_batch("u", u)
        if tuple(u.shape[1:]) != (self.in_caps, self.in_dim):
            raise ValueError(f"u must have shape {shape}, got {tuple(u.shape)}")

    def predict(self, u: torch.Tensor) -> torch.Tensor:
        r"""Prediction vectors :math:`\hat{\mathbf u}_{j|i} = \mathbf W_{ij}\mathbf u_i`, (B, I, J, D_out)."""
        self._check_input(u)
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
