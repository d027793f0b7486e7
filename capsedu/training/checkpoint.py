r"""Saving and loading checkpoints of any capsedu network, safely.

A checkpoint is a plain dict: a format tag and version, the network's ``kind`` and config (see
:mod:`capsedu.nets.registry`), its state dict, and optional history and metadata. It is written
atomically - to a new temporary file in the same folder, flushed to disk, then renamed over the
target - so an interrupted save never leaves a half-written file behind. Loading uses
``torch.load(weights_only=True)``, which refuses to run code hidden in a pickle.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

import torch
from torch import nn

from capsedu.nets.registry import build_network, check_network

FORMAT = "capsedu-checkpoint"
VERSION = 2  # version 1 (before network kinds) held only CapsNets and is still read


class CheckpointError(ValueError):
    r"""A checkpoint file is missing, corrupt, or does not match what was expected."""


def write_atomically(path: str | os.PathLike, payload: object) -> Path:
    r"""``torch.save`` ``payload`` to ``path`` through a temporary file renamed over it.

    The temporary file is created like any new file (``open(..., "xb")``), so it gets the usual
    permissions of the process's umask.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        with open(tmp, "xb") as handle:
            torch.save(payload, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def save_checkpoint(path: str | os.PathLike, model: nn.Module, *, history: dict | None = None,
                    metadata: dict | None = None, half: bool = False) -> Path:
    r"""Write ``model`` (its kind, config, weights, and optional history/metadata) to ``path``.

    ``half=True`` stores floating-point weights as float16 (half the size); they are cast back
    to float32 on load.
    """
    check_network(model)
    state = {k: (v.detach().cpu().half() if half and v.is_floating_point() else v.detach().cpu())
             for k, v in model.state_dict().items()}
    payload = {"format": FORMAT, "version": VERSION, "kind": model.kind,
               "config": model.config.to_dict(), "state_dict": state,
               "history": history or {}, "metadata": metadata or {}}
    return write_atomically(path, payload)


def _read(path: Path, map_location: str | torch.device) -> dict[str, Any]:
    if not path.is_file():
        raise CheckpointError(f"checkpoint not found: {path}")
    try:
        payload = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as error:  # truncated zip, random bytes, a pickle with code in it, ...
        first_line = str(error).splitlines()[0] if str(error) else ""
        raise CheckpointError(f"{path} is not a readable checkpoint ({type(error).__name__}: "
                              f"{first_line}); it may be corrupt or truncated - re-create it "
                              "with save_checkpoint") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise CheckpointError(f"{path} is not a capsedu checkpoint (no '{FORMAT}' format tag)")
    if payload.get("version") not in (1, VERSION):
        raise CheckpointError(f"{path} has checkpoint version {payload.get('version')}, "
                              f"expected 1 or {VERSION}")
    return payload


def _mismatch(expected: Any, found: Any) -> str:
    wanted, stored = expected.to_dict(), found.to_dict()
    return "; ".join(f"{k}: expected {v!r}, checkpoint has {stored.get(k)!r}"
                     for k, v in wanted.items() if stored.get(k) != v)


def _build(path: Path, payload: dict[str, Any], expected_config: Any) -> nn.Module:
    kind = payload.get("kind", "capsnet")  # version 1 held only CapsNets
    try:
        model = build_network(kind, payload["config"])
    except (KeyError, TypeError, ValueError) as error:
        raise CheckpointError(f"{path} holds an invalid {kind!r} network: {error}") from None
    if expected_config is not None and model.config != expected_config:
        if type(model.config) is not type(expected_config):
            raise CheckpointError(f"{path} holds a {kind!r} network, but expected_config is a "
                                  f"{type(expected_config).__name__}")
        raise CheckpointError(f"{path} was saved with a different config - "
                              f"{_mismatch(expected_config, model.config)}")
    return model


def load_checkpoint(path: str | os.PathLike, *, expected_config: Any = None,
                    map_location: str | torch.device = "cpu") -> tuple[nn.Module, dict[str, Any]]:
    r"""Load a checkpoint written by :func:`save_checkpoint`.

    Returns ``(model, info)``: the network of the stored kind, float32, in eval mode, and
    ``info`` with ``kind``, ``config``, ``history`` and ``metadata``. Raises
    :class:`CheckpointError` when the file is missing or corrupt, when its weights do not fit its
    config, or when ``expected_config`` is given and differs from the stored config.
    """
    path = Path(path)
    payload = _read(path, map_location)
    model = _build(path, payload, expected_config)
    state = {k: v.float() if v.is_floating_point() else v for k, v in payload["state_dict"].items()}
    try:
        model.load_state_dict(state)
    except RuntimeError as error:
        raise CheckpointError(f"{path}: weights do not fit the stored config: "
                              f"{str(error).splitlines()[0]}") from None
    model.eval()
    return model, {"kind": model.kind, "config": model.config,
                   "history": payload.get("history", {}), "metadata": payload.get("metadata", {})}
