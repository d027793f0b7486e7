r"""Run profiles: the one place that reads the course's switches from the environment.

Two profiles exist. The *learner* profile (the default) is the real one: enough data and epochs
to learn something. The *fast* profile (``CAPSEDU_FAST=1``) shrinks data and epochs so that the
test suite can execute every notebook quickly; lessons ask :func:`choose` for each such number
instead of testing for CI themselves. :func:`env_flag` reads every on/off switch (also the
checks' ``CAPSEDU_GRADING``).

Shape legend: none (no tensor shapes of its own).
"""

from __future__ import annotations

import os
from typing import TypeVar

T = TypeVar("T")

FAST_ENV = "CAPSEDU_FAST"
TRUE_WORDS = {"1", "true", "yes", "on"}


def env_flag(name: str) -> bool:
    r"""True when the environment variable ``name`` is set to 1/true/yes/on (any case)."""
    return os.environ.get(name, "").strip().lower() in TRUE_WORDS


def fast_profile() -> bool:
    r"""True when ``CAPSEDU_FAST`` is set to 1/true/yes/on (the quick test profile)."""
    return env_flag(FAST_ENV)


def choose(learner: T, fast: T) -> T:
    r"""Return ``fast`` in the fast profile and ``learner`` otherwise."""
    return fast if fast_profile() else learner
