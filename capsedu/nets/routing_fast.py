r"""The factored implementation of ``DigitCaps``: prediction vectors (Eq. 2) and Procedure 1
without ever materialising :math:`\hat{\mathbf u}`.

:func:`capsedu.dynamic_routing` is the version to read (``CapsNetConfig(routing="readable")``
trains with it); :func:`factored_routing` computes the same ``v`` and ``c`` from ``W`` and ``u``
(tested equal in values and gradients, for both settings of ``detach_inner``), because every
quantity Procedure 1 needs factors through :math:`\hat{\mathbf u}_{j|i} = \mathbf W_{ij}\mathbf u_i`:

* Eq. 2, :math:`\mathbf s_j = \sum_i c_{ij}\,\mathbf W_{ij}\mathbf u_i`: scale each ``u_i`` by
  ``c_ij`` (x, (J, B, I*D_in)), then one matrix product per output capsule with ``W_j``
  (I*D_in, D_out) - a long, well-shaped GEMM instead of J-fold redundant sums;
* the logits :math:`b_{ij} = \sum_{t} \hat{\mathbf u}_{j|i}\cdot\mathbf v_j^{(t)}
  = \mathbf u_i\cdot\mathbf W_{ij}^\top \sum_t\mathbf v_j^{(t)}`, with the running sum of
  the outputs ``v_sum`` (the agreement is linear in ``v``): one GEMM, ``W_j^T v_sum_j``
  (J, B, I*D_in), and a product with ``u``;
* in iteration 1, :math:`c_{ij} = 1/J`, so :math:`\mathbf s` is one GEMM of ``u`` with all of W.

The big intermediates have D_in (8) numbers per (j, b, i) where :math:`\hat{\mathbf u}` has
D_out (16), they are laid out (J, B, D_in, I) - the input capsule index innermost, so that the
products with ``c`` and the sums over D_in run along I (288-1,152 contiguous numbers) rather
than along D_in = 8 (measured: about 25 % faster than the (J, B, I, D_in) layout). ``W`` itself
stays in the layout the lessons draw, (I, J, D_out, D_in); each step copies it once into the
GEMMs' layout (J, D_in*I, D_out).

With ``detach_inner=True`` (gradients through the last iteration only, with its ``c`` held
fixed) the intermediates reuse one buffer, so the step moves about half the memory, and the
backward is written by hand for the same reason: :math:`\partial\mathbf W_j = \mathbf
x_j^\top\,\partial \mathbf s_j` and :math:`\partial\mathbf u_i = \sum_j c_{ij}\,\mathbf
W_{ij}^\top\partial\mathbf s_j`, never forming :math:`\partial\hat{\mathbf u}`; the second one is
written into ``x``'s memory once the first has used it (a second backward through the same graph
then raises PyTorch's "modified by an inplace operation" error instead of reading it). Measured
by ``benchmarks/speed.py``: 2-3x the einsum formulation at the paper's size. With
``detach_inner=False`` (gradients through every iteration, as the paper's code) the same
factored formulation is written with plain out-of-place operations and autograd differentiates it.

The couplings and logits are computed output-capsule first: ``c_t`` and ``b_t`` are (J, B, I),
the transposes of :func:`capsedu.dynamic_routing`'s ``c`` and ``b`` (B, I, J); the couplings
returned are ``c`` (B, I, J).

Shape legend:
    B      batch size
    I      input capsules
    J      output capsules
    D_in   input capsule dimension
    D_out  output capsule dimension
"""

from __future__ import annotations

import torch

from capsedu.nets.squash import squash


def _gemm_weights(W: torch.Tensor) -> torch.Tensor:
    r"""``W`` (I, J, D_out, D_in) in the GEMMs' layout (J, D_in*I, D_out): row ``k*I + i`` of
    ``W_j`` is ``W_ij[:, k]``."""
    I, J, D_out, D_in = W.shape
    return W.permute(1, 3, 0, 2).reshape(J, D_in * I, D_out)  # (J, D_in*I, D_out): one copy of W


