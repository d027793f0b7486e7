r"""Short training runs of the EM-routing network (lesson 11): which change to its recipe helps?

    CAPSEDU_DATA=/path/to/data .venv/bin/python -m benchmarks.em_study --epochs 3 --variants \
        '{"shipped": {}, "class lambda 0.01": {"class_inverse_temperature": 0.01}}'

Trains the ``em`` recipe (:data:`capsedu.zoo.recipes.RECIPES`) once per variant - a name and the
network-config fields it changes, as JSON - for ``--epochs`` epochs (the spread loss's margin
ramped over the first half of them, at least one) on the 4,000 offline training digits, after
:func:`capsedu.training.hardware.reuse_large_allocations` as the train command does, and tests
each on ``--test-images`` images of the official test split (the offline test part when it is
missing; the output says which). It prints, per variant, the training accuracy and loss of every
epoch, the test accuracy and the seconds the run took, then the load average before and after.
The one-cycle schedule spans the run's own epochs: compare runs of equal length.

Shape legend: none (no tensor shapes of its own).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import time

import torch

from capsedu.data.mnist import load_mnist, load_offline
from capsedu.training.hardware import reuse_large_allocations
from capsedu.training.loop import evaluate
from capsedu.zoo.recipes import RECIPES
from capsedu.zoo.train import train_recipe


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--variants", type=json.loads, default={"shipped": {}},
                        help='JSON: {"name": {config field: value, ...}, ...}')
    parser.add_argument("--test-images", type=int, default=2_000)
    parser.add_argument("--threads", type=int, default=2, help="torch intra-op threads")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    reuse_large_allocations()
    load = os.getloadavg()
    train = load_offline("train")
    test = load_mnist("test", download=False, verbose=False)
    test = test.subset(min(args.test_images, len(test)), seed=0)
    print(f"{len(train):,} training digits; {len(test):,} test digits from {test.source}; load "
          f"average {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}")
    results = {}
    for name, fields in args.variants.items():
        base = RECIPES["em"]
        recipe = dataclasses.replace(base, epochs=args.epochs, config={**base.config, **fields},
                                     objective={**base.objective, "ramp_epochs": max(1, args.epochs // 2)})
        start = time.perf_counter()
        model, history = train_recipe(recipe, train, progress=False)
        accuracy = evaluate(model, torch.utils.data.DataLoader(test, batch_size=32))["accuracy"]
        results[name] = {"train_accuracy": history["train_accuracy"], "test_accuracy": accuracy,
                         "seconds": time.perf_counter() - start}
        print(f"{name}: {fields}\n  train accuracy {[f'{a:.1%}' for a in history['train_accuracy']]}, "
              f"loss {[round(v, 3) for v in history['train_loss']]}\n  test {accuracy:.2%}, "
              f"{results[name]['seconds']:.0f} s", flush=True)
    load = os.getloadavg()
    print(f"load average after: {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}")
    return results


if __name__ == "__main__":
    main()
