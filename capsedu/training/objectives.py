r"""What a network is asked to learn: objectives, plain data that :func:`capsedu.fit` is given.

An objective turns a network, a batch of images and its targets into a
:class:`~capsedu.nets.contract.Loss` - the value to minimise and how many images were right -
and holds every number that goes into it. It is a frozen dataclass, so it is saved with a
checkpoint and a recipe as a plain dict (:meth:`Objective.to_dict`, :func:`objective_from_dict`).

===========================  ==========================================================  ======
objective                    the loss                                                    lesson
===========================  ==========================================================  ======
:class:`MarginObjective`     margin loss (Eq. 4) + ``recon_weight`` x reconstruction     05, 06
:class:`TwoDigitObjective`   the same on two-digit targets, both digits reconstructed    09
:class:`CrossEntropyObjective`  softmax cross-entropy on class logits                    08
:class:`MultiLabelObjective`    binary cross-entropy per class on multi-hot targets      09
:class:`SpreadObjective`     spread loss, its margin ramped over the epochs              11
===========================  ==========================================================  ======

``fit`` calls ``objective(model, images, targets, epoch=epoch)`` (epochs count from 1); without
an epoch - evaluating a trained network - an objective gives its final form (the spread loss at
its last margin). :func:`default_objective` is what a course network is trained for when
``fit`` is given none.

Shape legend:
    B      batch size
    J      classes
    C, S   channels and image side
    D      a capsule's dimension
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import nn

from capsedu._validate import require_labels, require_tensor
from capsedu.nets.capsnet import capsnet_loss
from capsedu.nets.contract import Loss
from capsedu.nets.losses import RECON_WEIGHT, margin_loss, spread_loss
from capsedu.nets.multi_digit import label_hits


@dataclass(frozen=True)
class Objective:
    r"""Base of every objective: a name for storage and the plain-data round trip."""

    name: ClassVar[str] = ""

    def __call__(self, model: nn.Module, images: torch.Tensor, targets: Any,
                 epoch: int | None = None) -> Loss:
        raise NotImplementedError

    def to_dict(self) -> dict[str, Any]:
        r"""``{"name": ..., field: value, ...}``: what checkpoints and recipes store."""
        return {"name": self.name, **dataclasses.asdict(self)}


def _right(scores: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return (scores.argmax(dim=1) == labels).sum()


@dataclass(frozen=True)
class MarginObjective(Objective):
    r"""Margin loss (Eq. 4) + ``recon_weight`` x the reconstruction loss of the decoder masked by
    the true class (Section 4.1), for any network whose ``model(images, labels)`` returns a
    :class:`~capsedu.nets.capsnet.CapsNetOutput` (CapsNet, Efficient-CapsNet)."""

    name: ClassVar[str] = "margin"
    recon_weight: float = RECON_WEIGHT

    def __call__(self, model: nn.Module, images: torch.Tensor, targets: torch.Tensor,
                 epoch: int | None = None) -> Loss:
        value, lengths = capsnet_loss(model, images, targets, self.recon_weight)  # (), (B, J)
        return Loss(value, _right(lengths, targets))


@dataclass(frozen=True)
class TwoDigitObjective(Objective):
    r"""Two overlapping digits (Section 6): the margin loss on the multi-hot targets, plus, for each
    digit, the decoder masked by that digit's class compared with that digit alone; the two
    squared errors are summed and weighted by ``recon_weight``. Targets are
    :class:`~capsedu.data.multimnist.PairTargets`; the network needs ``class_capsules`` and
    ``decode`` (a CapsNet). An image is right when both its digits are its two longest capsules."""

    name: ClassVar[str] = "two_digit"
    recon_weight: float = RECON_WEIGHT

    def __call__(self, model: nn.Module, images: torch.Tensor, targets: Any,
                 epoch: int | None = None) -> Loss:
        batch = len(images)
        v = model.class_capsules(images)  # (B, J, D)
        lengths = v.norm(dim=-1)  # (B, J)
        margin = margin_loss(lengths, targets.multi_hot)
        both = torch.cat([v, v])  # (2B, J, D): each image once per digit
        masks = torch.cat([targets.labels[:, 0], targets.labels[:, 1]])  # (2B,)
        recon = model.decode(both, masks).view(2, batch, -1)  # (2, B, C*S*S)
        wanted = targets.digits.transpose(0, 1).reshape(2, batch, -1)  # (2, B, C*S*S)
        squared_error = (recon - wanted).square().sum(dim=(0, 2)).mean()  # () both digits, per image
        hits = label_hits(lengths, targets.multi_hot)  # (B,)
        return Loss(margin + self.recon_weight * squared_error, (hits == 2).sum())


@dataclass(frozen=True)
class CrossEntropyObjective(Objective):
    r"""Softmax cross-entropy of the network's logits ``model(images)`` (B, J) against class
    indices (B,) - the paper's CNN baseline."""

    name: ClassVar[str] = "cross_entropy"

    def __call__(self, model: nn.Module, images: torch.Tensor, targets: torch.Tensor,
                 epoch: int | None = None) -> Loss:
        if not isinstance(targets, torch.Tensor):
            raise TypeError(f"targets must be class indices (B,), got {type(targets).__name__}; for "
                            "MultiMNIST pairs train a multi_label CNN with objective=MultiLabelObjective()")
        logits = model(images)  # (B, J)
        require_labels("targets", targets, batch=len(images), num_classes=logits.shape[1])
        return Loss(nn.functional.cross_entropy(logits, targets), _right(logits, targets))


