r"""Network kinds: the table from a checkpoint's ``kind`` to the class that builds it.

The course's networks are listed in :data:`COURSE_NETWORKS` as ``"module:Class"`` strings and
imported on first use, so this module imports no network (and no network imports it for
anything but :func:`register_network`'s checks): adding a network to the course is one new
module in :mod:`capsedu.nets` and one line here. :func:`register_network` adds a kind at run time
(a learner's own network, a test's toy network).

Only checkpoints (:mod:`capsedu.training.checkpoint`) and the zoo need a network's kind:
:func:`capsedu.fit`, :func:`capsedu.evaluate` and :func:`capsedu.predict` take any module.

Shape legend: none (no tensor shapes of its own).
"""

from __future__ import annotations

import importlib
from typing import Any

from torch import nn

from capsedu.nets.contract import NetworkConfig

COURSE_NETWORKS: dict[str, str] = {
    "capsnet": "capsedu.nets.capsnet:CapsNet",
    "cnn": "capsedu.nets.cnn:BaselineCNN",
    "em": "capsedu.nets.matrix_capsnet:MatrixCapsNet",
    "efficient": "capsedu.nets.efficient_capsnet:EfficientCapsNet",
    "deep_capsnet": "capsedu.nets.deep_capsnet:DeepCapsNet",
}
_EXTRA: dict[str, type[nn.Module]] = {}


def _resolve(location: str) -> type[nn.Module]:
    module, _, name = location.partition(":")
    return getattr(importlib.import_module(module), name)


def register_network(cls: type[nn.Module]) -> type[nn.Module]:
    r"""Make ``cls`` (with ``kind``, ``config_class`` and ``class_scores``) known by its kind."""
    kind = getattr(cls, "kind", None)
    if not isinstance(kind, str) or not kind:
        raise TypeError(f"cls must have a class attribute kind (a non-empty str), got {kind!r}")
    if not issubclass(getattr(cls, "config_class", object), NetworkConfig):
        raise TypeError(f"{cls.__name__}.config_class must be a NetworkConfig dataclass")
    if not callable(getattr(cls, "class_scores", None)):
        raise TypeError(f"{cls.__name__} must have a class_scores(images) method")
    if kind in COURSE_NETWORKS:
        raise ValueError(f"kind {kind!r} is taken by capsedu's {COURSE_NETWORKS[kind]}")
    _EXTRA[kind] = cls
    return cls


def known_kinds() -> list[str]:
    r"""Every kind a checkpoint may name: the course's and the registered ones."""
    return sorted({*COURSE_NETWORKS, *_EXTRA})


def network_class(kind: str) -> type[nn.Module]:
    r"""The network class registered under ``kind``."""
    if kind in COURSE_NETWORKS:
        return _resolve(COURSE_NETWORKS[kind])
    if kind in _EXTRA:
        return _EXTRA[kind]
    raise ValueError(f"unknown network kind {kind!r}; known kinds: {known_kinds()}")


def require_registered(model: object, name: str = "model") -> nn.Module:
    r"""Raise ``TypeError`` unless ``model`` is exactly the class registered for its kind
    (a subclass would be rebuilt as its parent from a checkpoint)."""
    kind = getattr(type(model), "kind", None)
    registered = network_class(kind) if kind in known_kinds() else None
    if not isinstance(model, nn.Module) or registered is not type(model):
        raise TypeError(f"{name} must be a network of a registered kind (one of {known_kinds()}, "
                        f"e.g. capsedu.CapsNet; capsedu.register_network adds one), got "
                        f"{type(model).__name__}")
    return model


def build_network(kind: str, config: dict[str, Any]) -> nn.Module:
    r"""A fresh network of ``kind`` from its config dict (as stored in a checkpoint)."""
    cls = network_class(kind)
    return cls(cls.config_class.from_dict(config))
