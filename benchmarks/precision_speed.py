r"""Training speed of the shipped recipes in float32 and in bfloat16, one after the other.

    CAPSEDU_DATA=../shared/data/mnist-full python -m benchmarks.precision_speed
    python -m benchmarks.precision_speed capsnet em --images 1024 --rounds 3

For each recipe (:mod:`capsedu.zoo.recipes`) the script trains a fresh network of the recipe
through :func:`capsedu.zoo.train.train_recipe` - the recipe's batch size, augmentation or fresh
pairs, objective and optimiser - for one epoch of ``--images`` training images (pairs for the
MultiMNIST recipes), once in ``precision="float32"`` and once in ``precision="bfloat16"``,
alternating for ``--rounds`` rounds after an untimed warm-up of each, so that a drift of the
machine's speed hits both alike. It prints each precision's median images (pairs) per second of
``history["train_seconds"]``, their ratio, the processor and the load average before and after.
Accuracy is not measured here: whether bfloat16 trains to the same accuracy is a question for
full runs on the validation split (``benchmarks.recipe_search NAME --set 'precision="bfloat16"'``).
Where the processor lacks native bfloat16, ``fit`` warns and trains in float32: the script says so.

Shape legend: none (no tensor shapes of its own).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics

import torch

from benchmarks.measure import cpu_model
from capsedu.data.mnist import MNISTData
from capsedu.training.hardware import bfloat16_problem, reuse_large_allocations
from capsedu.zoo.recipes import RECIPES, Recipe
from capsedu.zoo.train import train_recipe
from coursetools.recipe_data import recipe_data

DEFAULT_RECIPES = ("capsnet", "cnn", "efficient", "em", "multimnist", "multimnist_cnn")


def short_recipe(recipe: Recipe, precision: str, images: int) -> Recipe:
    r"""``recipe`` for one epoch of ``images`` training images (or fresh pairs) in ``precision``."""
    pairs = {**recipe.pairs, "pairs_per_epoch": images} if recipe.pairs else {}
    return dataclasses.replace(recipe, epochs=1, precision=precision, pairs=pairs)


def images_per_second(recipe: Recipe, train_data, images: int) -> float:
    r"""One epoch of :func:`short_recipe`: training images (pairs) per second."""
    _, history = train_recipe(recipe, train_data, progress=False)
    return images / history["train_seconds"][0]


def measure(name: str, train: MNISTData, images: int, rounds: int) -> dict[str, list[float]]:
    r"""Images (pairs) per second of recipe ``name`` on its ``train`` split in each precision,
    ``rounds`` alternating runs."""
    recipe = RECIPES[name]
    train = train if recipe.pairs else train.subset(images, seed=0)
    speeds: dict[str, list[float]] = {"float32": [], "bfloat16": []}
    for precision in speeds:  # warm-up: first allocations, one-time kernel choices
        images_per_second(short_recipe(recipe, precision, min(images, 4 * recipe.batch_size)), train,
                          min(images, 4 * recipe.batch_size))
    for _ in range(rounds):
        for precision in speeds:
            speeds[precision].append(images_per_second(short_recipe(recipe, precision, images), train, images))
    return speeds


def main(argv: list[str] | None = None) -> dict[str, dict[str, list[float]]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("names", nargs="*", default=list(DEFAULT_RECIPES), help="recipes (default: %(default)s)")
    parser.add_argument("--images", type=int, default=2048, help="training images (pairs) per timed epoch")
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds per recipe")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    unknown = sorted(set(args.names) - set(RECIPES))
    if unknown:
        parser.error(f"names: unknown recipes {unknown}; expected some of {sorted(RECIPES)}")
    torch.set_num_threads(args.threads)
    reuse_large_allocations()
    problem = bfloat16_problem(torch.device("cpu"))
    load = os.getloadavg()
    print(f"{cpu_model()}, {args.threads} threads, torch {torch.__version__}; "
          f"{args.images:,} images (pairs) per epoch, median of {args.rounds} rounds")
    if problem:
        print(f"no native bfloat16 here ({problem}): fit trains the 'bfloat16' runs in float32")
    results = {}
    print(f"{'recipe':16s} {'batch':>5s} {'float32/s':>10s} {'bfloat16/s':>11s} {'ratio':>6s}")
    splits: dict[str, MNISTData] = {}  # dataset -> its train split, loaded once
    for name in args.names:
        dataset = RECIPES[name].dataset
        if dataset not in splits:
            splits[dataset] = recipe_data(RECIPES[name])["train"]
        results[name] = measure(name, splits[dataset], args.images, args.rounds)
        f32, bf16 = (statistics.median(results[name][p]) for p in ("float32", "bfloat16"))
        print(f"{name:16s} {RECIPES[name].batch_size:5d} {f32:10.0f} {bf16:11.0f} {bf16 / f32:5.2f}x", flush=True)
    after = os.getloadavg()
    print(f"load average before {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, after {after[0]:.2f} {after[1]:.2f} {after[2]:.2f}")
    return results


if __name__ == "__main__":
    main()
