r"""How sure an accuracy is: binomial standard errors, and comparisons that say when a gap is a tie.

An accuracy ``p`` measured on ``n`` independent test images has the standard error
:math:`\sqrt{p(1 - p)/n}`: on the 10,000 MNIST test images, 99.5 % is 99.5 ± 0.07 %, and on
1,000 images 98 % is 98.0 ± 0.44 %. Two accuracies measured on *different* images differ by a
gap with standard error :math:`\sqrt{se_a^2 + se_b^2}`; the course calls a gap smaller than two
of those a **tie**. Two networks measured on the *same* images are correlated - both get the easy
digits right - so for them this error is too large: compare them paired, from their per-image
results, with :func:`capsedu.training.paired.compare_paired`.

* :func:`standard_error` - of one accuracy;
* :func:`with_error` - ``"99.50 ± 0.07 %"``;
* :func:`compare_accuracies` - ``"CapsNet ahead by 0.40 ± 0.90 points: a tie"`` (different images).

Shape legend: none (no tensor shapes of its own).
"""

from __future__ import annotations

import math

from capsedu._numbers import require_int, require_number


def standard_error(accuracy: float, n: int) -> float:
    r"""The binomial standard error of ``accuracy`` (a fraction in [0, 1]) measured on ``n`` items."""
    p = require_number("accuracy", accuracy, low=0.0, high=1.0)
    require_int("n", n, minimum=1)
    return math.sqrt(p * (1 - p) / n)


def with_error(accuracy: float, n: int, digits: int = 2) -> str:
    r"""``accuracy`` as a percentage with its standard error: ``"98.76 ± 0.11 %"``."""
    return f"{100 * accuracy:.{digits}f} ± {100 * standard_error(accuracy, n):.{digits}f} %"


def compare_accuracies(name_a: str, accuracy_a: float, n_a: int, name_b: str, accuracy_b: float, n_b: int,
            digits: int = 2) -> str:
    r"""Which of two accuracies measured on *different* images is ahead, by how many points ± the
    gap's (unpaired) standard error, and whether that is a tie (a gap under two standard errors). Equal accuracies are a tie, also
    when both are 0 or 1 (where the binomial standard error is 0)."""
    gap = accuracy_a - accuracy_b
    error = math.hypot(standard_error(accuracy_a, n_a), standard_error(accuracy_b, n_b))
    if gap == 0:
        return f"{name_a} and {name_b} equal ({100 * accuracy_a:.{digits}f} %): a tie"
    leader = name_a if gap > 0 else name_b
    if error == 0:  # one is 0 and the other 1: every image differs
        verdict = "no sampling error to measure it by (both accuracies are 0 or 1)"
    else:
        verdict = "a tie" if abs(gap) < 2 * error else f"{abs(gap) / error:.1f} standard errors"
    return f"{leader} ahead by {100 * abs(gap):.{digits}f} ± {100 * error:.{digits}f} points: {verdict}"
