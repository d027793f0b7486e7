r"""Saving and loading CapsNet checkpoints safely.

A checkpoint is a plain dict (format tag, config, state dict, optional history and metadata),
written atomically - to a temporary file in the same folder, flushed to disk, then renamed over
the target - so an interrupted save never leaves a half-written file behind. Loading uses
``torch.load(weights_only=True)``, which refuses to run code hidden in a pickle.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import torch

from capsedu.model import CapsNet, CapsNetConfig

FORMAT = "capsedu-checkpoint"
VERSION = 1


class CheckpointError(ValueError):
    r"""A checkpoint file is missing, corrupt, or does not match what was expected."""


def _default_file_mode() -> int:
    r"""The mode a plain ``open(path, "w")`` would give (mkstemp's files are private, 0o600)."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def save_checkpoint(path: str | os.PathLike, model: CapsNet, *, history: dict | None = None,
                    metadata: dict | None = None, half: bool = False) -> Path:
    r"""Write ``model`` (with its config, and optional history/metadata) atomically to ``path``.

    ``half=True`` stores floating-point weights as float16 (half the size); they are cast back
    to float32 on load.
    """
    if not isinstance(model, CapsNet):
        raise TypeError(f"model must be a capsedu.CapsNet, got {type(model).__name__}")
    path = Path(path)
    state = {k: (v.detach().cpu().half() if half and v.is_floating_point() else v.detach().cpu())
             for k, v in model.state_dict().items()}
    payload = {"format": FORMAT, "version": VERSION, "config": model.config.to_dict(),
               "state_dict": state, "history": history or {}, "metadata": metadata or {}}
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.chmod(tmp_name, _default_file_mode())
        with os.fdopen(fd, "wb") as handle:
            torch.save(payload, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, path)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    return path


def _read(path: Path, map_location: str | torch.device) -> dict[str, Any]:
    if not path.is_file():
        raise CheckpointError(f"checkpoint not found: {path}")
    try:
        payload = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as error:  # truncated zip, random bytes, a pickle with code in it, ...
        raise CheckpointError(f"{path} is not a readable checkpoint ({type(error).__name__}: "
                              f"{str(error).splitlines()[0] if str(error) else ''}); it may be corrupt or "
                              "truncated - re-create it with save_checkpoint") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise CheckpointError(f"{path} is not a capsedu checkpoint (no '{FORMAT}' format tag)")
    if payload.get("version") != VERSION:
        raise CheckpointError(f"{path} has checkpoint version {payload.get('version')}, expected {VERSION}")
    return payload


def _config_mismatch(expected: CapsNetConfig, found: CapsNetConfig) -> str:
    diffs = [f"{k}: expected {v!r}, checkpoint has {found.to_dict()[k]!r}"
             for k, v in expected.to_dict().items() if found.to_dict()[k] != v]
    return "; ".join(diffs)


def load_checkpoint(path: str | os.PathLike, *, expected_config: CapsNetConfig | None = None,
                    map_location: str | torch.device = "cpu") -> tuple[CapsNet, dict[str, Any]]:
    r"""Load a checkpoint written by :func:`save_checkpoint`.

    Returns ``(model, info)`` where ``model`` is a float32 CapsNet in eval mode and ``info`` holds
    ``config``, ``history`` and ``metadata``. Raises :class:`CheckpointError` when the file is
    missing or corrupt, or when ``expected_config`` is given and differs from the stored config.
    """
    path = Path(path)
    payload = _read(path, map_location)
    try:
        config = CapsNetConfig.from_dict(payload["config"])
    except (KeyError, TypeError, ValueError) as error:
        raise CheckpointError(f"{path} holds an invalid config: {error}") from None
    if expected_config is not None and config != expected_config:
        raise CheckpointError(f"{path} was saved with a different config - "
                              f"{_config_mismatch(expected_config, config)}")
    model = CapsNet(config)
    state = {k: v.float() if v.is_floating_point() else v for k, v in payload["state_dict"].items()}
    try:
        model.load_state_dict(state)
    except RuntimeError as error:
        raise CheckpointError(f"{path}: weights do not fit the stored config: "
                              f"{str(error).splitlines()[0]}") from None
    model.eval()
    return model, {"config": config, "history": payload.get("history", {}),
                   "metadata": payload.get("metadata", {})}
