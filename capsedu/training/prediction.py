r"""What a trained network says: :func:`predict` (one class per image) and :func:`pair_accuracy`
(two digits per image, as the paper counts it).

Both run in eval mode and restore the network's mode; both need only ``class_scores(images)``
(:mod:`capsedu.nets.contract`). Both run where the network is: the images go to its device
(``device=None``); an explicit ``device`` that is not the network's raises ``ValueError``
(:func:`~capsedu.training.hardware.require_model_device`). The results come back on the CPU.

Shape legend:
    N      images, or MultiMNIST pairs
    B      batch size
    J      classes
"""

from __future__ import annotations

import torch
from torch import nn

from capsedu._validate import require_int
from capsedu.data.multimnist import MultiMNIST
from capsedu.nets.multi_digit import pair_hits
from capsedu.training.hardware import require_model_device
from capsedu.training.modes import eval_mode


def require_class_scores(model: object, name: str = "model") -> nn.Module:
    r"""Raise ``TypeError`` unless ``model`` is a module with a ``class_scores(images)`` method."""
    if not isinstance(model, nn.Module) or not callable(getattr(model, "class_scores", None)):
        raise TypeError(f"{name} must be a network with a class_scores(images) method (any capsedu "
                        f"network, e.g. capsedu.CapsNet), got {type(model).__name__}")
    return model


@torch.no_grad()
def predict(model: nn.Module, images: torch.Tensor, *, batch_size: int = 100,
            device: str | torch.device | None = None) -> torch.Tensor:
    r"""Predicted classes (N,) of ``images`` (N, C, H, W): the argmax of ``model.class_scores``
    (capsule lengths for a CapsNet, probabilities for a CNN), in eval mode; the mode is restored."""
    require_class_scores(model)
    require_int("batch_size", batch_size, minimum=1)
    if not isinstance(images, torch.Tensor) or images.dim() != 4 or len(images) == 0:
        raise ValueError(f"images must be a non-empty (N, C, H, W) tensor, got "
                         f"{tuple(images.shape) if isinstance(images, torch.Tensor) else type(images).__name__}")
    device = require_model_device(model, device)
    with eval_mode(model), torch.inference_mode():
        return torch.cat([model.class_scores(batch.to(device)).argmax(dim=1).cpu()
                          for batch in images.split(batch_size)])  # (N,)


@torch.no_grad()
def pair_accuracy(model: nn.Module, pairs: MultiMNIST, *, batch_size: int = 500,
                  device: str | torch.device | None = None) -> dict[str, float]:
    r"""Share of ``pairs`` with both labels right (``"both"``) and with at least one right
    (``"at_least_one"``), by ``model.class_scores``, in eval mode (the mode is restored)."""
    require_class_scores(model)
    if not isinstance(pairs, MultiMNIST):
        raise TypeError(f"pairs must be a capsedu MultiMNIST set, got {type(pairs).__name__}")
    device = require_model_device(model, device)
    hits = []
    with eval_mode(model):
        for images, targets in pairs.batches(batch_size):
            scores = model.class_scores(images.to(device)).cpu()  # (B, J)
            hits.append(pair_hits(scores, targets.labels))
    hits_all = torch.cat(hits)  # (N,) one per pair
    return {"both": (hits_all == 2).float().mean().item(),
            "at_least_one": (hits_all >= 1).float().mean().item()}
