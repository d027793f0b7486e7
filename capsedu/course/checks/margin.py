r"""Checks for lesson 04 (the margin loss, Sabour et al. 2017, Eq. 4).

Shape legend:
    B      batch size
    J      number of classes (digit capsules)

:func:`check_margin_loss` compares the learner's loss with ``capsedu.margin_loss`` and, when it
differs, with the typical mistakes - among them the two bugs peers make most often: a hinge that
is not squared and a missing lambda on the absent-class term - so the hint names the bug.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from capsedu.course.checks._kit import CheckResult, call_learner, shape_of, verdict
from capsedu.nets.losses import margin_loss

_SEED = 20171026


def _variant(lengths: torch.Tensor, present: torch.Tensor, *, pos_power: int = 2,
             neg_power: int = 2, lam_neg: float = 0.5, lam_pos: float = 1.0,
             m_pos: float = 0.9, m_neg: float = 0.1, hinge: bool = True,
             class_reduce: str = "sum", batch_reduce: str = "mean") -> torch.Tensor:
    r"""Eq. 4 with one knob per typical bug; ``present`` is the multi-hot T, (B, J)."""
    clip = torch.relu if hinge else (lambda x: x)
    loss = (lam_pos * present * clip(m_pos - lengths) ** pos_power
            + lam_neg * (1 - present) * clip(lengths - m_neg) ** neg_power)  # (B, J)
    per_image = loss.sum(dim=1) if class_reduce == "sum" else loss.mean(dim=1)  # (B,)
    return per_image.mean() if batch_reduce == "mean" else per_image.sum()


UNSQUARED_HINT = ("the hinge is not squared: Eq. 4 uses max(0, m+ - ||v||)**2 and "
                  "max(0, ||v|| - m-)**2 - square both terms")
MISSING_LAMBDA_HINT = ("the absent-class term is not down-weighted: multiply "
                       "(1 - T) * max(0, ||v|| - m-)**2 by lambda = 0.5")

_BUGS: list[tuple[dict, str]] = [
    ({"pos_power": 1, "neg_power": 1}, UNSQUARED_HINT),
    ({"pos_power": 1}, "the present-class hinge max(0, m+ - ||v||) is not squared"),
    ({"neg_power": 1}, "the absent-class hinge max(0, ||v|| - m-) is not squared"),
    ({"lam_neg": 1.0}, MISSING_LAMBDA_HINT),
    ({"lam_neg": 1.0, "lam_pos": 0.5}, ("lambda multiplies the wrong term: it belongs to the "
                                       "absent classes (1 - T), not the present ones (T)")),
    ({"m_pos": 0.1, "m_neg": 0.9}, ("the margins are swapped: present classes should be pushed "
                                   "above m+ = 0.9 and absent ones below m- = 0.1")),
    ({"hinge": False}, ("the max(0, .) is missing: without it a present class longer than 0.9 "
                       "(or an absent one shorter than 0.1) is still penalised")),
    ({"class_reduce": "mean"}, ("you averaged over the classes: Eq. 4 is summed over the J "
                               "classes (then averaged over the batch)")),
    ({"batch_reduce": "sum"}, ("you summed over the batch: sum over classes, then take the "
                              "mean over the B images")),
]


def _inputs() -> tuple[torch.Tensor, torch.Tensor]:
    r"""Random lengths in [0, 1) and multi-hot targets with one or two present classes."""
    generator = torch.Generator().manual_seed(_SEED)
    lengths = torch.rand(6, 10, generator=generator)  # (B, J)
    present = torch.zeros(6, 10)  # (B, J)
    present[torch.arange(6), torch.randint(0, 10, (6,), generator=generator)] = 1.0
    present[0, (present[0].argmax() + 3) % 10] = 1.0  # image 0 holds two digits
    return lengths, present


def _margin_hint(loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> str:
    lengths, present = _inputs()
    loss, hint = call_learner(loss_fn, lengths.clone(), present.clone(), what="your loss")
    if hint:
        return hint
    if not isinstance(loss, torch.Tensor) or loss.dim() != 0:
        return ("return a scalar tensor (0-D): sum over the classes, then .mean() over the batch; "
                f"got {shape_of(loss)}")
    if _same(loss, margin_loss(lengths, present)):
        return ""
    return next((hint for options, hint in _BUGS if _same(loss, _variant(lengths, present, **options))),
                "the value differs from Eq. 4: L_k = T_k max(0, 0.9 - ||v_k||)**2 + 0.5 (1 - T_k) "
                "max(0, ||v_k|| - 0.1)**2, summed over k, mean over the batch")


def check_margin_loss(loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
                      *, quiet: bool = False) -> CheckResult:
    r"""Check ``loss_fn(lengths (B, J), targets (B, J) multi-hot) -> scalar`` against Eq. 4."""
    return verdict(_margin_hint(loss_fn), "your margin loss matches Eq. 4 (capsedu.margin_loss)",
                   quiet=quiet)


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return torch.allclose(a.detach().double(), b.double(), rtol=1e-5, atol=1e-7)


def _multi_hot_hint(multi_hot_fn: Callable[[Sequence[Sequence[int]], int], torch.Tensor]) -> str:
    label_lists, num_classes = [[3], [1, 7], [0, 9, 4], [5, 5]], 10
    expected = torch.zeros(4, num_classes)  # (B, J)
    for row, labels in enumerate(label_lists):
        expected[row, labels] = 1.0
    targets, hint = call_learner(multi_hot_fn, label_lists, num_classes)
    if hint:
        return hint
    if not isinstance(targets, torch.Tensor) or tuple(targets.shape) != (4, num_classes):
        return f"expected a (B, J) = (4, {num_classes}) tensor, got {shape_of(targets)}"
    if not targets.is_floating_point():
        return (f"T must be floating point (it multiplies the loss), got {targets.dtype}: use "
                "torch.zeros(..., dtype=torch.float32)")
    if torch.equal(targets, expected):
        return ""
    if targets.max() > 1:
        return ("an entry is above 1: a digit listed twice ([5, 5]) is still just present - set T "
                "to 1, do not add")
    if torch.equal(targets.sum(dim=1), torch.ones(4)):
        return "only one class per image is set: mark every label in each list, e.g. [1, 7] -> T_1 = T_7 = 1"
    return "some entries are wrong: row b must be 1 exactly at the classes in label_lists[b] and 0 elsewhere"


def check_multi_hot(multi_hot_fn: Callable[[Sequence[Sequence[int]], int], torch.Tensor],
                    *, quiet: bool = False) -> CheckResult:
    r"""Check ``multi_hot_fn(label_lists, num_classes) -> (B, J)`` float multi-hot targets T."""
    return verdict(_multi_hot_hint(multi_hot_fn),
                   "multi-hot targets are right, including images with 2 or 3 digits", quiet=quiet)
