r"""Losses: the margin loss (Sabour et al. 2017, Eq. 4), the reconstruction loss (Section 4.1)
and the spread loss of matrix capsules (Hinton, Sabour & Frosst 2018, Section 3.1).

How much each counts in training - the reconstruction weight, the spread loss's margin schedule -
is the business of the objectives (:mod:`capsedu.training.objectives`); :data:`RECON_WEIGHT`
is the paper's value, their default.

Shape legend:
    B      batch size
    J      number of classes (digit capsules)
"""

from __future__ import annotations

import torch

from capsedu._validate import require_labels, require_nonempty_batch, require_tensor

RECON_WEIGHT = 0.0005  # the reconstruction loss's weight in the total loss (Section 4.1)


def _as_multi_hot(targets: object, batch: int, num_classes: int) -> torch.Tensor:
    r"""Class indices (B,) or multi-hot (B, J) targets -> float multi-hot T_k, (B, J)."""
    targets = require_tensor("targets", targets, shape="(B,) class indices or (B, J) multi-hot")
    if targets.dim() == 1:
        labels = require_labels("targets", targets, batch=batch, num_classes=num_classes)
        return torch.nn.functional.one_hot(labels.long(), num_classes).float()  # (B, J)
    if targets.dim() != 2 or tuple(targets.shape) != (batch, num_classes):
        raise ValueError(f"targets must be (B,) class indices or (B, J) = ({batch}, {num_classes}) "
                         f"multi-hot, got shape {tuple(targets.shape)}")
    multi_hot = targets.float()
    if not ((multi_hot == 0) | (multi_hot == 1)).all():
        raise ValueError("multi-hot targets must contain only 0 and 1")
    return multi_hot


def margin_loss(lengths: torch.Tensor, targets: torch.Tensor, m_pos: float = 0.9,
                m_neg: float = 0.1, lam: float = 0.5) -> torch.Tensor:
    r"""Margin loss (Eq. 4), summed over classes and averaged over the batch.

    .. math::

        L_k = T_k \max(0, m^+ - \lVert\mathbf v_k\rVert)^2
              + \lambda (1 - T_k) \max(0, \lVert\mathbf v_k\rVert - m^-)^2

    Args:
        lengths: capsule lengths :math:`\lVert\mathbf v_k\rVert`, (B, J).
        targets: class indices (B,) or multi-hot (B, J) for several digits per image.
        m_pos, m_neg: the margins m+ = 0.9 and m- = 0.1.
        lam: down-weighting of absent classes, lambda = 0.5.

    Shapes and targets are checked; ``lengths`` is not scanned for NaN or inf (a network checks
    its images where they enter, and :func:`capsedu.fit` stops when a loss is not finite).
    """
    require_tensor("lengths", lengths, ndim=2, shape="(B, J)", floating=True)
    require_nonempty_batch("lengths", lengths)
    batch, num_classes = lengths.shape
    present = _as_multi_hot(targets, batch, num_classes).to(lengths)  # (B, J)
    loss_present = present * torch.relu(m_pos - lengths) ** 2  # (B, J)
    loss_absent = lam * (1.0 - present) * torch.relu(lengths - m_neg) ** 2  # (B, J)
    return (loss_present + loss_absent).sum(dim=1).mean()


def reconstruction_loss(recon: torch.Tensor, images: torch.Tensor) -> torch.Tensor:
    r"""Sum of squared pixel errors per image, averaged over the batch.

    The paper scales it by :data:`RECON_WEIGHT` = 0.0005 in the total loss so that it does not
    dominate the margin loss.

    Args:
        recon: reconstructions, (B, 784) or (B, 1, 28, 28) - any shape with B first.
        images: target images with the same number of pixels per item, e.g. (B, 1, 28, 28).
    """
    require_tensor("recon", recon, floating=True)
    require_tensor("images", images, floating=True)
    require_nonempty_batch("images", images)
    batch = images.shape[0]
    if recon.dim() == 0 or recon.shape[0] != batch or recon[0].numel() != images[0].numel():
        raise ValueError(f"recon must have shape (B, {images[0].numel()}) to match images of shape "
                         f"{tuple(images.shape)}, got {tuple(recon.shape)}")
    diff = recon.reshape(batch, -1) - images.reshape(batch, -1)  # (B, pixels)
    return (diff * diff).sum(dim=1).mean()


def spread_loss(activations: torch.Tensor, labels: torch.Tensor, margin: float) -> torch.Tensor:
    r"""Spread loss :math:`\frac1B\sum_b\sum_{i\ne t}\max(0, m - (a_t - a_i))^2` of activations (B, J)."""
    require_tensor("activations", activations, ndim=2, shape="(B, J)", floating=True)
    require_nonempty_batch("activations", activations)
    require_labels("labels", labels, batch=len(activations), num_classes=activations.shape[1])
    if isinstance(margin, bool) or not isinstance(margin, (int, float)) or not 0 < margin <= 1:
        raise ValueError(f"margin must be in (0, 1], got {margin!r}")
    target = activations.gather(1, labels.view(-1, 1))  # (B, 1)
    gaps = torch.relu(margin - (target - activations)) ** 2  # (B, J): the target's own term is m^2
    return (gaps.sum(dim=1) - margin ** 2).mean()
