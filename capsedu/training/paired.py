r"""Two classifiers on the *same* images: the paired gap, its standard error and McNemar's exact test.

When two networks answer the same test images, most images are easy for both and a few are hard
for both; only the images where they *disagree* carry information about which is better. Let
``a_i, b_i`` be 1 where network A (B) answers image ``i`` right. The paired gap is the mean of
``d_i = a_i - b_i``; its standard error is :math:`\sqrt{\mathrm{var}(d)/n}`, far smaller than the
unpaired :math:`\sqrt{se_a^2 + se_b^2}` because the shared easy and hard images cancel. McNemar's
exact test asks whether the ``n_ab`` images only A gets right and the ``n_ba`` only B gets right
could be a fair coin's split: a two-sided binomial test of ``n_ab`` out of ``n_ab + n_ba`` at 1/2.

Shapes: ``correct_a``, ``correct_b`` (N,) booleans, one per image, in the same image order.
Pairs of digits (MultiMNIST) share their source digits: :func:`shared_source_se` clusters by digit. :func:`pack_correct` / :func:`unpack_correct` store (N,) booleans in a
JSON record as one short string.

* :func:`compare_paired` -> :class:`PairedComparison`, printed as ``"CapsNet ahead by 0.11 ±
  0.06 points on the same 10,000 images (paired: 23 right only by CapsNet, 12 only by CNN;
  exact McNemar p = 0.09): a tie"``.

Shape legend:
    N      images of a dataset (or pairs, items)
    L      labels per image
"""

from __future__ import annotations

import base64
import math
from dataclasses import dataclass

import numpy as np

from capsedu._numbers import require_int


def _booleans(name: str, values: object) -> np.ndarray:
    r"""``values`` as a (N,) bool array; 0/1 numbers and torch tensors are accepted."""
    if hasattr(values, "detach"):  # a torch tensor
        values = values.detach().cpu().numpy()
    array = np.asarray(values)
    if array.ndim != 1 or array.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D sequence of per-image results, got shape {array.shape}")
    if array.dtype != bool:
        if not np.isin(array, (0, 1)).all():
            raise ValueError(f"{name} must hold booleans or 0/1 (right or wrong per image), got other values")
        array = array.astype(bool)
    return array


@dataclass(frozen=True)
class PairedComparison:
    r"""The outcome of :func:`compare_paired`: counts, the gap A - B, its paired error and McNemar's p."""

    name_a: str
    name_b: str
    images: int
    right_a: int
    right_b: int
    only_a: int  # images A answers right and B wrong
    only_b: int  # images B answers right and A wrong
    digits: int = 2

    @property
    def accuracy_a(self) -> float:
        return self.right_a / self.images

    @property
    def accuracy_b(self) -> float:
        return self.right_b / self.images

    @property
    def gap(self) -> float:
        r"""Accuracy of A minus accuracy of B (a fraction)."""
        return (self.only_a - self.only_b) / self.images

    @property
    def standard_error(self) -> float:
        r"""The paired standard error of :attr:`gap`: :math:`\sqrt{\mathrm{var}(a_i - b_i)/n}`."""
        variance = (self.only_a + self.only_b) / self.images - self.gap ** 2
        return math.sqrt(max(variance, 0.0) / self.images)

    @property
    def p_value(self) -> float:
        r"""McNemar's exact two-sided p: ``only_a`` of the ``only_a + only_b`` disagreements at 1/2."""
        from scipy.stats import binomtest  # imported here: scipy.stats takes a second to import

        changed = self.only_a + self.only_b
        return 1.0 if changed == 0 else float(binomtest(self.only_a, changed, 0.5).pvalue)

    @property
    def tie(self) -> bool:
        r"""The course's rule: a gap under two (paired) standard errors is a tie; so is one the exact
        test cannot tell from chance (p >= 0.05), which matters when few images disagree."""
        return self.gap == 0 or abs(self.gap) < 2 * self.standard_error or self.p_value >= 0.05

    def __str__(self) -> str:
        d = self.digits
        if self.only_a + self.only_b == 0:
            return (f"{self.name_a} and {self.name_b} right on exactly the same {self.images:,} images "
                    f"({100 * self.accuracy_a:.{d}f} %): a tie")
        if self.gap == 0:
            return (f"{self.name_a} and {self.name_b} equal ({100 * self.accuracy_a:.{d}f} %) on the same "
                    f"{self.images:,} images (paired: {self.only_a} right only by each; exact McNemar p = 1): a tie")
        if self.standard_error == 0:  # every image differs, all one way
            return f"{self.name_a if self.gap > 0 else self.name_b} right on every image the other gets wrong"
        leader = self.name_a if self.gap > 0 else self.name_b
        gap, error = 100 * abs(self.gap), 100 * self.standard_error
        verdict = "a tie" if self.tie else f"{abs(self.gap) / self.standard_error:.1f} standard errors"
        return (f"{leader} ahead by {gap:.{d}f} ± {error:.{d}f} points on the same {self.images:,} images "
                f"(paired: {self.only_a} right only by {self.name_a}, {self.only_b} only by {self.name_b}; "
                f"exact McNemar p {_p(self.p_value)}): {verdict}")


