r"""Several digits in one image (Section 6 of the paper): when a multi-label prediction is right.

A CapsNet says "a 3 and a 5" by making two capsules long: the margin loss (Eq. 4) already takes
multi-hot targets, one term per class, so both present classes are pushed above m+ = 0.9 and the
other eight below m- = 0.1 - something a softmax, whose outputs compete for one unit of
probability, cannot express. (How the network is *trained* on pairs, with both digits
reconstructed, is :class:`capsedu.training.objectives.TwoDigitObjective`.)

The rule, as the paper counts it, for every network of the course: an image with k labels is
right when its k highest class scores (the k longest capsules, or a CNN's k largest sigmoids)
are exactly its labels; for pairs, "at least one" counts images where one of the top two is one
of the labels. :func:`label_hits` is that rule; :func:`pair_hits` its two-label form.

Shape legend:
    B      batch size
    J      classes (10)
    L      labels per image (the most of any image in the batch; 2 for MultiMNIST)
"""

from __future__ import annotations

import torch


def label_hits(scores: torch.Tensor, multi_hot: torch.Tensor) -> torch.Tensor:
    r"""How many of each image's labels are among its top-k scores, k = its number of labels.

    ``scores`` (B, J), ``multi_hot`` (B, J) with 0/1 entries: (B,) integers; an image is right
    when the count equals ``multi_hot.sum(dim=1)``.
    """
    count = multi_hot.sum(dim=1).long()  # (B,) labels per image
    top = scores.topk(int(count.max()), dim=1).indices  # (B, L) the highest scores first
    counted = torch.arange(top.shape[1], device=scores.device) < count[:, None]  # (B, L) the first k
    return ((multi_hot.gather(1, top) > 0) & counted).sum(dim=1)  # (B,)


def top_two(scores: torch.Tensor) -> torch.Tensor:
    r"""The two highest-scoring classes of each image, (B, J) -> (B, 2), the smaller index first."""
    return scores.topk(2, dim=1).indices.sort(dim=1).values  # (B, 2)


def pair_hits(scores: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    r"""How many of each image's two labels (B, 2) are among its top two scores (B, J): (B,) in {0, 1, 2}."""
    multi_hot = torch.zeros_like(scores, dtype=torch.long).scatter_(1, labels, 1)  # (B, J)
    return label_hits(scores, multi_hot)  # (B,)
