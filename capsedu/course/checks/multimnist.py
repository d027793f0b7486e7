r"""Checks for lesson 09 (MultiMNIST): the paper's both-labels accuracy and the masked
reconstruction of one digit.

Each check runs the learner's function on probes built to tell the likely mistakes apart and
prints a pass or a hint that names the mistake.

Shape legend:
    B      batch size (images)
    J      classes (10)
    D      digit-capsule dimension (16)
    S      canvas side (36)
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from capsedu.course.checks._kit import CheckResult, call_learner, shape_of, verdict
from capsedu.nets.capsnet import CapsNet, require_capsnet
from capsedu.nets.multi_digit import pair_hits


def _score_probe() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    r"""Scores (6, J), labels (6, 2) and the right answer: cases that separate the mistakes."""
    scores = torch.full((6, 10), 0.05)
    labels = torch.tensor([[3, 5], [5, 3], [3, 5], [3, 5], [1, 8], [2, 9]])
    scores[0, [3, 5]] = torch.tensor([0.9, 0.8])  # both right
    scores[1, [3, 5]] = torch.tensor([0.9, 0.8])  # both right, labels in the other order
    scores[2, [3, 7]] = torch.tensor([0.9, 0.8])  # only the first right
    scores[3, [5, 7]] = torch.tensor([0.7, 0.9])  # only the second, and not the top score
    scores[4, [0, 1, 8]] = torch.tensor([0.95, 0.9, 0.3])  # both labels scored, 8 only third
    scores[5, [2, 9]] = torch.tensor([0.4, 0.3])  # both right although both are short
    return scores, labels, torch.tensor([True, True, False, False, False, True])


def _both_right_hint(result: torch.Tensor, scores: torch.Tensor, labels: torch.Tensor) -> str:
    ordered = scores.topk(2, dim=1).indices  # (B, 2), highest first, not sorted
    wrong = [((ordered == labels).all(dim=1), "you compare the top two with the labels in order: "
              "sort both (or test membership), a pair (3, 5) is the same as (5, 3)"),
             (pair_hits(scores, labels) >= 1, "that counts images with AT LEAST one label right; "
              "both labels must be the two highest scores"),
             (scores.argmax(dim=1) == labels[:, 0], "you compare the top-1 class with the first "
              "label: look at the TWO highest scores (scores.topk(2, dim=1))"),
             ((scores > 0.5).sum(dim=1).eq(2) & (pair_hits(scores, labels) == 2),
              "you threshold the scores at 0.5: the paper takes the two longest capsules, "
              "however short")]
    for candidate, hint in wrong:
        if torch.equal(result, candidate):
            return hint
    return ("some answers differ: an image is right exactly when its two highest scores are its "
            "two labels, in any order")


def check_both_right(fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], *,
                     quiet: bool = False) -> CheckResult:
    r"""``fn(scores, labels)`` must return (B,) booleans: the two highest of ``scores`` (B, J) are
    exactly the two ``labels`` (B, 2), in any order."""
    scores, labels, expected = _score_probe()
    result, hint = call_learner(fn, scores.clone(), labels.clone())
    if not hint:
        if not isinstance(result, torch.Tensor) or result.shape != expected.shape:
            hint = f"expected a (B,) = (6,) tensor of booleans, one per image, got {shape_of(result)}"
        else:
            result = result.bool()
            if not torch.equal(result, expected):
                hint = _both_right_hint(result, scores, labels)
    return verdict(hint, "both_right counts an image only when its two top scores are its labels.",
                   quiet=quiet)


def _reconstruction_probe(model: CapsNet) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    capsules = torch.randn(3, model.config.num_classes, model.config.digit_dim,
                           generator=generator) * 0.3  # (3, J, D)
    return capsules, torch.tensor([3, 0, 9])


def _decode(model: CapsNet, masked: torch.Tensor) -> torch.Tensor:
    side = model.config.image_size
    return model.decoder(masked.flatten(1)).view(-1, 1, side, side)  # (B, 1, S, S)


def check_reconstruct_one(fn: Callable[[CapsNet, torch.Tensor, torch.Tensor], torch.Tensor],
                          model: CapsNet, *, quiet: bool = False) -> CheckResult:
    r"""``fn(model, capsules, classes)`` must decode capsules (B, J, D) with every capsule but the
    one of ``classes`` (B,) set to zero: (B, 1, S, S), as ``model.decode(capsules, classes)``."""
    require_capsnet(model)
    capsules, classes = _reconstruction_probe(model)
    original = capsules.clone()
    with torch.no_grad():
        result, hint = call_learner(fn, model, capsules, classes)
        if not hint:
            expected = model.decode(capsules, classes)
            side = model.config.image_size
            keep = torch.nn.functional.one_hot(classes, model.config.num_classes).float()[..., None]
            if not torch.equal(capsules, original):
                hint = "you changed the capsules in place: mask a copy (capsules * mask)"
            elif not isinstance(result, torch.Tensor) or result.shape != expected.shape:
                hint = f"expected (B, 1, {side}, {side}) images, got {shape_of(result)}"
            elif torch.allclose(result, expected, atol=1e-5):
                hint = ""
            elif torch.allclose(result, _decode(model, capsules), atol=1e-5):
                hint = ("nothing was masked: zero every capsule except the chosen class's before "
                        "decoding, or the decoder sees both digits")
            elif torch.allclose(result, _decode(model, capsules * (1 - keep)),
                                atol=1e-5):
                hint = "the mask is inverted: you zeroed the chosen capsule and kept the others"
            elif torch.allclose(result,
                                _decode(model, capsules * keep[:1]), atol=1e-5):
                hint = "every image was masked with the first image's class: use each image's own class"
            else:
                hint = ("the images differ from model.decode(capsules, classes): build a (B, J, 1) "
                        "one-hot mask of classes, multiply, flatten and run model.decoder")
    return verdict(hint, "reconstruct_one decodes the chosen capsule alone, as the paper does.",
                   quiet=quiet)