def _p(p: float) -> str:
    return f"= {p:.2g}" if p >= 0.001 else "< 0.001"


def compare_paired(name_a: str, correct_a: object, name_b: str, correct_b: object,
                   digits: int = 2) -> PairedComparison:
    r"""Compare two classifiers from their per-image correctness on the *same* images, in the same order.

    ``correct_a``, ``correct_b``: (N,) booleans (or 0/1), one per image. Returns a
    :class:`PairedComparison`; ``print`` it for the course's one-line verdict.
    """
    a, b = _booleans("correct_a", correct_a), _booleans("correct_b", correct_b)
    if a.shape != b.shape:
        raise ValueError(f"correct_a and correct_b must cover the same images: got {a.size} and {b.size} results")
    require_int("digits", digits, minimum=0, maximum=6)
    return PairedComparison(name_a, name_b, int(a.size), int(a.sum()), int(b.sum()),
                            int((a & ~b).sum()), int((b & ~a).sum()), digits)


def shared_source_se(correct: object, sources: object) -> float:
    r"""The standard error of the mean of ``correct`` when items share source units (digits).

    ``correct``: (N,) per-item results; ``sources``: (N, L) integer ids of the units each item is
    made of (a MultiMNIST pair: its L = 2 test digits). Items that share a digit are not
    independent: a hard digit spoils every pair it is in. The variance is the dyadic
    cluster-robust one (each pair a dyad of two digits; Fafchamps & Gubert 2007, Aronow, Samii &
    Assenova 2015), not Cameron, Gelbach & Miller's multi-way clustering: it sums the residuals
    ``e_i = correct_i - mean`` within each digit, squares, and removes the extra copies of each
    item's own term:
    :math:`n^2 V = \sum_d (\sum_{i \ni d} e_i)^2 - \sum_i (k_i - 1) e_i^2` with ``k_i`` the number
    of distinct digits in item ``i``. With no digit shared it is the binomial error exactly.
    """
    values = _booleans("correct", correct).astype(float)
    ids = np.asarray(sources)
    if ids.ndim != 2 or ids.shape[0] != values.size or not np.issubdtype(ids.dtype, np.integer):
        raise ValueError(f"sources must be (N, K) integer ids with N = {values.size}, got {ids.shape} {ids.dtype}")
    residual = values - values.mean()  # (N,)
    distinct = np.sort(ids, axis=1)
    first = np.ones(ids.shape, dtype=bool)
    first[:, 1:] = distinct[:, 1:] != distinct[:, :-1]  # (N, L) each item's digit counted once
    units, index = np.unique(distinct[first], return_inverse=True)
    owners = np.repeat(np.arange(values.size), first.sum(axis=1))  # the item of each (item, digit) entry
    per_unit = np.bincount(index, weights=residual[owners], minlength=len(units))  # one sum per distinct digit
    k = first.sum(axis=1)  # (N,)
    variance = (per_unit ** 2).sum() - ((k - 1) * residual ** 2).sum()
    return float(math.sqrt(max(variance, 0.0)) / values.size)


def pack_correct(correct: object) -> str:
    r"""(N,) booleans as base64 of ``numpy.packbits`` (1,668 characters for 10,000 images): the
    format of the shipped records' ``test_correct`` and the studies' ``correct``."""
    bits = _booleans("correct", correct)
    return base64.b64encode(np.packbits(bits).tobytes()).decode("ascii")


def unpack_correct(text: str, count: int) -> np.ndarray:
    r"""The (``count``,) bool array :func:`pack_correct` stored in ``text``."""
    require_int("count", count, minimum=1)
    if not isinstance(text, str):
        raise ValueError(f"text must be the base64 string pack_correct wrote, got {type(text).__name__}")
    packed = np.frombuffer(base64.b64decode(text), dtype=np.uint8)
    if len(packed) != (count + 7) // 8:
        raise ValueError(f"text holds {len(packed) * 8} bits, not the {count} results asked for (count)")
    return np.unpackbits(packed, count=count).astype(bool)
