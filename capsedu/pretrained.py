r"""The trained CapsNet shipped with the course, loaded offline with its checksum verified.

``capsedu/weights/`` holds, for each shipped network ``NAME``, the checkpoint ``capsnet_NAME.pt``
(written by ``python -m capsedu.pretrain``) and ``capsnet_NAME.json``: how it was trained, its
accuracy on the official MNIST test split and the checkpoint's SHA-256. :func:`pretrained`
recomputes the SHA-256 of the file and refuses to load it when the two differ.

Shape legend:
    B      batch size
    J      digit capsules (10)
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch

from capsedu.checkpoint import CheckpointError, load_checkpoint
from capsedu.model import CapsNet
from capsedu.pretrain import metrics_path, sha256

WEIGHTS_DIR = Path(__file__).parent / "weights"


def available() -> list[str]:
    r"""Names of the shipped networks (each has a checkpoint and a metrics JSON)."""
    return sorted(p.stem.removeprefix("capsnet_") for p in WEIGHTS_DIR.glob("capsnet_*.json")
                  if p.with_suffix(".pt").is_file())


def _paths(name: str, weights_dir: str | os.PathLike | None) -> tuple[Path, Path]:
    if not isinstance(name, str) or not name:
        raise TypeError(f"name must be a non-empty str such as 'cpu', got {name!r}")
    folder = Path(weights_dir) if weights_dir is not None else WEIGHTS_DIR
    checkpoint = folder / f"capsnet_{name}.pt"
    return checkpoint, metrics_path(checkpoint)


def pretrained_metrics(name: str = "cpu", *,
                       weights_dir: str | os.PathLike | None = None) -> dict[str, Any]:
    r"""The metrics JSON of the shipped network ``name`` (test accuracy, training time, sha256...)."""
    _, json_path = _paths(name, weights_dir)
    if not json_path.is_file():
        known = ", ".join(repr(n) for n in available()) or "none"
        raise CheckpointError(f"no metrics file {json_path} for pretrained network {name!r} "
                              f"(shipped: {known}); run `python -m capsedu.pretrain` to create it")
    try:
        metrics = json.loads(json_path.read_text())
    except json.JSONDecodeError as error:
        raise CheckpointError(f"{json_path} is not valid JSON ({error}); restore it from the "
                              "package or run `python -m capsedu.pretrain` again") from None
    if not isinstance(metrics, dict) or not isinstance(metrics.get("sha256"), str):
        raise CheckpointError(f"{json_path} has no 'sha256' entry to verify the checkpoint against")
    return metrics


def pretrained(name: str = "cpu", *, map_location: str | torch.device = "cpu",
               weights_dir: str | os.PathLike | None = None) -> CapsNet:
    r"""The shipped trained CapsNet ``name`` in eval mode, after checking its SHA-256.

    Raises:
        CheckpointError: the checkpoint or its metrics JSON is missing, or the checkpoint's
            SHA-256 differs from the one recorded in the JSON (a corrupt or replaced file).
    """
    checkpoint, json_path = _paths(name, weights_dir)
    metrics = pretrained_metrics(name, weights_dir=weights_dir)
    if not checkpoint.is_file():
        raise CheckpointError(f"the checkpoint {checkpoint} named by {json_path.name} is missing; "
                              "reinstall capsedu or run `python -m capsedu.pretrain`")
    actual = sha256(checkpoint)
    if actual != metrics["sha256"]:
        raise CheckpointError(f"{checkpoint} fails its checksum: SHA-256 {actual[:16]}... but "
                              f"{json_path.name} expects {metrics['sha256'][:16]}... - the file is "
                              "corrupt or was replaced; reinstall capsedu or retrain it")
    model, _ = load_checkpoint(checkpoint, map_location=map_location)
    return model.to(map_location).eval()
