r"""Adversarial examples (lesson 13): FGSM, PGD and Auto-PGD from ``torchattacks``, and a network's accuracy under them.

Every capsedu network answers ``class_scores(images)``: capsule lengths (CapsNet, Efficient-CapsNet),
activations (EM routing) or probabilities (the CNN), all in [0, 1]. An attack needs a loss to
climb, so :class:`ScoresAsLogits` hands attacks the logarithm of those scores: the cross-entropy
of ``log(scores)`` is ``-log(score_y / sum_j score_j)``, for the CNN exactly its own cross-entropy,
for a capsule network the share of the true class's length in the sum of lengths. One loss, the
same for every network, so that their curves can be compared. (For a softmax CNN the logits
themselves are used: the same loss, without a logarithm of probabilities that round to 0 or 1 in
float32 - which would flatten the gradient of a confident image and mask it from the attack.)

Shape legend:
    N  images;  B  batch size;  C, H, W  channels, height, width;  J  classes
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from capsedu._numbers import require_int, require_number
from capsedu.nets.cnn import BaselineCNN
from capsedu.nets.losses import margin_loss
from capsedu.training.modes import eval_mode
from capsedu.training.prediction import require_class_scores

Attack = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]  # (images, labels) -> attacked images

# torchattacks 3.5.1 pins requests~=2.25.1 (which JupyterLab's server cannot use) but never imports
# requests: it is installed without its dependencies (the Makefile's NO_DEPS)
TORCHATTACKS = "torchattacks==3.5.1"


class ScoresAsLogits(nn.Module):
    r"""A capsedu network seen as a classifier with logits: ``log(class_scores(images))`` (B, J),
    or a softmax CNN's own logits (the same cross-entropy)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = require_class_scores(model)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        if isinstance(self.model, BaselineCNN) and not self.model.config.multi_label:
            return self.model(images)  # (B, J) logits: log_softmax of them is log class_scores
        return self.model.class_scores(images).clamp_min(1e-30).log()  # (B, J)


def fgsm(model: nn.Module, images: torch.Tensor, labels: torch.Tensor, eps: float, *,
         loss: str = "ce") -> torch.Tensor:
    r"""The fast gradient sign method (Goodfellow et al. 2015): each pixel moved ``eps`` along the
    sign of the loss's gradient, then clipped to [0, 1]. In eval mode; the mode is restored, and
    no gradient is left in the network's parameters.

    ``loss="ce"``: the cross-entropy of :class:`ScoresAsLogits` (the loss every attack here
    climbs). ``loss="margin"``: the margin loss (Eq. 4, :func:`capsedu.nets.losses.margin_loss`)
    of the class scores themselves - for a capsule network the loss it was trained with, on its
    class capsules' lengths."""
    require_number("eps", eps, low=0.0, high=1.0)
    if loss not in ("ce", "margin"):
        raise ValueError(f"loss must be 'ce' or 'margin', got {loss!r}")
    images = images.detach().clone().requires_grad_(True)
    with eval_mode(model):
        if loss == "ce":
            value = F.cross_entropy(ScoresAsLogits(model)(images), labels)
        else:
            value = margin_loss(require_class_scores(model).class_scores(images), labels)
    (gradient,) = torch.autograd.grad(value, images)
    return (images + eps * gradient.sign()).clamp(0.0, 1.0).detach()  # (B, C, H, W)


def _torchattacks() -> Any:
    r"""The ``torchattacks`` module, or an ImportError saying how to install it."""
    try:
        import torchattacks
    except ImportError as error:
        raise ImportError(f"PGD and APGD need torchattacks: pip install --no-deps {TORCHATTACKS} "
                          "(make lab installs it)") from error
    return torchattacks


