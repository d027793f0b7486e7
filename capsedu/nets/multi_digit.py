r"""Two overlapping digits at once (Section 6 of the paper): the CapsNet's loss and the accuracy.

A CapsNet says "a 3 and a 5" by making two capsules long: the margin loss (Eq. 4) already takes
multi-hot targets, one term per class, so both present classes are pushed above m+ = 0.9 and the
other eight below m- = 0.1 - something a softmax, whose outputs compete for one unit of
probability, cannot express. The reconstruction term follows the paper: for each of the two
digits, mask every digit capsule except that digit's class, decode, and compare with that digit
alone (:class:`capsedu.data.multimnist.PairTargets` holds them); the two squared errors are summed
and weighted by ``recon_weight`` (0.0005).

Accuracy as the paper counts it: an image is right when its two highest class scores (the two
longest capsules, or a CNN's two largest sigmoids) are exactly its two labels; "at least one" counts
images where one of those two is one of the labels.

Shape legend:
    B      batch size
    J      classes (10);  D  digit-capsule dimension (16)
    C, S   channels (1), canvas side (36)
"""

from __future__ import annotations

import torch
from torch import nn

from capsedu.data.multimnist import MultiMNIST, PairTargets
from capsedu.nets.losses import margin_loss_unchecked
from capsedu.nets.registry import Loss, check_network
from capsedu.training.runtime import eval_mode


def top_two(scores: torch.Tensor) -> torch.Tensor:
    r"""The two highest-scoring classes of each image, (B, J) -> (B, 2), the smaller index first."""
    return scores.topk(2, dim=1).indices.sort(dim=1).values  # (B, 2)


def pair_hits(scores: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    r"""How many of each image's two labels (B, 2) are among its top two scores (B, J): (B,) in {0, 1, 2}."""
    chosen = top_two(scores)  # (B, 2)
    return (chosen[:, :, None] == labels[:, None, :]).any(dim=1).sum(dim=1)  # (B,)


def two_digit_loss(model: nn.Module, images: torch.Tensor, targets: PairTargets) -> Loss:
    r"""Margin loss on the multi-hot targets + ``recon_weight`` x both masked reconstructions.

    ``model`` is a :class:`capsedu.CapsNet` whose ``image_size`` is the canvas side.
    Returns the loss and the number of images whose two labels are its two longest capsules.
    """
    batch = len(images)
    v, _ = model.digits(model.encode(images))  # (B, J, D)
    lengths = v.norm(dim=-1)  # (B, J)
    margin = margin_loss_unchecked(lengths, targets.multi_hot)
    both = torch.cat([v, v])  # (2B, J, D): each image once per digit
    masks = torch.cat([targets.labels[:, 0], targets.labels[:, 1]])  # (2B,)
    recon = model.decode(both, masks).view(2, batch, -1)  # (2, B, C*S*S)
    wanted = targets.digits.transpose(0, 1).reshape(2, batch, -1)  # (2, B, C*S*S)
    squared_error = (recon - wanted).square().sum(dim=(0, 2)).mean()  # () both digits, per image
    value = margin + model.config.recon_weight * squared_error
    return Loss(value, (pair_hits(lengths, targets.labels) == 2).sum())


@torch.no_grad()
def pair_accuracy(model: nn.Module, pairs: MultiMNIST, *, batch_size: int = 500,
                  device: str | torch.device = "cpu") -> dict[str, float]:
    r"""Share of ``pairs`` with both labels right (``"both"``) and with at least one right
    (``"at_least_one"``), by ``model.class_scores``, in eval mode (the mode is restored)."""
    check_network(model)
    if not isinstance(pairs, MultiMNIST):
        raise TypeError(f"pairs must be a capsedu MultiMNIST set, got {type(pairs).__name__}")
    hits = []
    with eval_mode(model):
        for images, targets in pairs.batches(batch_size):
            scores = model.class_scores(images.to(device)).cpu()  # (B, J)
            hits.append(pair_hits(scores, targets.labels))
    hits_all = torch.cat(hits)  # (P,)
    return {"both": (hits_all == 2).float().mean().item(),
            "at_least_one": (hits_all >= 1).float().mean().item()}
