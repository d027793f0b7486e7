r"""Reproducibility, run profiles and devices: the one place that seeds RNGs and reads ``CAPSEDU_FAST``.

Two profiles exist. The *learner* profile (the default) is the real one: enough data and epochs
to learn something. The *fast* profile (``CAPSEDU_FAST=1``) shrinks data and epochs so that the
test suite can execute every notebook quickly; lessons ask :func:`choose` for each such number
instead of testing for CI themselves.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import random
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TypeVar

import numpy as np
import torch
from torch import nn

T = TypeVar("T")

FAST_ENV = "CAPSEDU_FAST"


def set_seed(seed: int) -> torch.Generator:
    r"""Seed Python, NumPy and PyTorch (CPU and CUDA) and return a seeded ``torch.Generator``.

    It changes nothing else: for deterministic GPU kernels as well, run the code inside
    :func:`deterministic_algorithms` (on a CPU, the course's operations are deterministic).
    """
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    if not 0 <= seed < 2 ** 32:
        raise ValueError(f"seed must be in [0, 2**32), got {seed}")
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # also seeds every CUDA device
    return torch.Generator().manual_seed(seed)


@contextmanager
def deterministic_algorithms() -> Iterator[None]:
    r"""Ask PyTorch for deterministic kernels inside the ``with`` block, then restore the settings.

    ``warn_only=True``: an operation without a deterministic kernel still runs, with a warning.
    """
    before = (torch.are_deterministic_algorithms_enabled(),
              torch.is_deterministic_algorithms_warn_only_enabled(), torch.backends.cudnn.benchmark)
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cudnn.benchmark = False
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(before[0], warn_only=before[1])
        torch.backends.cudnn.benchmark = before[2]


@contextmanager
def eval_mode(model: nn.Module) -> Iterator[nn.Module]:
    r"""Put ``model`` in eval mode inside the ``with`` block, then restore every submodule's mode."""
    modes = [(module, module.training) for module in model.modules()]
    model.eval()
    try:
        yield model
    finally:
        for module, training in modes:
            module.training = training


_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # mallopt parameters, <malloc.h>


def reuse_large_allocations(limit_bytes: int = 1 << 30) -> bool:
    r"""Let glibc keep freed blocks of up to ``limit_bytes`` for reuse; True if it was set.

    By default glibc gives every block above 32 MiB straight back to the operating system when
    it is freed, so the next tensor of that size costs fresh pages and a page fault per 4 KiB.
    EM routing's votes and their squared deviations (about 60 MB each at batch 32 in lesson 11's
    network) are allocated and freed several times a step: on this course's 2-core machine a
    training step of :class:`capsedu.nets.matrix_capsnet.MatrixCapsNet` went from 1.05 s to
    0.50 s with this setting (the CapsNet, whose tensors are smaller, gains nothing measurable).
    The price: memory freed by PyTorch stays with the process (its resident size stays at its
    peak) instead of going back to the system. It changes the whole process, so it is a
    function you call, not something importing capsedu does; on anything but Linux with glibc
    it does nothing and returns False.
    """
    if isinstance(limit_bytes, bool) or not isinstance(limit_bytes, int) or not 0 < limit_bytes < 1 << 31:
        raise ValueError(f"limit_bytes must be an int in (0, 2**31), got {limit_bytes!r}")
    if not sys.platform.startswith("linux") or ctypes.util.find_library("c") is None:
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"))
        return bool(libc.mallopt(_M_MMAP_THRESHOLD, limit_bytes)
                    and libc.mallopt(_M_TRIM_THRESHOLD, 2 * limit_bytes - 1))
    except (OSError, AttributeError):  # not glibc (musl has no mallopt)
        return False


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
