r"""The trained networks shipped with the course, loaded offline with their checksums verified.

``capsedu/zoo/weights/`` holds, for each shipped network ``NAME``, the checkpoint ``NAME.pt``
(written by ``python -m coursetools.train_zoo NAME``, a tool of the repository) and ``NAME.json``:
the network's kind, the recipe that trained it, its accuracy on its dataset's official test
split, the training time and the load it was measured under, and the checkpoint's SHA-256.
:func:`pretrained` recomputes the SHA-256 and refuses a file whose digest differs.

Shipped names: ``"capsnet"`` (the CPU-configuration CapsNet of lessons 03-07, the default),
``"cnn"`` (lesson 08's baseline CNN, trained by the same recipe on the same images), and for
lesson 09's MultiMNIST ``"multimnist"`` (the CPU CapsNet on 36 x 36 pairs) and
``"multimnist_cnn"`` (the CNN with a sigmoid per class, on the same pairs), lesson 11's
``"em"`` (matrix capsules with EM routing), lesson 12's ``"efficient"`` (Efficient-CapsNet), and
for lesson 08's run of the paper's Section 5.2 protocol ``"capsnet40"`` and ``"cnn40"`` (both at
40 x 40 input, trained on digits placed anywhere on that canvas), and lesson 13's Fashion-MNIST
networks ``"fashion_capsnet"``, ``"fashion_cnn"`` and ``"fashion_efficient"``.

``capsedu/zoo/studies/`` holds the results of experiments run on the shipped recipes with the
scripts in ``benchmarks/`` (for example ``detach_inner.json``), which lessons print with
:func:`study`.

Shape legend:
    N      images of a dataset (or pairs, items)
"""

from __future__ import annotations

import difflib
import json
import os
import re
from pathlib import Path
from typing import Any

import torch
from torch import nn

from capsedu.data.files import file_sha256
from capsedu.training.checkpoint import CheckpointError, load_checkpoint
from capsedu.training.paired import unpack_correct
from capsedu.training.uncertainty import with_error

WEIGHTS_DIR = Path(__file__).parent / "weights"
STUDIES_DIR = Path(__file__).parent / "studies"
DEFAULT = "capsnet"
NAME = re.compile(r"[A-Za-z0-9_]+")  # a shipped network's or a study's name: a file stem, no path


def available(weights_dir: str | os.PathLike | None = None) -> list[str]:
    r"""Names of the shipped networks (each has a checkpoint and a metrics JSON)."""
    folder = Path(weights_dir) if weights_dir is not None else WEIGHTS_DIR
    return sorted(p.stem for p in folder.glob("*.json") if p.with_suffix(".pt").is_file())


def require_listed_name(what: str, name: object, listed: list[str]) -> str:
    r"""``name`` if it can name a file of the folder (letters, digits, underscores: no path such
    as ``"../x"``); else ``ValueError`` naming the argument and the names that folder lists."""
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise ValueError(f"{what} must be one of the names it lists ({', '.join(map(repr, listed)) or 'none'}), "
                         f"got {name!r}")
    return name


