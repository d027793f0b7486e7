r"""The fast path of ``DigitCaps``: prediction vectors (Eq. 2) and Procedure 1 without ever
materialising :math:`\hat{\mathbf u}`.

:func:`capsedu.dynamic_routing` is the version to read; :func:`predict_and_route` computes the
same ``v`` and ``c`` from ``W`` and ``u`` (tested equal in values and gradients), because every
quantity Procedure 1 needs factors through :math:`\hat{\mathbf u}_{j|i} = \mathbf W_{ij}\mathbf u_i`:

* Eq. 2, :math:`\mathbf s_j = \sum_i c_{ij}\,\mathbf W_{ij}\mathbf u_i`: scale each ``u_i`` by
  ``c_ij`` (x, (J, B, I*D_in)), then one matrix product per output capsule with ``W_j``
  (I*D_in, D_out) - a long, well-shaped GEMM instead of J-fold redundant sums;
* the logits :math:`b_{ij} = \sum_{t} \hat{\mathbf u}_{j|i}\cdot\mathbf v_j^{(t)}
  = \mathbf u_i\cdot\mathbf W_{ij}^\top \mathbf V_j` with :math:`\mathbf V_j` the running sum of
  the outputs (the agreement is linear in ``v``): one GEMM, ``W_j^T V_j`` (J, B, I*D_in), and
  a product with ``u``;
* in iteration 1, :math:`c_{ij} = 1/J`, so :math:`\mathbf s` is one GEMM of ``u`` with all of W.

The big intermediates have D_in (8) numbers per (j, b, i) where :math:`\hat{\mathbf u}` has
D_out (16), and they reuse one buffer, so the step moves about half the memory. The backward
(``detach_inner=True``, gradients through the last iteration only, with its ``c`` held fixed)
is written by hand for the same reason: :math:`\partial\mathbf W_j = \mathbf x_j^\top\,\partial
\mathbf s_j` and :math:`\partial\mathbf u_i = \sum_j c_{ij}\,\mathbf W_{ij}^\top\partial\mathbf
s_j`, never forming :math:`\partial\hat{\mathbf u}`. Measured by ``benchmarks/speed.py``: 2-3x
the einsum formulation at the paper's size. For ``detach_inner=False`` (gradients through every
iteration, as the paper's code) ``DigitCaps`` runs the readable :func:`capsedu.dynamic_routing`
on :math:`\hat{\mathbf u}` instead.

Shape legend:
    B      batch size
    I      input capsules, J output capsules
    D_in   input capsule dimension (K in the code), D_out output capsule dimension (D)
"""

from __future__ import annotations

import torch

from capsedu.nets.squash import squash_unchecked


def _route(W_j: torch.Tensor, u: torch.Tensor, r: int) -> tuple[torch.Tensor, ...]:
    r"""Procedure 1 from ``W_j`` (J, I*K, D) and ``u`` (B, I, K): ``c`` (J, B, I), ``s``, last ``x``."""
    B, I, K = u.shape
    J, _, D = W_j.shape
    u_flat = u.reshape(B, I * K)  # (B, I*K)
    s = (u_flat @ W_j.transpose(0, 1).reshape(I * K, J * D)).view(B, J, D) / J  # (B, J, D), c = 1/J
    c = u.new_full((J, B, I), 1.0 / J)  # (J, B, I)
    x = None
    if r > 1:
        buffer = u.new_empty(J, B, I, K)  # W_j^T V_j, then x = c * u: reused every iteration
        V = u.new_zeros(J, B, D)  # (J, B, D) running sum of the outputs v
    for _ in range(1, r):
        V += squash_unchecked(s).transpose(0, 1)  # (J, B, D)  Eq. 1
        torch.bmm(V, W_j.transpose(1, 2), out=buffer.view(J, B, I * K))  # (J, B, I*K)  W_j^T V_j
        b = torch.einsum("jbik,bik->jbi", buffer, u)  # (J, B, I)  u_hat . V
        c = torch.softmax(b, dim=0)  # (J, B, I)  over the output capsules
        x = torch.mul(c.unsqueeze(-1), u, out=buffer).view(J, B, I * K)  # (J, B, I*K)
        s = torch.bmm(x, W_j).transpose(0, 1)  # (B, J, D)  Eq. 2
    if x is None:
        x = (c.unsqueeze(-1) * u).view(J, B, I * K)  # (J, B, I*K)
    return c, s, x


class _FactoredRouting(torch.autograd.Function):
    r"""``(W, u) -> (v, c)`` with the ``detach_inner=True`` gradient, written by hand."""

    @staticmethod
    def forward(ctx, W: torch.Tensor, u: torch.Tensor, r: int) -> tuple[torch.Tensor, torch.Tensor]:
        I, J, D, K = W.shape
        W_j = W.permute(1, 0, 3, 2).reshape(J, I * K, D)  # (J, I*K, D)
        c, s, x = _route(W_j, u, r)
        ctx.save_for_backward(W_j, u, c, s, x)
        return squash_unchecked(s), c.permute(1, 2, 0)  # (B, J, D), (B, I, J)

    @staticmethod
    def backward(ctx, dv: torch.Tensor, dc: torch.Tensor) -> tuple:
        W_j, u, c, s, x = ctx.saved_tensors  # c carries no gradient: it came from detached logits
        J, IK, D = W_j.shape
        B, I, K = u.shape
        with torch.enable_grad():
            s_ = s.detach().requires_grad_()
            (ds,) = torch.autograd.grad(squash_unchecked(s_), s_, dv)  # (B, J, D)
        ds_j = ds.transpose(0, 1)  # (J, B, D)
        dW = torch.bmm(x.transpose(1, 2), ds_j).view(J, I, K, D).permute(1, 0, 3, 2)  # (I, J, D, K)
        z = torch.bmm(ds_j, W_j.transpose(1, 2)).view(J, B, I, K)  # (J, B, I, K)  W^T ds
        du = z.mul_(c.unsqueeze(-1)).sum(dim=0)  # (B, I, K)
        return dW, du, None


def predict_and_route(W: torch.Tensor, u: torch.Tensor,
                      num_iterations: int = 3) -> tuple[torch.Tensor, torch.Tensor]:
    r""":math:`\hat{\mathbf u}_{j|i} = \mathbf W_{ij}\mathbf u_i` (Eq. 2) routed by Procedure 1.

    Args:
        W: transformation matrices, (I, J, D_out, D_in).
        u: input capsules, (B, I, D_in); shapes are checked by the caller (``DigitCaps``).
        num_iterations: routing iterations r >= 1.

    Returns:
        ``(v, c)``: output capsules (B, J, D_out) and the couplings of the last iteration (B, I, J),
        equal in values and gradients to ``dynamic_routing(einsum("ijdk,bik->bijd", W, u),
        num_iterations, detach_inner=True)``.
    """
    return _FactoredRouting.apply(W, u, num_iterations)