def _route(W_k: torch.Tensor, u_t: torch.Tensor, r: int,
           reuse: bool = True) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    r"""Procedure 1 from ``W_k`` (J, D_in*I, D_out) and ``u_t`` (B, D_in, I): ``c_t`` (J, B, I),
    ``s`` (B, J, D_out) and the last ``x`` (J, B, D_in*I).

    ``reuse=True`` (for the hand-written backward, which needs only the last iteration) writes
    the big intermediates into one buffer, in place; ``reuse=False`` computes them out of place,
    so that autograd can differentiate every iteration (``detach_inner=False``).
    """
    B, D_in, I = u_t.shape
    J, _, D_out = W_k.shape
    s = torch.matmul(u_t.reshape(B, D_in * I), W_k).transpose(0, 1) / J  # (B, J, D_out), c_t = 1/J
    c_t = u_t.new_full((J, B, I), 1.0 / J)  # (J, B, I)
    buffer = u_t.new_empty(J, B, D_in, I) if reuse and r > 1 else None  # W_j^T v_sum_j, then x
    v_sum = u_t.new_zeros(J, B, D_out)  # (J, B, D_out) running sum of the outputs v
    for _ in range(1, r):
        v_sum = v_sum + squash(s).transpose(0, 1)  # (J, B, D_out)  Eq. 1
        out = None if buffer is None else buffer.view(J, B, D_in * I)
        agreement = torch.bmm(v_sum, W_k.transpose(1, 2), out=out).view(J, B, D_in, I)  # W_j^T v_sum_j
        b_t = (agreement.mul_(u_t) if reuse else agreement * u_t).sum(dim=2)  # (J, B, I)  u_hat . v_sum
        c_t = torch.softmax(b_t, dim=0)  # (J, B, I)  over the output capsules
        x = torch.mul(c_t.unsqueeze(2), u_t, out=buffer).view(J, B, D_in * I)  # (J, B, D_in*I)
        s = torch.bmm(x, W_k).transpose(0, 1)  # (B, J, D_out)  Eq. 2
    if r == 1:
        x = (c_t.unsqueeze(2) * u_t).view(J, B, D_in * I)  # (J, B, D_in*I)
    return c_t, s, x


class _FactoredRouting(torch.autograd.Function):
    r"""``(W, u) -> (v, c)`` with the ``detach_inner=True`` gradient, written by hand."""

    @staticmethod
    def forward(ctx, W: torch.Tensor, u: torch.Tensor, r: int) -> tuple[torch.Tensor, torch.Tensor]:
        W_k = _gemm_weights(W)  # (J, D_in*I, D_out)
        c_t, s, x = _route(W_k, u.transpose(1, 2).contiguous(), r)  # u_t: (B, D_in, I)
        ctx.save_for_backward(W_k, c_t, s, x)
        return squash(s), c_t.permute(1, 2, 0)  # (B, J, D_out), (B, I, J)

    @staticmethod
    def backward(ctx, dv: torch.Tensor, dc: torch.Tensor) -> tuple:
        W_k, c_t, s, x = ctx.saved_tensors  # c_t carries no gradient: it came from detached logits
        J, B, I = c_t.shape
        D_in, D_out = W_k.shape[1] // I, W_k.shape[2]
        with torch.enable_grad():
            s_ = s.detach().requires_grad_()
            (ds,) = torch.autograd.grad(squash(s_), s_, dv)  # (B, J, D_out)
        ds_j = ds.transpose(0, 1)  # (J, B, D_out)
        dW = torch.bmm(x.transpose(1, 2), ds_j).view(J, D_in, I, D_out)  # (J, D_in, I, D_out)
        dW = dW.permute(2, 0, 3, 1).contiguous()  # (I, J, D_out, D_in): W's own layout
        z = torch.bmm(ds_j, W_k.transpose(1, 2), out=x).view(J, B, D_in, I)  # (J, B, D_in, I) W^T ds
        du = z.mul_(c_t.unsqueeze(2)).sum(dim=0).transpose(1, 2)  # (B, I, D_in)
        return dW, du, None


def factored_routing(W: torch.Tensor, u: torch.Tensor, routing_iterations: int = 3,
                     detach_inner: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    r""":math:`\hat{\mathbf u}_{j|i} = \mathbf W_{ij}\mathbf u_i` (Eq. 2) routed by Procedure 1.

    Args:
        W: transformation matrices, (I, J, D_out, D_in).
        u: input capsules, (B, I, D_in); shapes are checked by the caller (``DigitCaps``).
        routing_iterations: routing iterations r >= 1.
        detach_inner: as in :func:`capsedu.dynamic_routing`: True, gradients through the last
            iteration only (a hand-written backward); False, through every iteration (autograd).

    Returns:
        ``(v, c)``: output capsules (B, J, D_out) and the couplings of the last iteration (B, I, J),
        equal in values and gradients to ``dynamic_routing(einsum("ijdk,bik->bijd", W, u),
        routing_iterations, detach_inner)``.
    """
    if detach_inner:
        return _FactoredRouting.apply(W, u, routing_iterations)
    c_t, s, _ = _route(_gemm_weights(W), u.transpose(1, 2).contiguous(), routing_iterations,
                       reuse=False)  # autograd differentiates every iteration
    return squash(s), c_t.permute(1, 2, 0)  # (B, J, D_out), (B, I, J)
