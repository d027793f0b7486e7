r"""What every capsedu network is: the contract that the loop, checkpoints and the zoo rely on.

This module imports nothing from capsedu, so that every network module and every layer above
them can depend on it without a cycle.

A capsedu *network* is an ``nn.Module`` with

* ``kind`` - a class attribute, the name that checkpoints and shipped-network JSONs record
  (:mod:`capsedu.nets.registry` maps it to the class);
* ``config_class`` - a frozen dataclass built on :class:`NetworkConfig`; an instance of it is the
  constructor's one argument and the network's ``config`` attribute, stored in checkpoints as
  plain ints, floats, strings and lists (safe for ``weights_only=True``);
* ``class_scores(images) -> (B, J)`` - one score per class, largest for the prediction (capsule
  lengths for a CapsNet, probabilities for a CNN), which :func:`capsedu.predict` uses.

What a network is trained *for* is not part of it: an objective
(:mod:`capsedu.training.objectives`) turns a network, a batch and its targets into a
:class:`Loss`. A network of one's own may carry a ``loss(images, targets) -> Loss`` method
instead, which :func:`capsedu.fit` uses when it is given no objective.

Shape legend:
    B      batch size
    J      classes
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any, ClassVar, NamedTuple, Protocol, runtime_checkable

import torch


class Loss(NamedTuple):
    r"""One batch's training objective and its number of correctly classified images."""

    value: torch.Tensor  # () the loss to backpropagate
    correct: torch.Tensor  # () images of the batch classified right (an integer-valued tensor)


class NetworkConfig:
    r"""Mixin for a network's frozen config dataclass: plain-data round trip for checkpoints.

    ``RENAMED`` maps a field's old name to its new one, so that a config stored under the old
    name (in a checkpoint, a shipped network's JSON record or a study) still loads; a config
    class sets it as a ``ClassVar`` when it renames a field, and never removes an entry.
    """

    RENAMED: ClassVar[dict[str, str]] = {}

    def to_dict(self) -> dict[str, Any]:
        r"""Plain ints/floats/bools/strings/lists (tuples become lists)."""
        return {key: list(value) if isinstance(value, tuple) else value
                for key, value in dataclasses.asdict(self).items()}  # type: ignore[call-overload]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Any:
        r"""Rebuild the config; unknown fields are an error, missing ones take their defaults,
        old names (``RENAMED``) are read as the new ones."""
        fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        both = sorted(old for old, new in cls.RENAMED.items() if old in data and new in data)
        if both:
            raise ValueError(f"config has both the old and the new name of {both} "
                             f"(renamed: {cls.RENAMED})")
        data = {cls.RENAMED.get(key, key): value for key, value in data.items()}
        unknown = sorted(set(data) - set(fields))
        if unknown:
            raise ValueError(f"config has unknown field(s) {unknown}; expected a subset of "
                             f"{sorted(fields)}")
        hints = typing.get_type_hints(cls)
        values = {key: tuple(value) if isinstance(value, list)
                  and typing.get_origin(hints[key]) is tuple else value
                  for key, value in data.items()}
        return cls(**values)


@runtime_checkable
class Network(Protocol):
    r"""The structural type of a capsedu network (see the module docstring)."""

    kind: ClassVar[str]
    config_class: ClassVar[type]
    config: Any

    def class_scores(self, x: torch.Tensor) -> torch.Tensor: ...  # (B, J)
