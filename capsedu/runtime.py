r"""Reproducibility and run profiles: the one place that seeds RNGs and reads ``CAPSEDU_FAST``.

Two profiles exist. The *learner* profile (the default) is the real one: enough data and epochs
to learn something. The *fast* profile (``CAPSEDU_FAST=1``) shrinks data and epochs so that the
test suite can execute every notebook quickly; lessons ask :func:`choose` for each such number
instead of testing for CI themselves.
"""

from __future__ import annotations

import os
import random
from typing import TypeVar

import numpy as np
import torch

T = TypeVar("T")

FAST_ENV = "CAPSEDU_FAST"


def set_seed(seed: int, *, deterministic: bool = True) -> torch.Generator:
    r"""Seed Python, NumPy and PyTorch (CPU and CUDA) and return a seeded ``torch.Generator``.

    With ``deterministic=True`` PyTorch is asked for deterministic kernels where it has them
    (``warn_only``, so operations without one still run).
    """
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    if not 0 <= seed < 2 ** 32:
        raise ValueError(f"seed must be in [0, 2**32), got {seed}")
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # also seeds every CUDA device
    if deterministic:
        torch.use_deterministic_algorithms(True, warn_only=True)
        torch.backends.cudnn.benchmark = False
    return torch.Generator().manual_seed(seed)


def fast_profile() -> bool:
    r"""True when ``CAPSEDU_FAST`` is set to 1/true/yes (the quick test profile)."""
    return os.environ.get(FAST_ENV, "").strip().lower() in {"1", "true", "yes", "on"}


def choose(learner: T, fast: T) -> T:
    r"""Return ``fast`` in the fast profile and ``learner`` otherwise."""
    return fast if fast_profile() else learner


def default_device() -> torch.device:
    r"""CUDA if available, else Apple's MPS, else the CPU."""
    if torch.cuda.is_available():
        return torch.device("cuda")
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")
