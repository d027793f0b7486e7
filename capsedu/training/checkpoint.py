r"""Saving and loading checkpoints of any capsedu network, safely.

A checkpoint is a plain dict: a format tag and version, the network's ``kind`` and config (see
:mod:`capsedu.nets.registry`), its state dict, the objective it was trained for
(:mod:`capsedu.training.objectives`, as a plain dict), and optional history and metadata. It is
written
atomically - to a new temporary file in the same folder, flushed to disk, then renamed over the
target - so an interrupted save never leaves a half-written file behind. Loading uses
``torch.load(weights_only=True)``, which refuses to run code hidden in a pickle.

Older versions are still read (:func:`_upgrade`). Versions 1 and 2 (before objectives were
data): the reconstruction weight that their CapsNet and Efficient-CapsNet configs held becomes
the objective's, an EM network's margin schedule is read from its recipe, and
Efficient-CapsNet's class-capsule ``W`` is turned from (I, J, D_in, D) to today's (I, J, D, D_in).
Versions 1 to 3 (before one vocabulary): the class-capsule layer was ``digits`` (CapsNet,
Efficient-CapsNet) or ``classes`` (the EM network) and Efficient-CapsNet's prior ``b``; their
weights are renamed to ``class_caps.*`` and ``class_caps.prior`` (:data:`RENAMED_WEIGHTS`).
Renamed config fields are read by each config's ``from_dict``
(:attr:`capsedu.nets.contract.NetworkConfig.RENAMED`). The shipped networks' files are
version 3 and load through this path.

Shape legend:
    I      input (lower) capsules
    J      output (upper) capsules: the classes in the last layer
    D      a capsule's dimension
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

import torch
from torch import nn

from capsedu.nets.registry import build_network, require_registered
from capsedu.training.objectives import (
    MarginObjective,
    Objective,
    SpreadObjective,
    default_objective,
    objective_from_dict,
)

FORMAT = "capsedu-checkpoint"
VERSION = 4  # 1: only CapsNets; 2: network kinds; 3: the objective stored; 4: class_caps
# the dtypes floating-point weights may be stored in (older files name none: their dtype tells)
STORAGE = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}

# Before version 4: each course network kind's old weight names -> today's; a name ending in "."
# renames every weight under it (a layer), any other name one weight.
RENAMED_WEIGHTS: dict[str, dict[str, str]] = {
    "capsnet": {"digits.": "class_caps."},
    "efficient": {"digits.b": "class_caps.prior", "digits.": "class_caps."},
    "em": {"classes.": "class_caps."},
}


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


def save_checkpoint(path: str | os.PathLike, model: nn.Module, *, objective: Objective | None = None,
                    history: dict | None = None, metadata: dict | None = None,
                    storage: str = "float32") -> Path:
    r"""Write ``model`` (its kind, config, weights, the objective it was trained for - by default
    its kind's - and optional history/metadata) to ``path``.

    ``storage`` is the dtype the floating-point weights are stored in: ``"float32"``, or
    ``"float16"`` / ``"bfloat16"`` (half the size; float16 keeps 3 more bits of mantissa,
    bfloat16 float32's range). The checkpoint names it (``info["storage"]``); loading casts the
    weights back to float32.
    """
    require_registered(model)
    if storage not in STORAGE:
        raise ValueError(f"storage must be one of {', '.join(map(repr, STORAGE))}, got {storage!r}")
    objective = default_objective(model) if objective is None else objective
    if objective is not None and not isinstance(objective, Objective):
        raise TypeError(f"objective must be a capsedu Objective (capsedu.training.objectives), "
                        f"got {type(objective).__name__}")
    dtype = STORAGE[storage]
    state = {k: (v.detach().cpu().to(dtype) if v.is_floating_point() else v.detach().cpu())
             for k, v in model.state_dict().items()}
    payload = {"format": FORMAT, "version": VERSION, "kind": model.kind, "storage": storage,
               "config": model.config.to_dict(), "state_dict": state,
               "objective": None if objective is None else objective.to_dict(),
               "history": dict(history or {}), "metadata": metadata or {}}
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
    if payload.get("version") not in range(1, VERSION + 1):
        raise CheckpointError(f"{path} has checkpoint version {payload.get('version')}, "
                              f"expected 1 to {VERSION}")
    return payload if payload["version"] == VERSION else _upgrade(payload)


def _renamed_weight(name: str, renames: dict[str, str]) -> str:
    for old, new in renames.items():  # the first match wins
        if name == old or (old.endswith(".") and name.startswith(old)):
            return new + name[len(old):]
    return name


def _upgrade_to_3(payload: dict[str, Any]) -> dict[str, Any]:
    r"""A version 1 or 2 payload in version 3's terms: the objective out of the config."""
    kind = payload.get("kind", "capsnet")  # version 1 held only CapsNets
    config = dict(payload.get("config", {}))
    state = dict(payload.get("state_dict", {}))
    objective: Objective | None = None
    if kind in ("capsnet", "efficient"):
        objective = MarginObjective(recon_weight=config.pop("recon_weight", MarginObjective.recon_weight))
    if kind == "efficient" and "digits.W" in state:
        state["digits.W"] = state["digits.W"].transpose(-1, -2).contiguous()  # (I, J, D_in, D) -> (I, J, D, D_in)
    if kind == "em":
        ramp = payload.get("metadata", {}).get("recipe", {}).get("margin_ramp_epochs", 0)
        objective = SpreadObjective(ramp_epochs=ramp)
    return {**payload, "version": 3, "kind": kind, "config": config, "state_dict": state,
            "objective": None if objective is None else objective.to_dict()}


def _upgrade(payload: dict[str, Any]) -> dict[str, Any]:
    r"""An older payload in today's terms, one version step after another (the module docstring
    says what moves)."""
    if payload["version"] < 3:
        payload = _upgrade_to_3(payload)
    renames = RENAMED_WEIGHTS.get(payload["kind"], {})  # a learner's own kind keeps its names
    state = {_renamed_weight(name, renames): value for name, value in payload["state_dict"].items()}
    return {**payload, "version": VERSION, "state_dict": state}


def _mismatch(expected: Any, found: Any) -> str:
    wanted, stored = expected.to_dict(), found.to_dict()
    return "; ".join(f"{k}: expected {v!r}, checkpoint has {stored.get(k)!r}"
                     for k, v in wanted.items() if stored.get(k) != v)


def _build(path: Path, payload: dict[str, Any], expected_config: Any) -> nn.Module:
    kind = payload["kind"]
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
    ``info`` with ``kind``, ``config``, ``storage`` (the dtype the weights were stored in),
    ``objective`` (an
    :class:`~capsedu.training.objectives.Objective`, or None), ``history`` and ``metadata``. Raises
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
    stored = payload.get("objective")
    dtypes = {v.dtype for v in payload["state_dict"].values() if v.is_floating_point()}
    storage = payload.get("storage", next((k for k, d in STORAGE.items() if dtypes == {d}), "mixed"))
    return model, {"kind": model.kind, "config": model.config, "storage": storage,
                   "objective": None if stored is None else objective_from_dict(stored),
                   "history": payload.get("history", {}), "metadata": payload.get("metadata", {})}
