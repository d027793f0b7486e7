r"""Checks for lesson 04 (the margin loss, Sabour et al. 2017, Eq. 4).

Shape legend:
    B      batch size
    J      number of classes (digit capsules)
    N      images of a dataset (or pairs, items)
    D      a capsule's dimension

:func:`check_margin_loss` compares the learner's loss with ``capsedu.margin_loss`` and, when it
differs, with the typical mistakes - among them the unsquared hinge of the labml annotated
implementation, lambda on the wrong term and a sum over the batch - so the hint names the bug.
:func:`check_capsule_margin_loss` checks a loss that takes the capsules v (B, J, D) and also
catches a bare ``sqrt`` (NaN gradients at a zero capsule); :func:`check_pull` checks the slope
-dL_k/d||v_k|| for a present or absent class, with the squared or the unsquared hinge.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from capsedu.course.checks._kit import (
    CheckResult,
    call_learner,
    mistake,
    other,
    reworded,
    shape_of,
    verdict,
)
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


UNSQUARED_HINT = mistake("hinge-not-squared",
                         "the hinge is not squared: Eq. 4 uses max(0, m+ - ||v||)**2 and "
                         "max(0, ||v|| - m-)**2 - square both terms")
MISSING_LAMBDA_HINT = mistake("lambda-missing",
                              "the absent-class term is not down-weighted: multiply "
                              "(1 - T) * max(0, ||v|| - m-)**2 by lambda = 0.5")

_BUGS: list[tuple[dict, str]] = [
    ({"pos_power": 1, "neg_power": 1}, UNSQUARED_HINT),
    ({"pos_power": 1}, mistake("present-hinge-not-squared",
                               "the present-class hinge max(0, m+ - ||v||) is not squared")),
    ({"neg_power": 1}, mistake("absent-hinge-not-squared",
                               "the absent-class hinge max(0, ||v|| - m-) is not squared")),
    ({"lam_neg": 1.0}, MISSING_LAMBDA_HINT),
    ({"lam_neg": 1.0, "lam_pos": 0.5}, mistake("lambda-on-wrong-term",
                                               "lambda multiplies the wrong term: it belongs to "
                                               "the absent classes (1 - T), not the present ones "
                                               "(T)")),
    ({"m_pos": 0.1, "m_neg": 0.9}, mistake("margins-swapped",
                                           "the margins are swapped: present classes should be "
                                           "pushed above m+ = 0.9 and absent ones below m- = 0.1")),
    ({"hinge": False}, mistake("hinge-missing",
                               "the max(0, .) is missing: without it a present class longer than "
                               "0.9 (or an absent one shorter than 0.1) is still penalised")),
    ({"class_reduce": "mean"}, mistake("mean-over-classes",
                                       "you averaged over the classes: Eq. 4 is summed over the J "
                                       "classes (then averaged over the batch)")),
    ({"batch_reduce": "sum"}, mistake("sum-over-batch",
                                      "you summed over the batch: sum over classes, then take the "
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
        return other("shape",
                     "return a scalar tensor (0-D): sum over the classes, then .mean() over the "
                     f"batch; got {shape_of(loss)}")
    if _same(loss, margin_loss(lengths, present)):
        return ""
    return next((hint for options, hint in _BUGS if _same(loss, _variant(lengths, present, **options))),
                other("values", "the value differs from Eq. 4: L_k = T_k max(0, 0.9 - ||v_k||)**2 "
                      "+ 0.5 (1 - T_k) max(0, ||v_k|| - 0.1)**2, summed over k, mean over the "
                      "batch"))


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
        return other("shape",
                     f"expected a (B, J) = (4, {num_classes}) tensor, got {shape_of(targets)}")
    if not targets.is_floating_point():
        return other("dtype",
                     f"T must be floating point (it multiplies the loss), got {targets.dtype}: use "
                     "torch.zeros(..., dtype=torch.float32)")
    if torch.equal(targets, expected):
        return ""
    if targets.max() > 1:
        return mistake("label-counted-twice",
                       "an entry is above 1: a digit listed twice ([5, 5]) is still just present - "
                       "set T to 1, do not add")
    if torch.equal(targets.sum(dim=1), torch.ones(4)):
        return mistake("one-class-per-image",
                       "only one class per image is set: mark every label in each list, e.g. [1, "
                       "7] -> T_1 = T_7 = 1")
    return other("values",
                 "some entries are wrong: row b must be 1 exactly at the classes in label_lists[b] "
                 "and 0 elsewhere")


def check_multi_hot(multi_hot_fn: Callable[[Sequence[Sequence[int]], int], torch.Tensor],
                    *, quiet: bool = False) -> CheckResult:
    r"""Check ``multi_hot_fn(label_lists, num_classes) -> (B, J)`` float multi-hot targets T."""
    return verdict(_multi_hot_hint(multi_hot_fn),
                   "multi-hot targets are right, including images with 2 or 3 digits", quiet=quiet)


# --- Exercise: a margin loss that takes the capsules themselves (the labml peer, fixed) -------

SQRT_EPS_HINT = mistake("bare-sqrt-nan-gradient",
                        "a zero capsule gives NaN gradients: the slope of sqrt at 0 is infinite. "
                        "Put a small eps inside the root, torch.sqrt((v ** 2).sum(-1) + eps), as "
                        "lesson 01's squash does, or use v.norm(dim=-1), whose gradient PyTorch "
                        "sets to 0 at a zero vector")


def _capsule_inputs() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    r"""Capsules v (B, J, D) with known lengths, class indices (B,), their lengths (B, J).

    One present and one absent capsule are exactly zero, where a bare sqrt has no gradient.
    """
    lengths, present = _inputs()
    labels = present.argmax(dim=1)  # (B,) the first present class
    generator = torch.Generator().manual_seed(_SEED + 1)
    directions = torch.randn(*lengths.shape, 4, generator=generator)  # (B, J, D)
    directions = directions / directions.norm(dim=-1, keepdim=True)  # (B, J, D) unit vectors
    lengths[1, labels[1]] = 0.0  # a present capsule of length 0
    lengths[2, (labels[2] + 1) % 10] = 0.0  # an absent one
    return lengths[..., None] * directions, labels, lengths  # (B, J, D), (B,), (B, J)


def _capsule_margin_hint(loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> str:
    v, labels, lengths = _capsule_inputs()
    v = v.clone().requires_grad_(True)  # (B, J, D)
    loss, hint = call_learner(loss_fn, v, labels.clone(), what="your loss")
    if hint:
        return hint
    if not isinstance(loss, torch.Tensor) or loss.dim() != 0:
        return other("shape",
                     f"return a scalar tensor (0-D), the mean over the batch; got {shape_of(loss)}")
    present = torch.nn.functional.one_hot(labels, lengths.shape[1]).float()  # (B, J)
    same = lambda a, b: torch.allclose(a.detach().double(), b.double(), rtol=1e-4, atol=1e-6)  # noqa: E731
    if not same(loss, margin_loss(lengths, present)):
        return next((hint for options, hint in _BUGS if same(loss, _variant(lengths, present, **options))),
                    other("values", "the value differs from Eq. 4 with ||v_k|| computed from the "
                          "capsules: take the length over the last dimension, then L_k summed over "
                          "k, mean over the batch"))
    if not loss.requires_grad:
        return mistake("loss-detached",
                       "the loss is detached from v: compute it from v with torch operations (no "
                       ".item(), no numpy)")
    (grad,) = torch.autograd.grad(loss, v)
    if not torch.isfinite(grad).all():
        return SQRT_EPS_HINT
    return ""


def check_capsule_margin_loss(loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
                              *, quiet: bool = False) -> CheckResult:
    r"""Check ``loss_fn(v (B, J, D) capsules, labels (B,)) -> scalar``: Eq. 4, finite gradients."""
    return verdict(_capsule_margin_hint(loss_fn),
                   "Eq. 4 from the capsules themselves, with finite gradients even at a zero capsule",
                   quiet=quiet)


# --- Exercise: how hard the loss pulls a capsule's length --------------------------------------

PullFn = Callable[[torch.Tensor, bool, float, bool], torch.Tensor]
M_POS_DEFAULT, M_NEG_DEFAULT = 0.9, 0.1
_PULL_LENGTHS = torch.tensor([0.0, 0.05, 0.2, 0.5, 0.8, 0.88, 0.93, 0.99])  # (N,) off the kinks


def reference_pull(lengths: torch.Tensor, present: bool, lam: float = 0.5,
                   squared: bool = True) -> torch.Tensor:
    r"""-dL_k/d||v_k|| of Eq. 4 (or its unsquared-hinge variant) by autograd: (N,) -> (N,)."""
    x = lengths.detach().clone().double().requires_grad_(True)  # (N,)
    power = 2 if squared else 1
    loss = (torch.relu(M_POS_DEFAULT - x) ** power if present
            else lam * torch.relu(x - M_NEG_DEFAULT) ** power).sum()
    (grad,) = torch.autograd.grad(loss, x)
    return (-grad).to(lengths.dtype)  # (N,)



def _pull_mistakes(x: torch.Tensor, present: bool, lam: float, squared: bool) -> list[tuple[torch.Tensor, str]]:
    right = reference_pull(x, present, lam, squared)  # (N,)
    inside = (x < M_POS_DEFAULT) if present else (x > M_NEG_DEFAULT)  # (N,)
    gap = (M_POS_DEFAULT - x) if present else (x - M_NEG_DEFAULT)  # (N,)
    weight = 1.0 if present else lam
    sign = 1.0 if present else -1.0
    return [
        (-right, mistake("slope-not-pull", "that is the slope dL/d||v||; the pull is its negative "
                         "(> 0 lengthens the capsule, < 0 shortens it)")),
        (right / 2 if squared else 2 * right,
         mistake("wrong-factor", "check the factor: the slope of x**2 is 2x, the slope of x is 1")),
        (sign * right.abs() * (lam if present else 1 / lam),
         mistake("lambda-on-present-class",
                 "lambda scales the absent classes only: a present class's pull has no lambda")),
        (sign * weight * (2 * gap if squared else torch.ones_like(x)),
         mistake("pull-outside-margin", "outside the margin the loss is flat (present above 0.9, "
                 "absent below 0.1): the pull is 0 there")),
        (sign * weight * inside * gap ** (2 if squared else 1),
         mistake("loss-not-slope", "that is the loss L_k itself, not its slope")),
        (reference_pull(x, present, 0.5, squared),
         mistake("fixed-lambda", "use the lam argument, not a fixed 0.5")),
    ]


def _pull_hint(fn: PullFn) -> str:
    x = _PULL_LENGTHS.clone()
    for present in (True, False):
        for squared in (True, False):
            for lam in (0.3, 1.0):
                args = (x.clone(), present, lam, squared)
                what = f"pull(lengths, present={present}, lam={lam}, squared={squared})"
                got, hint = call_learner(fn, *args, what=what)
                if hint:
                    return hint
                right = reference_pull(*args)
                if not isinstance(got, torch.Tensor) or got.shape != right.shape:
                    return other("shape",
                                 f"{what}: return one pull per length, shape {tuple(right.shape)}; "
                                 f"got {shape_of(got)}")
                if torch.allclose(got.detach().double(), right.double(), atol=1e-5):
                    continue
                hint = next((h for wrong, h in _pull_mistakes(x, present, lam, squared)
                             if torch.allclose(got.detach().double(), wrong.double(), atol=1e-5)),
                            other("values", f"at lengths {[round(v, 2) for v in x.tolist()]} the "
                                  f"pull is {[round(v, 3) for v in right.tolist()]}, you gave "
                                  f"{[round(v, 3) for v in got.detach().tolist()]}"))
                return reworded(hint, f"{what}: {hint}")
    return ""


def check_pull(fn: PullFn, *, quiet: bool = False) -> CheckResult:
    r"""Check ``fn(lengths (N,), present, lam, squared) -> (N,)`` is -dL_k/d||v_k|| (Eq. 4 or unsquared)."""
    return verdict(_pull_hint(fn), "your pull is -dL_k/d||v_k|| for both classes, squared or not, any lambda",
                   quiet=quiet)
