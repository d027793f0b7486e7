r"""Reproducibility: the one place that seeds the random number generators.

Shape legend: none (no tensor shapes of its own).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import torch

from capsedu._validate import require_int


def set_seed(seed: int) -> torch.Generator:
    r"""Seed Python, NumPy and PyTorch (CPU and CUDA) and return a seeded ``torch.Generator``.

    It changes nothing else: for deterministic GPU kernels as well, run the code inside
    :func:`deterministic_algorithms` (on a CPU, the course's operations are deterministic).
    """
    require_int("seed", seed, minimum=0, maximum=2 ** 32 - 1)
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
