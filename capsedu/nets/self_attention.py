r"""Self-attention routing and its squash (Mazzia, Salvetti & Chiaberge 2021, Efficient-CapsNet).

Efficient-CapsNet replaces Procedure 1's iterations with one pass. For every output capsule j
the predictions :math:`\hat{\mathbf u}_{j|i}` of all input capsules are compared *with each
other* (a self-attention matrix), each prediction's total agreement becomes a logit, a softmax
over the output capsules turns the logits into coupling coefficients, and the weighted sum, with
a learned prior added to the couplings, is squashed by a new squash:

.. math::

    A_{j,ik} = \frac{\hat{\mathbf u}_{j|i}\cdot\hat{\mathbf u}_{j|k}}{\sqrt{D}}, \quad
    c_{ij} = \operatorname{softmax}_j\Big(\sum_k A_{j,ik}\Big), \quad
    \mathbf s_j = \sum_i (c_{ij} + b_{ij})\,\hat{\mathbf u}_{j|i}, \quad
    \mathbf v_j = \Big(1 - \frac{1}{e^{\lVert\mathbf s_j\rVert}}\Big)
                  \frac{\mathbf s_j}{\lVert\mathbf s_j\rVert}.

(The paper's symbols, written per output capsule; we do not quote its equation numbers. The
softmax axis and the prior added *after* it follow the paper and the authors' code,
``softmax(axis=1)`` over the output capsules, then ``c + b``. In code the prior
:math:`b_{ij}` is ``prior``: ``b`` names Procedure 1's routing logits everywhere else, and this
one is added to coupling coefficients, not to logits.)

Because :math:`\sum_k A_{j,ik} = \hat{\mathbf u}_{j|i}\cdot\sum_k\hat{\mathbf u}_{j|k}/\sqrt D`,
the I x I matrix never has to be built: the logit of a prediction is its agreement with the
*sum of all predictions* for that output - which is what the first iteration of Procedure 1
measures too, against the squashed uniform average instead of the sum.

Shape legend:
    B      batch size
    I      input (primary) capsules, 16 in Efficient-CapsNet
    J      output capsules, one per class (10)
    D      output capsule dimension (16)
"""

from __future__ import annotations

import math

import torch

from capsedu._validate import require_capsule_vectors, require_nonempty_batch, require_tensor


def efficient_squash(s: torch.Tensor, dim: int = -1, eps: float = 1e-8) -> torch.Tensor:
    r"""Efficient-CapsNet's squash: :math:`(1 - e^{-\lVert s\rVert})\, s / \lVert s\rVert`.

    Like Eq. 1 of Sabour et al. it keeps the direction and maps the length into [0, 1), but it
    rises linearly near 0 (slope 1, where Eq. 1 is flat, slope 0) and saturates exponentially.
    ``eps`` sits inside the square root, so the zero vector gives value 0 and a finite gradient.
    Cheap checks only, as :func:`capsedu.squash`: values are not scanned for NaN or inf.

    Raises:
        TypeError: for an ``s`` that is not a floating-point tensor.
        ValueError: for a scalar ``s``, a ``dim`` out of range or ``eps <= 0``.
    """
    require_capsule_vectors("s", s, dim, eps)
    norm = torch.sqrt((s * s).sum(dim=dim, keepdim=True) + eps)  # (..., 1, ...)
    return (1.0 - torch.exp(-norm)) / norm * s


def attention_logits(u_hat: torch.Tensor) -> torch.Tensor:
    r"""Each prediction's summed agreement :math:`\sum_k A_{j,ik}`, (B, I, J).

    Computed as the agreement with the sum of the predictions, without the (B, J, I, I) matrix.
    """
    total = u_hat.sum(dim=1, keepdim=True)  # (B, 1, J, D)
    return (u_hat * total).sum(dim=-1) / math.sqrt(u_hat.shape[-1])  # (B, I, J)


def self_attention_routing(u_hat: torch.Tensor, prior: torch.Tensor | None = None,
                           ) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Route prediction vectors in one pass by self-attention (no iterations).

    Args:
        u_hat: prediction vectors :math:`\hat{\mathbf u}_{j|i}`, (B, I, J, D).
        prior: the learned priors :math:`b_{ij}`, (I, J), added to the coupling coefficients;
            None for zeros.

    Returns:
        ``(v, c)``: output capsules (B, J, D) with lengths in [0, 1), and the coupling
        coefficients (B, I, J) - a softmax over the output capsules J, so each input capsule's
        couplings sum to 1, as in Procedure 1 (the priors are not part of them).

    Shapes and types are checked; values are not scanned for NaN or inf (a network checks its
    images where they enter).
    """
    require_tensor("u_hat", u_hat, ndim=4, shape="(B, I, J, D)", floating=True)
    require_nonempty_batch("u_hat", u_hat)
    if prior is not None:
        shape = f"(I, J) = {tuple(u_hat.shape[1:3])}"
        require_tensor("prior", prior, ndim=2, shape=shape, floating=True)
        if tuple(prior.shape) != tuple(u_hat.shape[1:3]):
            raise ValueError(f"prior must have shape {shape}, got {tuple(prior.shape)}")
    c = torch.softmax(attention_logits(u_hat), dim=2)  # (B, I, J) normalised over the outputs J
    weights = c if prior is None else c + prior  # (B, I, J)
    s = torch.einsum("bij,bijd->bjd", weights, u_hat)  # (B, J, D)
    return efficient_squash(s), c  # (B, J, D), (B, I, J)