@dataclass(frozen=True)
class MultiLabelObjective(Objective):
    r"""Binary cross-entropy of each class's logit against multi-hot targets (``targets.multi_hot``
    of :class:`~capsedu.data.multimnist.PairTargets`, (B, J)): a CNN with a sigmoid per class.
    An image is right when its top classes are exactly its labels."""

    name: ClassVar[str] = "multi_label"

    def __call__(self, model: nn.Module, images: torch.Tensor, targets: Any,
                 epoch: int | None = None) -> Loss:
        logits = model(images)  # (B, J)
        multi_hot = require_tensor("targets.multi_hot", getattr(targets, "multi_hot", None), ndim=2,
                                   shape="(B, J) of a MultiMNIST PairTargets")
        value = nn.functional.binary_cross_entropy_with_logits(logits, multi_hot.float())
        right = label_hits(logits, multi_hot) == multi_hot.sum(dim=1)  # (B,)
        return Loss(value, right.sum())


@dataclass(frozen=True)
class SpreadObjective(Objective):
    r"""The spread loss of the class activations ``model.class_scores(images)`` (B, J), its margin
    moved linearly from ``start_margin`` (epoch 1) to ``margin`` over ``ramp_epochs`` epochs, then
    kept there - the paper's "small margin of 0.2 ... linearly increased during training to 0.9".
    ``ramp_epochs=0``: the margin is ``margin`` from the start."""

    name: ClassVar[str] = "spread"
    margin: float = 0.9
    start_margin: float = 0.2
    ramp_epochs: int = 0

    def __post_init__(self) -> None:
        if not 0 < self.start_margin <= self.margin <= 1:
            raise ValueError(f"start_margin and margin must satisfy 0 < start_margin <= margin <= 1, "
                             f"got {self.start_margin}, {self.margin}")
        if isinstance(self.ramp_epochs, bool) or not isinstance(self.ramp_epochs, int) or self.ramp_epochs < 0:
            raise TypeError(f"ramp_epochs must be an int >= 0, got {self.ramp_epochs!r}")

    def margin_at(self, epoch: int | None) -> float:
        r"""The margin of epoch ``epoch`` (from 1), or the final one for ``None``."""
        if epoch is None or self.ramp_epochs == 0:
            return self.margin
        return self.start_margin + (self.margin - self.start_margin) * min((epoch - 1) / self.ramp_epochs, 1.0)

    def __call__(self, model: nn.Module, images: torch.Tensor, targets: torch.Tensor,
                 epoch: int | None = None) -> Loss:
        activations = model.class_scores(images)  # (B, J)
        return Loss(spread_loss(activations, targets, self.margin_at(epoch)), _right(activations, targets))


OBJECTIVES: dict[str, type[Objective]] = {cls.name: cls for cls in (
    MarginObjective, TwoDigitObjective, CrossEntropyObjective, MultiLabelObjective, SpreadObjective)}
DEFAULT_OBJECTIVES: dict[str, Objective] = {"capsnet": MarginObjective(), "efficient": MarginObjective(),
                                            "cnn": CrossEntropyObjective(), "em": SpreadObjective()}


def objective_from_dict(data: dict[str, Any]) -> Objective:
    r"""The objective that :meth:`Objective.to_dict` wrote."""
    if not isinstance(data, dict) or data.get("name") not in OBJECTIVES:
        raise ValueError(f"an objective dict needs a name among {sorted(OBJECTIVES)}, got {data!r}")
    fields = {key: value for key, value in data.items() if key != "name"}
    return OBJECTIVES[data["name"]](**fields)


def default_objective(model: nn.Module) -> Objective | None:
    r"""What a course network of ``model``'s kind is trained for, or None for other modules."""
    return DEFAULT_OBJECTIVES.get(getattr(type(model), "kind", None))
