r"""Try a shipped recipe with changes on the validation split, and record the try.

    CAPSEDU_DATA=../shared/data/mnist-full python -m benchmarks.recipe_search capsnet --epochs 3
    python -m benchmarks.recipe_search cnn --epochs 3 --set config.channels=[32,64,64] --note "narrow convs"

Each run trains the recipe (:mod:`capsedu.zoo.recipes`, with the ``--set`` changes: ``field=value``
or ``config.field=value``, values in JSON) on the 55,000-image train split, measures the
validation split after every epoch, and appends what it saw - the changes, the validation
accuracy per epoch with its standard error, minutes, images per second and the load average -
to ``benchmarks/tries.json`` under the recipe's name. ``python -m coursetools.train_zoo``
copies a network's tries into its ``NAME.json``: the record of how its recipe was chosen. The
test split is never touched here.

Shape legend: none (no tensor shapes of its own).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import time
from pathlib import Path

import torch

from capsedu.training.hardware import reuse_large_allocations
from capsedu.training.uncertainty import standard_error
from capsedu.zoo.recipes import RECIPES
from capsedu.zoo.train import recipe_network, train_recipe
from coursetools.out_paths import outside_installed_packages
from coursetools.recipe_data import recipe_data
from coursetools.train_zoo import TRIES, record_accuracy, with_changes


def record(name: str, entry: dict, path: Path = TRIES) -> None:
    tries = json.loads(path.read_text()) if path.is_file() else {}
    tries.setdefault(name, []).append(entry)
    path.write_text(json.dumps(tries, indent=1) + "\n")


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("name", choices=sorted(RECIPES))
    parser.add_argument("--epochs", type=int, default=None, help="epochs of the try (default: the recipe's)")
    parser.add_argument("--set", dest="settings", action="append", default=[],
                        help="field=value or config.field=value (JSON values); repeatable")
    parser.add_argument("--note", default="", help="why this try")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--dry-run", action="store_true", help="do not record the try")
    parser.add_argument("--tries", type=Path, default=TRIES, help="where tries are recorded")
    args = parser.parse_args(argv)
    args.tries = outside_installed_packages(args.tries, "--tries")  # before any work
    torch.set_num_threads(args.threads)
    reuse_large_allocations()
    recipe, changes = with_changes(RECIPES[args.name], args.settings)
    recipe = dataclasses.replace(recipe, epochs=args.epochs or recipe.epochs)
    data = recipe_data(recipe)
    load, start = os.getloadavg(), time.perf_counter()
    model = recipe_network(recipe)
    _, history = train_recipe(recipe, data["train"], model=model, progress=False,
                              on_epoch_end=record_accuracy(model, data["validation"], report=print))
    seconds = sum(history["train_seconds"])
    seen = recipe.pairs.get("pairs_per_epoch", len(data["train"])) * recipe.epochs
    entry = {"changes": changes, "note": args.note, "epochs": recipe.epochs,
             "validation_accuracy": history["validation_accuracy"],
             "validation_standard_error": standard_error(history["validation_accuracy"][-1],
                                                         len(data["validation"])),
             "train_accuracy": history["train_accuracy"], "train_minutes": round(seconds / 60, 1),
             "wall_minutes": round((time.perf_counter() - start) / 60, 1),
             "images_per_second": round(seen / seconds, 1),
             "parameters": sum(p.numel() for p in model.parameters()),
             "load_average": [round(x, 2) for x in (*load, *os.getloadavg())]}
    print(json.dumps(entry))
    if not args.dry_run:
        record(args.name, entry, args.tries)
    return entry


if __name__ == "__main__":
    main()