def shipped_paths(name: str, weights_dir: str | os.PathLike | None = None) -> tuple[Path, Path]:
    r"""``(checkpoint, metrics JSON)`` of the shipped network ``name``."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"name must be a non-empty str such as {DEFAULT!r}, got {name!r}")
    require_listed_name("name", name, available(weights_dir))
    folder = Path(weights_dir) if weights_dir is not None else WEIGHTS_DIR
    return folder / f"{name}.pt", folder / f"{name}.json"


def _what_to_do(name: str, weights_dir: str | os.PathLike | None) -> str:
    r"""What a learner can do about a missing network: train its recipe, or use a known name."""
    from capsedu.zoo.recipes import RECIPES  # on this error path only (it imports every network)

    known = available(weights_dir)
    shipped = f"shipped: {', '.join(map(repr, known)) or 'none'}"
    if name in RECIPES:
        return f"{shipped}; `python -m coursetools.train_zoo {name}` trains it (in the repository)"
    close = difflib.get_close_matches(name, sorted({*known, *RECIPES}), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"{shipped}; recipes: {', '.join(map(repr, sorted(RECIPES)))}{hint}"


def pretrained_metrics(name: str = DEFAULT, *,
                       weights_dir: str | os.PathLike | None = None) -> dict[str, Any]:
    r"""The metrics JSON of the shipped network ``name`` (recipe, test accuracy, times, sha256...)."""
    _, json_path = shipped_paths(name, weights_dir)
    if not json_path.is_file():
        raise CheckpointError(f"no shipped network {name!r}: {json_path} is missing "
                              f"({_what_to_do(name, weights_dir)})")
    try:
        return json.loads(json_path.read_text())
    except json.JSONDecodeError as error:
        raise CheckpointError(f"{json_path} is not valid JSON ({error}); reinstall capsedu") from None


def correct_on_test(name: str = DEFAULT, *,
                    weights_dir: str | os.PathLike | None = None) -> torch.Tensor:
    r"""Which test images (N,) the shipped network ``name`` got right, as its record says: a bool
    per image of its dataset's official test split, in order (MultiMNIST: the course's fixed
    test pairs, both digits right), whose mean is its ``test_accuracy``; for paired comparisons
    of two networks on the same images. ``NAME.json``'s ``test_correct`` is base64 of
    ``numpy.packbits`` (written by ``python -m coursetools.train_zoo``)."""
    metrics = pretrained_metrics(name, weights_dir=weights_dir)
    images = metrics["test_data"]["images"]
    if "test_correct" not in metrics:
        raise CheckpointError(f"{name}.json records no per-image test results (test_correct); "
                              f"`python -m coursetools.train_zoo {name}` writes them")
    try:
        return torch.from_numpy(unpack_correct(metrics["test_correct"], images))  # (N,)
    except ValueError as error:
        raise CheckpointError(f"{name}.json's test_correct does not fit its {images} test images ({error}); "
                              f"reinstall capsedu or retrain it") from None


def pretrained(name: str = DEFAULT, *, map_location: str | torch.device = "cpu",
               weights_dir: str | os.PathLike | None = None) -> nn.Module:
    r"""The shipped trained network ``name`` in eval mode, after checking its SHA-256.

    Raises:
        CheckpointError: the checkpoint or its metrics JSON is missing, the checkpoint's SHA-256
            differs from the one recorded in the JSON (a corrupt or replaced file), or it holds
            another kind of network than the JSON says.
    """
    checkpoint, json_path = shipped_paths(name, weights_dir)
    metrics = pretrained_metrics(name, weights_dir=weights_dir)
    if not checkpoint.is_file():
        raise CheckpointError(f"the checkpoint {checkpoint} named by {json_path.name} is missing; "
                              f"reinstall capsedu or run `python -m coursetools.train_zoo {name}` "
                              "in the repository")
    actual = file_sha256(checkpoint)
    if actual != metrics.get("sha256"):
        raise CheckpointError(f"{checkpoint} fails its checksum: SHA-256 {actual[:16]}... but "
                              f"{json_path.name} expects {str(metrics.get('sha256'))[:16]}... - the "
                              "file is corrupt or was replaced; reinstall capsedu or retrain it")
    model, info = load_checkpoint(checkpoint, map_location=map_location)
    if info["kind"] != metrics.get("kind"):
        raise CheckpointError(f"{checkpoint} holds a {info['kind']!r} network but {json_path.name} "
                              f"says {metrics.get('kind')!r}")
    return model.to(map_location).eval()


def shipped_summary(name: str = DEFAULT, *, weights_dir: str | os.PathLike | None = None) -> str:
    r"""One line on the shipped network ``name``: what it learned from, for how long, and its
    validation and test accuracy with their standard errors (pairs with both digits right, for a
    MultiMNIST network)."""
    return record_summary(name, pretrained_metrics(name, weights_dir=weights_dir))


def record_summary(name: str, metrics: dict[str, Any]) -> str:
    r""":func:`shipped_summary`'s line for a training record ``metrics`` (a ``NAME.json``, or the
    record of a network a study trained and did not ship)."""
    unit = "pairs" if metrics["recipe"].get("pairs") else "images"
    learned = "Fashion-MNIST training images" if metrics["recipe"].get("dataset") == "fashion" else "training digits"
    epochs = metrics["epochs"]
    line = (f"{name}: {epochs} epoch{'s' * (epochs != 1)} on {metrics['train_data']['images']:,} {learned}, "
            f"{metrics['train_wall_seconds'] / 60:.0f} min of training")
    validation = metrics.get("validation_data")
    if validation:
        line += f"; validation {with_error(validation['accuracy'], validation['images'])} ({validation['images']:,} {unit})"
    test = metrics["test_data"]
    return line + f"; test {with_error(metrics['test_accuracy'], test['images'])} ({test['images']:,} {unit})"


def study(name: str) -> dict[str, Any]:
    r"""The recorded result of experiment ``name`` (``capsedu/zoo/studies/NAME.json``)."""
    require_listed_name("name", name, sorted(p.stem for p in STUDIES_DIR.glob("*.json")))
    path = STUDIES_DIR / f"{name}.json"
    if not path.is_file():
        known = sorted(p.stem for p in STUDIES_DIR.glob("*.json"))
        raise FileNotFoundError(f"no study {name!r} at {path} (recorded studies: {known}); the "
                                "scripts in benchmarks/ write them")
    return json.loads(path.read_text())
