r"""Short MultiMNIST training runs (lesson 09): which change to the shipped recipe is worth its time?

    CAPSEDU_DATA=/path/to/data .venv/bin/python -m benchmarks.multimnist_study --epochs 4 \
        --batch-size 64 --lr 3e-3
    CAPSEDU_DATA=/path/to/data .venv/bin/python -m benchmarks.multimnist_study --epochs 4 \
        --batch-size 64 --lr 3e-3 --config '{"primary_types": 16}'

Trains the ``multimnist`` recipe (:data:`capsedu.zoo.recipes.RECIPES`; ``--name multimnist_cnn``
for the CNN) with the given overrides - epochs, pairs per epoch, batch size, peak learning rate
and fields of the network config - on the 4,000 offline training digits, and after every epoch
tests it on ``--test-pairs`` pairs of the official test split (seed 0; the offline test part
when the official split is missing - the output says which). It prints, per epoch, the
cumulative training minutes (evaluation excluded), the training accuracy, and the share of test
pairs with both digits right and with at least one right, then the load average before and
after. The one-cycle schedule spans the run's own epochs, so a 4-epoch run anneals early: compare
runs of equal length, and read the result as a guide for the full recipe, not a forecast of it.

Shape legend: none (no tensor shapes of its own).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os

import torch

from capsedu.data.mnist import load_mnist, load_offline
from capsedu.data.multimnist import MultiMNIST
from capsedu.training.prediction import pair_accuracy
from capsedu.zoo.recipes import RECIPES
from capsedu.zoo.train import recipe_network, train_recipe


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--name", default="multimnist", choices=["multimnist", "multimnist_cnn"])
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--pairs-per-epoch", type=int, default=60_000)
    parser.add_argument("--batch-size", type=int, default=None)
    parser.add_argument("--lr", type=float, default=None, help="peak learning rate")
    parser.add_argument("--config", type=json.loads, default={},
                        help='network config fields to change, as JSON, e.g. \'{"primary_types": 16}\'')
    parser.add_argument("--test-pairs", type=int, default=2_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2, help="torch intra-op threads")
    return parser.parse_args(argv)


def study_recipe(args: argparse.Namespace):
    r"""The shipped recipe with this run's overrides."""
    base = RECIPES[args.name]
    overrides = {k: v for k, v in (("batch_size", args.batch_size), ("lr", args.lr)) if v is not None}
    recipe = dataclasses.replace(base, epochs=args.epochs, seed=args.seed,
                                 config={**base.config, **args.config},
                                 pairs={**base.pairs, "pairs_per_epoch": args.pairs_per_epoch},
                                 **overrides)
    return recipe


def main(argv: list[str] | None = None) -> list[dict]:
    args = parse(argv)
    torch.set_num_threads(args.threads)
    recipe = study_recipe(args)
    options = {k: v for k, v in recipe.pairs.items() if k != "pairs_per_epoch"}
    test = MultiMNIST(load_mnist("test", download=False), args.test_pairs, seed=0, **options)
    model = recipe_network(recipe)  # seeded as train_recipe would; an unknown config field fails here
    print(f"{args.name}: {sum(p.numel() for p in model.parameters()):,} parameters; epochs "
          f"{recipe.epochs} x {args.pairs_per_epoch:,} pairs, batch {recipe.batch_size}, peak lr "
          f"{recipe.lr:g}, config changes {args.config or 'none'}; load average {os.getloadavg()}")
    print("| epoch | minutes | train | test both | test at least one |")
    print("| --- | --- | --- | --- | --- |")
    rows: list[dict] = []

    def report(epoch: int, history: dict) -> None:
        accuracy = pair_accuracy(model, test)
        rows.append({"epoch": epoch, "minutes": sum(history["train_seconds"]) / 60,
                     "train": history["train_accuracy"][-1], **accuracy})
        row = rows[-1]
        print(f"| {epoch} | {row['minutes']:.1f} | {row['train']:.1%} | {row['both']:.2%} | "
              f"{row['at_least_one']:.2%} |", flush=True)

    train_recipe(recipe, load_offline("train"), model=model, on_epoch_end=report, progress=False)
    print(f"load average after {os.getloadavg()}")
    return rows


if __name__ == "__main__":
    main()
