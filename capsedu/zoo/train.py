r"""Train shipped networks from their recipes: ``python -m capsedu.zoo.train NAME [NAME...]|all``.

Every shipped network (:mod:`capsedu.zoo.shipped`) has a recipe (:mod:`capsedu.zoo.recipes`): its
kind and config, its objective, its data, and how it is trained (:func:`capsedu.fit` with Adam
and a one-cycle learning rate). The command trains it reproducibly (seeded) on the three splits
of :mod:`capsedu.data.splits`: it learns from the 55,000-image train split, is measured on the
5,000-image validation split after every epoch (the curve every recipe choice is made on), and
on the official test split once, at the end, with the weights exactly as shipped. It writes the
checkpoint ``capsedu/zoo/weights/NAME.pt`` (or ``--out-dir``) and, beside it, ``NAME.json``: the
recipe, each split's source and size, the validation and test accuracy with their standard
errors, the validation accuracy per epoch and the time it took to reach 98, 98.5, 99 and 99.5 %,
wall and CPU time, the 1-, 5- and 15-minute load averages before and after training, the tries
made on validation before this recipe (``capsedu/zoo/studies/tries.json``, written by
``python -m benchmarks.recipe_search``) and the checkpoint's SHA-256. Without the official
training files (``CAPSEDU_DATA``) it stops and says so.

Shape legend:
    N      number of images
    B      batch size
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path
from typing import Any

import torch

from capsedu.data.augment import random_flip, random_warp
from capsedu.data.files import file_sha256
from capsedu.data.mnist import MNISTData, batch_loader, random_shift
from capsedu.data.multimnist import FreshPairs, MultiMNIST
from capsedu.nets.registry import build_network
from capsedu.training.checkpoint import load_checkpoint, save_checkpoint
from capsedu.training.hardware import reuse_large_allocations
from capsedu.training.loop import EpochCallback, fit
from capsedu.training.objectives import Objective, objective_from_dict
from capsedu.training.prediction import pair_accuracy, predict
from capsedu.training.seeding import set_seed
from capsedu.training.uncertainty import standard_error
from capsedu.zoo.data import fixed_pairs, padded, recipe_data  # noqa: F401 (fixed_pairs: part of the API)
from capsedu.zoo.recipes import RECIPES, Recipe, with_changes
from capsedu.zoo.shipped import STUDIES_DIR, WEIGHTS_DIR, shipped_paths

THRESHOLDS = (0.98, 0.985, 0.99, 0.995)  # validation accuracies whose time to reach is recorded


def recipe_network(recipe: Recipe) -> torch.nn.Module:
    r"""A fresh network of ``recipe.kind``, its weights drawn after seeding with ``recipe.seed``."""
    set_seed(recipe.seed)
    return build_network(recipe.kind, recipe.config)


def recipe_objective(recipe: Recipe) -> Objective | None:
    r"""The objective ``recipe`` names; None (then :func:`capsedu.fit` uses the network's own loss or
    its kind's default objective) when it names none."""
    return objective_from_dict(recipe.objective) if recipe.objective else None


def train_recipe(recipe: Recipe, train_data: MNISTData, *, model: torch.nn.Module | None = None,
                 on_epoch_end: EpochCallback | None = None, progress: bool = True,
                 device: str | torch.device = "cpu") -> tuple[torch.nn.Module, dict[str, list]]:
    r"""A network of ``recipe.kind`` trained by ``recipe``: ``(model, history)``.

    ``model`` is :func:`recipe_network`'s network (built by the caller when a callback needs it
    before training), else built here: equal recipes give equal runs.
    """
    model = recipe_network(recipe) if model is None else model
    train_data = padded(train_data, recipe.canvas)
    generator = torch.Generator().manual_seed(recipe.seed)
    augment: Callable[[torch.Tensor], torch.Tensor] | None = None
    batches: Iterable = batch_loader(train_data, recipe.batch_size, generator)
    if recipe.pairs:  # new pairs every epoch; the shifts (and warps) are part of the pairs
        batches = FreshPairs(train_data, batch_size=recipe.batch_size, seed=recipe.seed + 1,
                             max_angle=recipe.max_angle, max_scale=recipe.max_scale, **recipe.pairs)
    elif recipe.max_shift > 0 or recipe.max_angle or recipe.max_scale or recipe.flip:
        augment = _augmentation(recipe)
    history = fit(model, batches, epochs=recipe.epochs, objective=recipe_objective(recipe),
                  device=device, lr=recipe.lr, lr_schedule=recipe.lr_schedule, augment=augment,
                  precision=recipe.precision, on_epoch_end=on_epoch_end, progress=progress)
    return model, history


def _augmentation(recipe: Recipe) -> Callable[[torch.Tensor], torch.Tensor]:
    r"""The training images' random shift, after a random warp and a random mirroring when the
    recipe asks for them (in that order: mirror, warp, shift)."""
    steps = []
    if recipe.flip:
        steps.append(partial(random_flip, generator=torch.Generator().manual_seed(recipe.seed + 3)))
    if recipe.max_angle or recipe.max_scale:
        steps.append(partial(random_warp, max_angle=recipe.max_angle, max_scale=recipe.max_scale,
                             generator=torch.Generator().manual_seed(recipe.seed + 2)))
    steps.append(partial(random_shift, max_shift=recipe.max_shift,
                         generator=torch.Generator().manual_seed(recipe.seed + 1)))

    def augment(images: torch.Tensor) -> torch.Tensor:  # (B, C, H, W)
        for step in steps:
            images = step(images)
        return images
    return augment


def accuracy_on(model: torch.nn.Module, test: MNISTData | MultiMNIST,
                device: str | torch.device = "cpu") -> dict[str, float]:
    r"""``{"accuracy": ...}`` on single digits; on pairs the share with both digits right, and
    ``"at_least_one"``. ``model`` must be on ``device``."""
    if isinstance(test, MultiMNIST):
        scores = pair_accuracy(model, test, device=device)
        return {"accuracy": scores["both"], "at_least_one": scores["at_least_one"]}
    right = predict(model, test.images, batch_size=100, device=device) == test.labels  # (N,)
    return {"accuracy": int(right.sum()) / len(test)}


def record_accuracy(model: torch.nn.Module, data: MNISTData | MultiMNIST, key: str = "validation_accuracy",
                    report: Callable[[str], None] | None = None,
                    device: str | torch.device = "cpu") -> EpochCallback:
    r"""An ``on_epoch_end`` callback recording ``model``'s accuracy on ``data`` under ``history[key]``
    (``model`` trains on ``device``)."""
    def callback(epoch: int, history: dict) -> None:
        accuracy = accuracy_on(model, data, device)["accuracy"]
        history.setdefault(key, []).append(accuracy)
        if report is not None:
            report(f"epoch {epoch}: train {history['train_accuracy'][-1]:.2%}, {key.replace('_', ' ')} "
                   f"{accuracy:.2%}, {sum(history['train_seconds']):.0f} s of training")
    return callback


def each_of(callbacks: list[EpochCallback]) -> EpochCallback:
    r"""One ``on_epoch_end`` callback calling each of ``callbacks``; it stops training when one asks."""
    def callback(epoch: int, history: dict) -> bool:
        return any([bool(c(epoch, history)) for c in callbacks])  # a list: every callback runs
    return callback


def time_to(history: dict, accuracy: float, key: str = "validation_accuracy") -> dict[str, float] | None:
    r"""Training seconds and epoch at which ``history[key]`` first reached ``accuracy``."""
    for index, measured in enumerate(history.get(key, [])):
        if measured is not None and measured >= accuracy:
            return {"epoch": history["epoch"][index],
                    "train_seconds": round(sum(history["train_seconds"][: index + 1]), 1)}
    return None


def _load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _split(data: MNISTData | MultiMNIST, accuracy: float | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {"source": data.source, "images": len(data)}
    if accuracy is not None:
        entry |= {"accuracy": accuracy, "standard_error": standard_error(accuracy, len(data))}
    return entry


TRIES = STUDIES_DIR / "tries.json"  # the tries made on validation (python -m benchmarks.recipe_search)


def _tries(name: str, path: Path = TRIES) -> list[dict[str, Any]]:
    return json.loads(path.read_text()).get(name, []) if path.is_file() else []


def _metrics(name: str, recipe: Recipe, path: Path, history: dict, data: dict[str, Any],
             scores: dict[str, float], loads: list[list[float]], tries: Path) -> dict[str, Any]:
    train_seconds = sum(history["train_seconds"])
    seen = recipe.pairs.get("pairs_per_epoch", len(data["train"])) * len(history["epoch"])
    return {
        "name": name, "kind": recipe.kind, "checkpoint": path.name, "sha256": file_sha256(path),
        "size_bytes": path.stat().st_size, "recipe": dataclasses.asdict(recipe),
        "train_data": _split(data["train"]),
        "validation_data": _split(data["validation"], history["validation_accuracy"][-1]),
        "test_data": _split(data["test"], scores["accuracy"]),
        "epochs": len(history["epoch"]), "test_accuracy": scores["accuracy"],
        "test_standard_error": standard_error(scores["accuracy"], len(data["test"])),
        "train_wall_seconds": round(train_seconds, 1),
        "train_cpu_seconds": round(sum(history["train_cpu_seconds"]), 1),
        "train_images_per_second": round(seen / train_seconds, 1),
        "load_average_before": loads[0], "load_average_after": loads[1],
        "cpu": _cpu(), "cpu_count": os.cpu_count(), "torch_threads": torch.get_num_threads(),
        "torch_version": torch.__version__, "python_version": platform.python_version(),
        **{f"time_to_{100 * t:.1f}": time_to(history, t) for t in THRESHOLDS},
        "tries": _tries(name, tries),
        "history": {k: history[k] for k in ("epoch", "train_loss", "train_accuracy", "lr", "precision",
                                             "train_seconds", "train_cpu_seconds",
                                             "validation_accuracy", "validation_affnist_accuracy")
                    if k in history},
    }


def _device_name(device: str | torch.device) -> str:
    r"""What trained the network: ``"cpu"``, or the accelerator's name (``"cuda: NVIDIA H200"``)."""
    device = torch.device(device)
    return f"cuda: {torch.cuda.get_device_name(device)}" if device.type == "cuda" else device.type


def _cpu() -> str:
    cpuinfo = Path("/proc/cpuinfo")
    lines = cpuinfo.read_text().splitlines() if cpuinfo.is_file() else []
    return next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")),
                platform.processor() or "unknown processor")


def train_shipped(name: str, recipe: Recipe, out_dir: str | os.PathLike = WEIGHTS_DIR, *,
                  data_root: str | os.PathLike | None = None, half: bool = True, progress: bool = True,
                  report: Callable[[str], None] | None = None, tries: Path = TRIES,
                  device: str | torch.device = "cpu") -> dict[str, Any]:
    r"""Train ``recipe`` on the train split (on ``device``), validating every epoch; test the
    shipped weights once; write ``NAME.pt`` and ``NAME.json`` into ``out_dir``; return the metrics."""
    if recipe.train_data != "train":
        raise ValueError(f"recipe.train_data must be 'train' (capsedu.data.splits), got {recipe.train_data!r}")
    data = recipe_data(recipe, data_root)
    model = recipe_network(recipe)
    loads = [_load_average()]
    callbacks = [record_accuracy(model, data["validation"], report=report, device=device)]
    if "validation_affnist" in data:
        callbacks.append(record_accuracy(model, data["validation_affnist"], "validation_affnist_accuracy",
                                         report=report, device=device))
    model, history = train_recipe(recipe, data["train"], model=model, progress=progress, device=device,
                                  on_epoch_end=each_of(callbacks))
    loads.append(_load_average())
    checkpoint, json_path = shipped_paths(name, out_dir)
    save_checkpoint(checkpoint, model, objective=recipe_objective(recipe), history=history,
                    half=half, metadata={"recipe": dataclasses.asdict(recipe)})
    shipped, _ = load_checkpoint(checkpoint)  # measure the weights exactly as they are shipped
    scores = accuracy_on(shipped.to(device), data["test"], device)
    metrics = _metrics(name, recipe, checkpoint, history, data, scores, loads, tries) | {
        "device": _device_name(device)}
    if "at_least_one" in scores:
        metrics["test_at_least_one"] = scores["at_least_one"]
    temporary = json_path.with_suffix(".json.tmp")
    temporary.write_text(json.dumps(metrics, indent=2) + "\n")
    temporary.replace(json_path)  # atomic, like the checkpoint: never a half-written record
    return metrics


def main(argv: list[str] | None = None) -> dict[str, dict[str, Any]]:
    parser = argparse.ArgumentParser(prog="python -m capsedu.zoo.train",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("names", nargs="+", choices=[*sorted(RECIPES), "all"],
                        help="the shipped networks to train, or 'all' (one after the other)")
    parser.add_argument("--out-dir", type=Path, default=WEIGHTS_DIR,
                        help="folder for NAME.pt and NAME.json (default: capsedu/zoo/weights)")
    parser.add_argument("--data-root", type=Path, default=None,
                        help="MNIST data root with the official training and test files "
                             "(default: $CAPSEDU_DATA)")
    parser.add_argument("--epochs", type=int, default=None, help="override the recipes' epochs")
    parser.add_argument("--seed", type=int, default=None, help="override the recipes' seed")
    parser.add_argument("--set", dest="settings", action="append", default=[],
                        help="change a recipe: field=value or config.field=value (JSON values, "
                             "e.g. batch_size=128); repeatable; NAME.json records the changed recipe")
    parser.add_argument("--float32", action="store_true", help="store float32 instead of float16")
    parser.add_argument("--device", default="cpu",
                        help="train and measure on this torch device, e.g. 'cuda' (default: cpu)")
    parser.add_argument("--tries", type=Path, default=TRIES,
                        help="the record of tries on validation to copy into NAME.json")
    args = parser.parse_args(argv)
    reuse_large_allocations()  # EM routing's large tensors: half the step time (hardware.py)
    names = sorted(RECIPES) if "all" in args.names else list(dict.fromkeys(args.names))
    overrides = {k: v for k, v in (("epochs", args.epochs), ("seed", args.seed)) if v is not None}
    results = {}
    for name in names:
        recipe = dataclasses.replace(with_changes(RECIPES[name], args.settings)[0], **overrides)
        print(f"== {name}: {recipe}")
        metrics = train_shipped(name, recipe, args.out_dir, data_root=args.data_root,
                                half=not args.float32, report=print, tries=args.tries,
                                device=args.device)
        print(json.dumps({k: v for k, v in metrics.items() if k != "history"}, indent=2))
        results[name] = metrics
    return results


if __name__ == "__main__":
    main()
