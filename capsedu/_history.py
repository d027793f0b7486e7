r"""What a training run records: :class:`History`, one column per quantity, one entry per epoch.

Both training loops return it: :func:`capsedu.fit` (torch) and
:func:`capsedu.nets.numpy_classifier.fit` (NumPy, lesson 10). It imports nothing, so that the
NumPy-only modules can use it without importing torch. Columns with the same meaning have the
same name in both: ``epoch``, ``train_loss``, ``train_accuracy``, ``train_seconds`` (the
training pass of that epoch alone).

Shape legend:
    E      epochs recorded (every column holds E entries)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class History(dict):
    r"""Per-epoch columns, ``{name: [value of epoch 1, value of epoch 2, ...]}``: a plain ``dict``
    of lists (``history["train_loss"][-1]`` is the last epoch's mean training loss; ``json.dumps``
    writes it as it is), with :meth:`append` to add an epoch and :meth:`last` to read one."""

    def append(self, record: Mapping[str, Any]) -> None:
        r"""Add one epoch: each value of ``record`` goes at the end of its column (a new name
        starts a new column)."""
        if not isinstance(record, Mapping):
            raise TypeError(f"record must be a mapping of column names to one epoch's values, "
                            f"got {type(record).__name__}")
        for name, value in record.items():
            self.setdefault(name, []).append(value)

    def last(self) -> dict[str, Any]:
        r"""The last epoch's values, ``{name: column[-1]}`` (empty before the first epoch)."""
        return {name: column[-1] for name, column in self.items() if column}

    def __getitem__(self, name: str) -> list:
        if isinstance(name, int):  # a list of per-epoch records used to be indexed this way
            raise TypeError(f"a History holds columns, not epochs: history[name][{name}] (e.g. "
                            f"history['train_loss'][{name}]) or history.last(); got "
                            f"history[{name}]")
        return super().__getitem__(name)
