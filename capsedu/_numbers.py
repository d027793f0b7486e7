r"""Checks of plain numbers: integers and reals in a range, with errors that name the argument.

It imports nothing but the standard library, so that the NumPy-only modules of lesson 10
(:mod:`capsedu.nets.numpy_caps`, :mod:`capsedu.nets.numpy_classifier`) check their arguments
the same way as the rest of capsedu (:mod:`capsedu._validate` re-exports both functions).

Shape legend: none (no tensor shapes of its own).
"""

from __future__ import annotations


def require_int(name: str, value: object, *, minimum: int, maximum: int | None = None) -> int:
    r"""Check that ``value`` is an integer (not a bool) in [``minimum``, ``maximum``].

    A value of another type raises ``TypeError``, an integer out of range ``ValueError``.
    """
    wanted = f">= {minimum}" if maximum is None else f"in [{minimum}, {maximum}]"
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int {wanted}, got {type(value).__name__} {value!r}")
    if value < minimum or (maximum is not None and value > maximum):
        raise ValueError(f"{name} must be {wanted}, got {value}")
    return value


def require_number(name: str, value: object, *, low: float, high: float) -> float:
    r"""Check that ``value`` is a real number (not a bool) in [``low``, ``high``]; return it as a float."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise ValueError(f"{name} must be a number in [{low}, {high}], got {value!r}")
    return float(value)
