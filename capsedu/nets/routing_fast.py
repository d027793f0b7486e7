r"""The fast path of ``DigitCaps``: prediction vectors (Eq. 2) and Procedure 1 without ever
materialising :math:`\hat{\mathbf u}`.

:func:`capsedu.dynamic_routing` is the version to read; :func:`factored_routing` computes the
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
D_out (16), they are laid out (J, B, D_in, I) - the input capsule index innermost, so that the
products with ``c`` and the sums over D_in run along I (288-1,152 contiguous numbers) rather
than along D_in = 8 (measured: about 25 % faster than the (J, B, I, D_in) layout) - and they
reuse one buffer, so the step moves about half the memory. The backward
(``detach_inner=True``, gradients through the last iteration only, with its ``c`` held fixed)
is written by hand for the same reason: :math:`\partial\mathbf W_j = \mathbf x_j^\top\,\partial
\mathbf s_j` and :math:`\partial\mathbf u_i = \sum_j c_{ij}\,\mathbf W_{ij}^\top\partial\mathbf
s_j`, never forming :math:`\partial\hat{\mathbf u}`; the second one is written into ``x``'s
memory once the first has used it (a second backward through the same graph then raises
PyTorch's "modified by an inplace operation" error instead of reading it). Measured by
``benchmarks/speed.py``: 2-3x the einsum formulation at the paper's size. For
``detach_inner=False`` (gradients through every iteration, as the paper's code) ``DigitCaps``
runs the readable :func:`capsedu.dynamic_routing` on :math:`\hat{\mathbf u}` instead.

Shape legend:
    B      batch size
    I      input capsules, J output capsules
    D_in   input capsule dimension (K in the code), D_out output capsule dimension (D)
"""

from __future__ import annotations

import torch

from capsedu.nets.squash import squash_unchecked


def _route(W_k: torch.Tensor, u_t: torch.Tensor, r: int) -> tuple[torch.Tensor, ...]:
    r"""Procedure 1 from ``W_k`` (J, K*I, D) and ``u_t`` (B, K, I): ``c`` (J, B, I), ``s``, last ``x``."""
    B, K, I = u_t.shape
    J, _, D = W_k.shape
    s = torch.matmul(u_t.reshape(B, K * I), W_k).transpose(0, 1) / J  # (B, J, D), c = 1/J
    c = u_t.new_full((J, B, I), 1.0 / J)  # (J, B, I)
    x = None
    if r > 1:
        buffer = u_t.new_empty(J, B, K, I)  # W_j^T V_j, then x = c * u: reused every iteration
        V = u_t.new_zeros(J, B, D)  # (J, B, D) running sum of the outputs v
    for _ in range(1, r):
        V += squash_unchecked(s).transpose(0, 1)  # (J, B, D)  Eq. 1
        torch.bmm(V, W_k.transpose(1, 2), out=buffer.view(J, B, K * I))  # (J, B, K*I)  W_j^T V_j
        b = buffer.mul_(u_t).sum(dim=2)  # (J, B, I)  u_hat . V
        c = torch.softmax(b, dim=0)  # (J, B, I)  over the output capsules
        x = torch.mul(c.unsqueeze(2), u_t, out=buffer).view(J, B, K * I)  # (J, B, K*I)
        s = torch.bmm(x, W_k).transpose(0, 1)  # (B, J, D)  Eq. 2
    if x is None:
        x = (c.unsqueeze(2) * u_t).view(J, B, K * I)  # (J, B, K*I)
    return c, s, x


class _FactoredRouting(torch.autograd.Function):
    r"""``(W, u) -> (v, c)`` with the ``detach_inner=True`` gradient, written by hand."""

    @staticmethod
    def forward(ctx, W: torch.Tensor, u: torch.Tensor, r: int) -> tuple[torch.Tensor, torch.Tensor]:
        I, J, D, K = W.shape
        W_k = W.permute(1, 3, 0, 2).reshape(J, K * I, D)  # (J, K*I, D), a view of DigitCaps.W
        c, s, x = _route(W_k, u.transpose(1, 2).contiguous(), r)  # u_t: (B, K, I)
        ctx.save_for_backward(W_k, c, s, x)
        return squash_unchecked(s), c.permute(1, 2, 0)  # (B, J, D), (B, I, J)

    @staticmethod
    def backward(ctx, dv: torch.Tensor, dc: torch.Tensor) -> tuple:
        W_k, c, s, x = ctx.saved_tensors  # c carries no gradient: it came from detached logits
        J, B, I = c.shape
        K, D = W_k.shape[1] // I, W_k.shape[2]
        with torch.enable_grad():
            s_ = s.detach().requires_grad_()
            (ds,) = torch.autograd.grad(squash_unchecked(s_), s_, dv)  # (B, J, D)
        ds_j = ds.transpose(0, 1)  # (J, B, D)
        dW = torch.bmm(x.transpose(1, 2), ds_j).view(J, K, I, D).permute(2, 0, 3, 1)  # (I, J, D, K)
        # dW has DigitCaps.W's memory order, so autograd keeps it as W.grad without a copy
        z = torch.bmm(ds_j, W_k.transpose(1, 2), out=x).view(J, B, K, I)  # (J, B, K, I) W^T ds
        du = z.mul_(c.unsqueeze(2)).sum(dim=0).transpose(1, 2)  # (B, I, K)
        return dW, du, None


def factored_routing(W: torch.Tensor, u: torch.Tensor,
                      routing_iterations: int = 3) -> tuple[torch.Tensor, torch.Tensor]:
    r""":math:`\hat{\mathbf u}_{j|i} = \mathbf W_{ij}\mathbf u_i` (Eq. 2) routed by Procedure 1.

    Args:
        W: transformation matrices, (I, J, D_out, D_in).
        u: input capsules, (B, I, D_in); shapes are checked by the caller (``DigitCaps``).
        routing_iterations: routing iterations r >= 1.

    Returns:
        ``(v, c)``: output capsules (B, J, D_out) and the couplings of the last iteration (B, I, J),
        equal in values and gradients to ``dynamic_routing(einsum("ijdk,bik->bijd", W, u),
        routing_iterations, detach_inner=True)``.
    """
    return _FactoredRouting.apply(W, u, routing_iterations)
