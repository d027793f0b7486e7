r"""Network kinds: what every network of capsedu offers, so that one loop trains, saves and ships it.

A capsedu network is an ``nn.Module`` with these things:

* ``kind`` - a class attribute, the name that checkpoints and shipped-network JSONs record;
* ``config_class`` - a frozen dataclass built on :class:`NetworkConfig`; an instance of it is the
  constructor's one argument and the network's ``config`` attribute, stored in checkpoints as
  plain ints, floats, strings and lists (safe for ``weights_only=True``);
* ``loss(images, targets) -> Loss`` - its training objective for one batch and how many of the
  batch's images it got right (the network knows what "right" means for its targets);
* ``class_scores(images) -> (B, J)`` - one score per class, largest for the prediction (capsule
  lengths for a CapsNet, probabilities for a CNN), which :func:`capsedu.predict` uses.

:func:`capsedu.fit`, :func:`capsedu.predict`, :func:`capsedu.save_checkpoint` /
:func:`capsedu.load_checkpoint` and :func:`capsedu.pretrained` use nothing else. The course's networks are listed in
:func:`network_class`; :func:`register_network` adds another kind (a learner's own network, a
test's toy network).

Shape legend:
    B      batch size
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any, NamedTuple

import torch
from torch import nn


class Loss(NamedTuple):
    r"""One batch's training objective and its number of correctly classified images."""

    value: torch.Tensor  # () the loss to backpropagate
    correct: torch.Tensor  # () images of the batch classified right (an integer-valued tensor)


class NetworkConfig:
    r"""Mixin for a network's frozen config dataclass: plain-data round trip for checkpoints."""

    def to_dict(self) -> dict[str, Any]:
        r"""Plain ints/floats/bools/strings/lists (tuples become lists)."""
        return {key: list(value) if isinstance(value, tuple) else value
                for key, value in dataclasses.asdict(self).items()}  # type: ignore[call-overload]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Any:
        r"""Rebuild the config; unknown fields are an error, missing ones take their defaults."""
        fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        unknown = sorted(set(data) - set(fields))
        if unknown:
            raise ValueError(f"config has unknown field(s) {unknown}; expected a subset of "
                             f"{sorted(fields)}")
        hints = typing.get_type_hints(cls)
        values = {key: tuple(value) if isinstance(value, list)
                  and typing.get_origin(hints[key]) is tuple else value
                  for key, value in data.items()}
        return cls(**values)


_EXTRA: dict[str, type[nn.Module]] = {}


def _course_networks() -> dict[str, type[nn.Module]]:
    from capsedu.nets.capsnet import CapsNet
    from capsedu.nets.cnn import BaselineCNN
    from capsedu.nets.efficient_capsnet import EfficientCapsNet
    from capsedu.nets.matrix_capsnet import MatrixCapsNet

    return {cls.kind: cls for cls in (CapsNet, BaselineCNN, MatrixCapsNet, EfficientCapsNet)}


def register_network(cls: type[nn.Module]) -> type[nn.Module]:
    r"""Make ``cls`` (with ``kind``, ``config_class`` and ``loss``) known by its kind."""
    kind = getattr(cls, "kind", None)
    if not isinstance(kind, str) or not kind:
        raise TypeError(f"cls must have a class attribute kind (a non-empty str), got {kind!r}")
    if not issubclass(getattr(cls, "config_class", object), NetworkConfig):
        raise TypeError(f"{cls.__name__}.config_class must be a NetworkConfig dataclass")
    if not callable(getattr(cls, "loss", None)):
        raise TypeError(f"{cls.__name__} must have a loss(images, targets) method")
    if kind in _course_networks():
        raise ValueError(f"kind {kind!r} is taken by capsedu's {_course_networks()[kind].__name__}")
    _EXTRA[kind] = cls
    return cls


def network_class(kind: str) -> type[nn.Module]:
    r"""The network class registered under ``kind``."""
    known = {**_course_networks(), **_EXTRA}
    if kind not in known:
        raise ValueError(f"unknown network kind {kind!r}; known kinds: {sorted(known)}")
    return known[kind]


def check_network(model: object, name: str = "model") -> nn.Module:
    r"""Raise ``TypeError`` unless ``model`` is an instance of a registered network kind."""
    kind = getattr(type(model), "kind", None)
    known = {**_course_networks(), **_EXTRA}
    if not isinstance(model, nn.Module) or known.get(kind) is not type(model):
        raise TypeError(f"{name} must be a capsedu network (one of {sorted(known)}, e.g. "
                        f"capsedu.CapsNet), got {type(model).__name__}")
    return model


def build_network(kind: str, config: dict[str, Any]) -> nn.Module:
    r"""A fresh network of ``kind`` from its config dict (as stored in a checkpoint)."""
    cls = network_class(kind)
    return cls(cls.config_class.from_dict(config))
