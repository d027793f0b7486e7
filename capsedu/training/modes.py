r"""A network's train/eval mode, left as it was found: :func:`eval_mode`.

Shape legend: none (no tensor shapes of its own).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from torch import nn


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
