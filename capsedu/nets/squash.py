r"""The squashing non-linearity (Sabour et al. 2017, Eq. 1).

Shapes: any tensor ``s`` whose dimension ``dim`` holds capsule vectors, e.g. (B, J, D).

.. math::

    \mathbf v_j = \frac{\lVert\mathbf s_j\rVert^2}{1 + \lVert\mathbf s_j\rVert^2}
                  \frac{\mathbf s_j}{\lVert\mathbf s_j\rVert}

Short vectors shrink to almost zero length and long vectors to just below 1, so a capsule's
length can be read as the probability that the entity it represents is present, while its
direction (the pose) is kept.

Shape legend: none (no tensor shapes of its own).
"""

from __future__ import annotations

import torch

from capsedu._validate import require_capsule_vectors


def squash(s: torch.Tensor, dim: int = -1, eps: float = 1e-8) -> torch.Tensor:
    r"""Squash capsule vectors along ``dim`` (Eq. 1).

    ``eps`` sits inside the square root: ``||s|| = sqrt(sum(s**2) + eps)``. Without it the
    gradient of ``||s||`` at the zero vector is 0/0 = NaN; with it both the value (0) and the
    gradient stay finite.

    Only cheap checks run here (type, a ``dim`` in range, ``eps > 0``), so the networks call this
    very function in their inner loops; values are not scanned for NaN or inf - a network checks
    its images once where they enter (:meth:`capsedu.CapsNet.encode`), and a NaN in ``s`` gives
    NaN out.

    Args:
        s: total capsule inputs, e.g. (B, J, D).
        dim: the dimension that holds each capsule's vector.
        eps: small positive constant for numerical safety.

    Returns:
        A tensor of the same shape whose vectors have length in [0, 1).

    Raises:
        TypeError: for an ``s`` that is not a floating-point tensor.
        ValueError: for a scalar ``s``, a ``dim`` out of range or ``eps <= 0``.
    """
    require_capsule_vectors("s", s, dim, eps)
    squared_norm = (s * s).sum(dim=dim, keepdim=True)  # (..., 1, ...)
    scale = squared_norm / (1.0 + squared_norm) / torch.sqrt(squared_norm + eps)
    return scale * s
