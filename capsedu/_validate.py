r"""Input checks shared by every public function.

Each helper raises ``TypeError`` or ``ValueError`` whose message names the argument and what
was expected, so a learner sees ``u_hat must be a 4-D tensor (B, I, J, D), got shape (2, 3)``
instead of a broadcasting error from deep inside PyTorch. Validation happens at the entry points:
the O(1) checks (type, dimensions, shapes) run in every public function, the O(N) scan for NaN
and inf (:func:`require_finite`, a full pass and on a GPU a sync) only where data enters a
network (:func:`require_images`), never in the layers, routing and losses inside it. The checks
of plain numbers live in :mod:`capsedu._numbers` (no torch, so that the NumPy-only modules use
them too); they are importable from here as well.

Shape legend: none (no tensor shapes of its own).
"""

from __future__ import annotations

import torch

from capsedu._numbers import require_int, require_number

__all__ = ["require_capsule_vectors", "require_finite", "require_images", "require_int", "require_labels",
           "require_nonempty_batch", "require_number", "require_tensor", "require_unit_interval"]


def require_tensor(name: str, x: object, *, ndim: int | None = None, shape: str = "",
                   floating: bool = False) -> torch.Tensor:
    r"""Check that ``x`` is a tensor with ``ndim`` dimensions (described by ``shape``)."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor {shape}".rstrip() + f", got {type(x).__name__}")
    if ndim is not None and x.dim() != ndim:
        raise ValueError(f"{name} must be a {ndim}-D tensor {shape}, got shape {tuple(x.shape)}")
    if floating and not x.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {x.dtype}")
    return x


def require_nonempty_batch(name: str, x: torch.Tensor) -> None:
    r"""Reject a batch with zero items (dimension 0 of size 0)."""
    if x.dim() == 0 or x.shape[0] == 0:
        raise ValueError(f"{name} is an empty batch (shape {tuple(x.shape)}); expected at least one item")


def require_finite(name: str, x: torch.Tensor) -> None:
    r"""Reject NaN or infinite values, which would silently poison routing and the loss."""
    if not torch.isfinite(x).all():
        bad = int((~torch.isfinite(x)).sum())
        raise ValueError(f"{name} contains {bad} NaN or infinite value(s); expected finite numbers")


def require_capsule_vectors(name: str, s: object, dim: int, eps: float) -> torch.Tensor:
    r"""Check a squash's input: a floating tensor with a capsule axis ``dim``, ``eps > 0``.

    O(1) checks only: a squash runs inside every network's forward pass, so its values are not
    scanned (:func:`require_finite` runs where images enter a network, :func:`require_images`).
    """
    require_tensor(name, s, floating=True)
    if s.dim() == 0:
        raise ValueError(f"{name} must have at least one dimension holding the capsule vector, got a scalar")
    if not -s.dim() <= dim < s.dim():
        raise ValueError(f"dim must be in [{-s.dim()}, {s.dim() - 1}] for {name} of shape {tuple(s.shape)}, got {dim}")
    if not eps > 0:
        raise ValueError(f"eps must be > 0, got {eps}")
    return s


def require_unit_interval(name: str, x: torch.Tensor) -> torch.Tensor:
    r"""Reject values outside [0, 1] (and NaN), e.g. activations. A full pass and on a GPU a sync:
    for entry points that take such values from a learner, not for a network's layers."""
    if not bool(((x >= 0) & (x <= 1)).all()):
        raise ValueError(f"{name} must lie in [0, 1], got values from {float(x.min()):.4g} "
                         f"to {float(x.max()):.4g}")
    return x


def require_images(name: str, x: object, *, channels: int, size: int) -> torch.Tensor:
    r"""Check that ``x`` is a non-empty, finite batch of images (B, ``channels``, ``size``, ``size``)."""
    expected = f"(B, {channels}, {size}, {size})"
    require_tensor(name, x, ndim=4, shape=expected, floating=True)
    require_nonempty_batch(name, x)
    if tuple(x.shape[1:]) != (channels, size, size):
        raise ValueError(f"{name} must have shape {expected}, got {tuple(x.shape)}")
    require_finite(name, x)
    return x


def require_labels(name: str, labels: object, *, batch: int, num_classes: int) -> torch.Tensor:
    r"""Check integer class indices of shape (B,) with values in [0, num_classes)."""
    labels = require_tensor(name, labels, ndim=1, shape="(B,) of class indices")
    if labels.is_floating_point() or labels.dtype == torch.bool:
        raise TypeError(f"{name} must hold integer class indices, got dtype {labels.dtype}")
    if labels.shape[0] != batch:
        raise ValueError(f"{name} has {labels.shape[0]} labels but the batch has {batch} items")
    if labels.numel() and (labels.min() < 0 or labels.max() >= num_classes):
        raise ValueError(f"{name} must be in [0, {num_classes - 1}], got values from "
                         f"{int(labels.min())} to {int(labels.max())}")
    return labels
