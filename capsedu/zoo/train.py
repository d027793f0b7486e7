r"""Train shipped networks from their recipes: ``python -m capsedu.zoo.train NAME [NAME...]|all``.

Every shipped network (:mod:`capsedu.zoo.shipped`) has a recipe (:mod:`capsedu.zoo.recipes`): its
kind and config, its objective, its data, and how it is trained (:func:`capsedu.fit` with Adam
and a one-cycle learning rate). The command trains it reproducibly (seeded), tests it on the official MNIST test
split when one is found (``CAPSEDU_DATA`` or ``--data-root``; otherwise on the offline subset's
1,000-image test part, which the recipes never train on), writes the checkpoint
``capsedu/zoo/weights/NAME.pt`` (or ``--out-dir``) and, beside it, ``NAME.json``: the recipe,
the data, test accuracy per epoch (with ``--test-from-epoch``), wall and CPU time, the 1-, 5-
and 15-minute load averages before and after training, and the checkpoint's SHA-256.

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

from capsedu.data.augment import random_warp
from capsedu.data.mnist import MNISTData, batch_loader, load_mnist, load_offline, random_shift
from capsedu.data.multimnist import MULTIMNIST_TEST, FreshPairs, MultiMNIST
from capsedu.nets.registry import build_network
from capsedu.training.checkpoint import load_checkpoint, save_checkpoint
from capsedu.training.hardware import reuse_large_allocations
from capsedu.training.loop import EpochCallback, fit
from capsedu.training.objectives import Objective, objective_from_dict
from capsedu.training.prediction import pair_accuracy, predict
from capsedu.training.seeding import set_seed
from capsedu.zoo.recipes import RECIPES, Recipe
from capsedu.zoo.shipped import WEIGHTS_DIR, sha256, shipped_paths


def fixed_test_pairs(test_data: MNISTData, recipe: Recipe) -> MultiMNIST:
    r"""The fixed MultiMNIST test set of a pairs recipe, drawn from ``test_data``."""
    options = {k: v for k, v in recipe.pairs.items() if k != "pairs_per_epoch"}
    return MultiMNIST(test_data, MULTIMNIST_TEST["num_pairs"], seed=MULTIMNIST_TEST["seed"],
                      **options)


def recipe_network(recipe: Recipe) -> torch.nn.Module:
    r"""A fresh network of ``recipe.kind``, its weights drawn after seeding with ``recipe.seed``."""
    set_seed(recipe.seed)
    return build_network(recipe.kind, recipe.config)


def recipe_objective(recipe: Recipe) -> Objective | None:
    r"""The objective ``recipe`` names; None (then :func:`capsedu.fit` uses the network's own loss or
    its kind's default objective) when it names none."""
    return objective_from_dict(recipe.objective) if recipe.objective else None


def train_recipe(recipe: Recipe, train_data: MNISTData, *, model: torch.nn.Module | None = None,
                 on_epoch_end: EpochCallback | None = None,
                 progress: bool = True) -> tuple[torch.nn.Module, dict[str, list]]:
    r"""A network of ``recipe.kind`` trained by ``recipe``: ``(model, history)``.

    ``model`` is :func:`recipe_network`'s network (built by the caller when a callback needs it
    before training), else built here: equal recipes give equal runs.
    """
    model = recipe_network(recipe) if model is None else model
    generator = torch.Generator().manual_seed(recipe.seed)
    augment: Callable[[torch.Tensor], torch.Tensor] | None = None
    batches: Iterable = batch_loader(train_data, recipe.batch_size, generator)
    if recipe.pairs:  # new pairs every epoch; the shifts (and warps) are part of the pairs
        batches = FreshPairs(train_data, batch_size=recipe.batch_size, seed=recipe.seed + 1,
                             max_angle=recipe.max_angle, max_scale=recipe.max_scale, **recipe.pairs)
    elif recipe.max_shift > 0 or recipe.max_angle or recipe.max_scale:
        augment = _augmentation(recipe)
    history = fit(model, batches, epochs=recipe.epochs, objective=recipe_objective(recipe),
                  lr=recipe.lr, lr_schedule=recipe.lr_schedule, augment=augment,
                  on_epoch_end=on_epoch_end, progress=progress)
    return model, history


def _augmentation(recipe: Recipe) -> Callable[[torch.Tensor], torch.Tensor]:
    r"""The training images' random shift, after a random warp when the recipe asks for one."""
    shift = partial(random_shift, max_shift=recipe.max_shift,
                    generator=torch.Generator().manual_seed(recipe.seed + 1))
    if not (recipe.max_angle or recipe.max_scale):
        return shift
    turn = partial(random_warp, max_angle=recipe.max_angle, max_scale=recipe.max_scale,
                   generator=torch.Generator().manual_seed(recipe.seed + 2))
    return lambda images: shift(turn(images))  # (B, C, H, W)


def accuracy_on(model: torch.nn.Module, test: MNISTData | MultiMNIST) -> dict[str, float]:
    r"""``{"accuracy": ...}`` on single digits; on pairs the share with both digits right, and
    ``"at_least_one"``."""
    if isinstance(test, MultiMNIST):
        scores = pair_accuracy(model, test)
        return {"accuracy": scores["both"], "at_least_one": scores["at_least_one"]}
    right = predict(model, test.images, batch_size=100) == test.labels  # (N,)
    return {"accuracy": int(right.sum()) / len(test)}


def record_test_accuracy(model: torch.nn.Module, test_data: MNISTData | MultiMNIST, *, start: int = 1,
                         report: Callable[[str], None] | None = None) -> EpochCallback:
    r"""An ``on_epoch_end`` callback recording test accuracy (and its time) from epoch ``start``."""
    def callback(epoch: int, history: dict) -> None:
        accuracy = None
        if epoch >= start:
            accuracy = accuracy_on(model, test_data)["accuracy"]
        history.setdefault("test_accuracy", []).append(accuracy)
        if report is not None:
            shown = "" if accuracy is None else f", test {accuracy:.2%}"
            report(f"epoch {epoch}: train {history['train_accuracy'][-1]:.2%}{shown}, "
                   f"{sum(history['train_seconds']):.0f} s of training")
    return callback


def time_to(history: dict, accuracy: float) -> dict[str, float] | None:
    r"""Training seconds and epoch at which the recorded test accuracy first reached ``accuracy``."""
    for index, tested in enumerate(history.get("test_accuracy", [])):
        if tested is not None and tested >= accuracy:
            return {"epoch": history["epoch"][index],
                    "train_seconds": round(sum(history["train_seconds"][: index + 1]), 1)}
    return None


def _load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _metrics(name: str, recipe: Recipe, path: Path, history: dict, train_data: MNISTData,
             test_data: MNISTData | MultiMNIST, accuracy: float, loads: list[list[float]]) -> dict[str, Any]:
    train_seconds = sum(history["train_seconds"])
    return {
        "name": name, "kind": recipe.kind, "checkpoint": path.name, "sha256": sha256(path),
        "size_bytes": path.stat().st_size, "recipe": dataclasses.asdict(recipe),
        "train_data": {"images": len(train_data), "source": train_data.source},
        "test_data": {"images": len(test_data), "source": test_data.source},
        "epochs": len(history["epoch"]), "test_accuracy": accuracy,
        "train_wall_seconds": round(train_seconds, 1),
        "train_cpu_seconds": round(sum(history["train_cpu_seconds"]), 1),
        "train_images_per_second": round(recipe.pairs.get("pairs_per_epoch", len(train_data))
                                         * len(history["epoch"]) / train_seconds, 1),
        "load_average_before": loads[0], "load_average_after": loads[1],
        "cpu_count": os.cpu_count(), "torch_threads": torch.get_num_threads(),
        "torch_version": torch.__version__, "python_version": platform.python_version(),
        "time_to_98.0": time_to(history, 0.98), "time_to_98.5": time_to(history, 0.985),
        "history": {k: history[k] for k in ("epoch", "train_loss", "train_accuracy", "lr",
                                             "train_seconds", "train_cpu_seconds",
                                             "test_accuracy") if k in history},
    }


def train_shipped(name: str, recipe: Recipe, out_dir: str | os.PathLike = WEIGHTS_DIR, *,
                  data_root: str | os.PathLike | None = None, half: bool = True,
                  test_from_epoch: int | None = None, progress: bool = True,
                  report: Callable[[str], None] | None = None) -> dict[str, Any]:
    r"""Train ``recipe``, write ``NAME.pt`` and ``NAME.json`` into ``out_dir``; return the metrics."""
    if recipe.train_data != "offline-train":
        raise ValueError(f"recipe.train_data must be 'offline-train', got {recipe.train_data!r}")
    train_data = load_offline("train")
    test_data: MNISTData | MultiMNIST = load_mnist("test", data_root, download=False)
    if recipe.pairs:
        test_data = fixed_test_pairs(test_data, recipe)
    model = recipe_network(recipe)
    callback = (None if test_from_epoch is None else
                record_test_accuracy(model, test_data, start=test_from_epoch, report=report))
    loads = [_load_average()]
    model, history = train_recipe(recipe, train_data, model=model, on_epoch_end=callback,
                                  progress=progress)
    loads.append(_load_average())
    checkpoint, json_path = shipped_paths(name, out_dir)
    save_checkpoint(checkpoint, model, objective=recipe_objective(recipe), history=history,
                    half=half, metadata={"recipe": dataclasses.asdict(recipe)})
    shipped, _ = load_checkpoint(checkpoint)  # measure the weights exactly as they are shipped
    scores = accuracy_on(shipped, test_data)
    metrics = _metrics(name, recipe, checkpoint, history, train_data, test_data, scores["accuracy"],
                       loads)
    if "at_least_one" in scores:
        metrics["test_at_least_one"] = scores["at_least_one"]
    json_path.write_text(json.dumps(metrics, indent=2) + "\n")
    return metrics


def main(argv: list[str] | None = None) -> dict[str, dict[str, Any]]:
    parser = argparse.ArgumentParser(prog="python -m capsedu.zoo.train",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("names", nargs="+", choices=[*sorted(RECIPES), "all"],
                        help="the shipped networks to train, or 'all' (one after the other)")
    parser.add_argument("--out-dir", type=Path, default=WEIGHTS_DIR,
                        help="folder for NAME.pt and NAME.json (default: capsedu/zoo/weights)")
    parser.add_argument("--data-root", type=Path, default=None,
                        help="MNIST data root for the test split (default: $CAPSEDU_DATA)")
    parser.add_argument("--epochs", type=int, default=None, help="override the recipes' epochs")
    parser.add_argument("--seed", type=int, default=None, help="override the recipes' seed")
    parser.add_argument("--test-from-epoch", type=int, default=None,
                        help="test after every epoch from this one on (time to 98.0/98.5 %%)")
    parser.add_argument("--float32", action="store_true", help="store float32 instead of float16")
    args = parser.parse_args(argv)
    reuse_large_allocations()  # EM routing's large tensors: half the step time (hardware.py)
    names = sorted(RECIPES) if "all" in args.names else list(dict.fromkeys(args.names))
    overrides = {k: v for k, v in (("epochs", args.epochs), ("seed", args.seed)) if v is not None}
    results = {}
    for name in names:
        recipe = dataclasses.replace(RECIPES[name], **overrides)
        print(f"== {name}: {recipe}")
        metrics = train_shipped(name, recipe, args.out_dir, data_root=args.data_root,
                                half=not args.float32, test_from_epoch=args.test_from_epoch,
                                report=print)
        print(json.dumps({k: v for k, v in metrics.items() if k != "history"}, indent=2))
        results[name] = metrics
    return results


if __name__ == "__main__":
    main()