def _seeded(model: nn.Module, attack: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], seed: int) -> Attack:
    r"""``attack`` in eval mode, its random numbers drawn from ``seed`` (one stream per call), the
    global random state and the model's mode left as found."""
    calls = [0]

    def run(images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        with torch.random.fork_rng(devices=[]), eval_mode(model):
            torch.manual_seed(seed + calls[0])
            calls[0] += 1
            return attack(images, labels).detach()  # (B, C, H, W)
    return run


def _logits_of(model: nn.Module, logits: nn.Module | None) -> nn.Module:
    r"""What an attack climbs: ``logits`` (a module from images to (B, J) logits, such as the views
    of :mod:`capsedu.explore.adaptive`), or by default :class:`ScoresAsLogits` of ``model``."""
    if logits is None:
        return ScoresAsLogits(model)
    if not isinstance(logits, nn.Module):
        raise TypeError(f"logits must be an nn.Module from images to (B, J) logits, got {type(logits).__name__}")
    return logits


def pgd(model: nn.Module, eps: float, *, steps: int = 10, step_size: float | None = None,
        seed: int = 0, logits: nn.Module | None = None) -> Attack:
    r"""Projected gradient descent (Madry et al. 2018) from ``torchattacks``: ``steps`` signed
    steps of ``step_size`` (default ``eps / 4``) from a random start in the L-infinity ball of
    radius ``eps``, climbing the cross-entropy of ``logits`` (default :class:`ScoresAsLogits`).
    The random starts are drawn from ``seed`` (one stream per call of the attack, the global
    random state left untouched)."""
    require_number("eps", eps, low=0.0, high=1.0)
    require_int("steps", steps, minimum=1)
    if step_size is not None:
        require_number("step_size", step_size, low=0.0, high=1.0)
    climbed = _logits_of(model, logits)
    attack = _torchattacks().PGD(climbed, eps=eps, steps=steps,
                                 alpha=eps / 4 if step_size is None else step_size, random_start=True)
    return _seeded(climbed, attack, seed)


def apgd(model: nn.Module, eps: float, *, steps: int = 50, restarts: int = 1, loss: str = "dlr",
         seed: int = 0, logits: nn.Module | None = None) -> Attack:
    r"""Auto-PGD (Croce & Hein 2020, the first attack of AutoAttack) from ``torchattacks``: PGD
    whose step size adapts to the loss's progress (no step size to tune), in the L-infinity ball
    of radius ``eps``; each image keeps its worst case over ``restarts`` random starts. With
    ``loss="dlr"`` it climbs the difference-of-logits ratio, a margin ``(z_y - max_{j != y} z_j)``
    divided by the spread of the top logits ``z`` (here ``log class_scores``): unchanged by shifting
    or scaling the logits, that is by sharpening or flattening the scores. A stronger,
    parameter-free check for gradient masking than :func:`pgd` (not an attack adapted to any one
    network). ``"ce"``: the cross-entropy. ``logits``: as in :func:`pgd`. Random numbers:
    torchattacks' APGD reseeds the generator with ``seed`` at every call, so every batch starts
    from the same draw (unlike :func:`pgd`, one stream per call); the global random state is
    left as found."""
    require_number("eps", eps, low=0.0, high=1.0)
    require_int("steps", steps, minimum=1)
    require_int("restarts", restarts, minimum=1)
    if loss not in ("dlr", "ce"):
        raise ValueError(f"loss must be 'dlr' or 'ce', got {loss!r}")
    climbed = _logits_of(model, logits)
    attack = _torchattacks().APGD(climbed, norm="Linf", eps=eps, steps=steps,
                                  n_restarts=restarts, loss=loss, seed=seed)
    return _seeded(climbed, attack, seed)


def apgd_targeted(model: nn.Module, eps: float, *, steps: int = 50, targets: int = 1, seed: int = 0,
                  logits: nn.Module | None = None) -> Attack:
    r"""Targeted Auto-PGD (AutoAttack's second attack, ``torchattacks.APGDT``): for each of the
    ``targets`` classes the network ranks highest after the true one, ``steps`` steps that push
    that class above the true one (the targeted DLR loss); each image keeps its first success.
    A targeted attack is a narrower search than an untargeted one: it should not succeed more."""
    require_number("eps", eps, low=0.0, high=1.0)
    require_int("steps", steps, minimum=1)
    require_int("targets", targets, minimum=1)
    climbed = _logits_of(model, logits)
    attack = _torchattacks().APGDT(climbed, norm="Linf", eps=eps, steps=steps, n_restarts=1, seed=seed)
    attack.n_target_classes = targets  # torchattacks tries every other class (9) unless told
    return _seeded(climbed, attack, seed)


def square(model: nn.Module, eps: float, *, queries: int = 1000, seed: int = 0,
           logits: nn.Module | None = None) -> Attack:
    r"""The Square attack (Andriushchenko et al. 2020, AutoAttack's gradient-free one, from
    ``torchattacks``): random square patches of +-eps, kept when they lower the margin of the
    logits, at most ``queries`` forward passes per image. It never sees a gradient, so a network
    that resists gradient attacks but falls to it has a masked gradient."""
    require_number("eps", eps, low=0.0, high=1.0)
    require_int("queries", queries, minimum=1)
    climbed = _logits_of(model, logits)
    attack = _torchattacks().Square(climbed, norm="Linf", eps=eps, n_queries=queries, n_restarts=1,
                                    loss="margin", seed=seed)
    return _seeded(climbed, attack, seed)


def attacked_correct(model: nn.Module, images: torch.Tensor, labels: torch.Tensor,
                     attack: Attack | None, *, batch_size: int = 250,
                     where: torch.Tensor | None = None) -> torch.Tensor:
    r"""Which of ``images`` (N,) ``model`` classifies right after ``attack`` (None: clean), in eval mode.

    An attack built on ``model`` itself is a white-box attack; one built on another network, a
    transfer attack: the images are attacked on that network and classified by ``model``.

    ``where`` (N,) bool: attack only those images and count every other one wrong - the images
    still right after earlier attacks, so that a chain of calls gives each image's worst case
    over the chain (AutoAttack's way: each attack meets only what the others left)."""
    require_class_scores(model)
    require_int("batch_size", batch_size, minimum=1)
    if len(images) != len(labels) or len(images) == 0:
        raise ValueError(f"images and labels must be non-empty and as long, got {len(images)} and {len(labels)}")
    if where is not None and (where.dtype != torch.bool or tuple(where.shape) != (len(images),)):
        raise ValueError(f"where must be a bool tensor of shape ({len(images)},), got {where.dtype} {tuple(where.shape)}")
    right = torch.zeros(len(images), dtype=torch.bool, device=labels.device)  # (N,)
    chosen = torch.arange(len(images), device=labels.device) if where is None else torch.nonzero(where).flatten()
    for index in chosen.split(batch_size) if len(chosen) else ():  # split() of nothing is one empty batch
        batch, truth = images[index], labels[index]  # (B, C, H, W), (B,)
        if attack is not None:
            batch = attack(batch, truth)  # (B, C, H, W)
        with eval_mode(model), torch.no_grad():
            right[index] = model.class_scores(batch).argmax(dim=1) == truth  # (B,)
    return right  # (N,)


def attacked_accuracy(model: nn.Module, images: torch.Tensor, labels: torch.Tensor,
                      attack: Attack | None, *, batch_size: int = 250) -> float:
    r"""Share of ``images`` that ``model`` classifies right after ``attack``: :func:`attacked_correct`'s mean."""
    right = attacked_correct(model, images, labels, attack, batch_size=batch_size)
    return int(right.sum()) / len(right)
