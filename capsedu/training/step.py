r"""One optimisation step on one batch: :func:`train_step` (lesson 06 writes it by hand).

:func:`~capsedu.training.loop.fit` runs the same four moves on every training batch (with its
NaN guard, mixed precision and learning-rate schedule around them); this is the bare step, for
a lesson or a test that drives the loop itself: ``zero_grad`` -> loss -> ``backward`` ->
``step``, the loss returned as a Python float (a tensor would keep its autograd graph alive).

Shape legend:
    B      batch size
"""

from __future__ import annotations

from typing import Any

import torch

from capsedu.training.loop import LossFn, resolve_objective
from capsedu.training.objectives import Objective


def train_step(model: torch.nn.Module, optimizer: torch.optim.Optimizer, images: torch.Tensor,
               targets: Any, objective: Objective | LossFn | None = None) -> float:
    r"""One step of ``optimizer`` on the loss of one batch; that loss, before the step, as a float.

    ``images`` (B, C, H, W) and ``targets`` (the labels (B,) for a CapsNet) are on the model's
    device. The loss is ``objective``'s, resolved as :func:`~capsedu.training.loop.fit` does: the
    network's own default when None (a CapsNet: margin loss + 0.0005 x reconstruction loss, the
    decoder masked by the true labels, as :func:`~capsedu.nets.capsnet.capsnet_loss`).
    """
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(f"optimizer must be a torch.optim.Optimizer, got {type(optimizer).__name__}")
    loss_fn = resolve_objective(model, objective)
    optimizer.zero_grad(set_to_none=True)
    loss, _ = loss_fn(model, images, targets)  # (), the batch's loss
    loss.backward()
    optimizer.step()
    return float(loss.detach())
