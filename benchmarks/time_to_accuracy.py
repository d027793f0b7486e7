r"""Time to 98.0-99.5 % validation accuracy of a shipped network's recipe, median of several seeds.

Trains the recipe of a shipped network (default ``capsnet``, :data:`capsedu.zoo.recipes.RECIPES`:
``CapsNetConfig.cpu()``, one-cycle Adam, 2-pixel shifts, the 55,000-image train split of
:mod:`capsedu.data.splits`) once per seed, measures the 5,000-image validation split after every
epoch, and prints for each seed and as the median over seeds the training time (wall, evaluation
excluded) at which each target was first reached on validation (and after which epoch: the
number of images it took does not depend on the machine's speed, the seconds do), and the final
test accuracy on the official split. The load average before and after each run is printed.

Usage (from the repository root, with the complete MNIST under ``$CAPSEDU_DATA``)::

    CAPSEDU_DATA=/path/to/data .venv/bin/python -m benchmarks.time_to_accuracy --seeds 0 1 2
    .venv/bin/python -m benchmarks.time_to_accuracy --name capsnet --epochs 20 --seeds 0

Each run writes its checkpoint and metrics JSON into a temporary folder (``--out-dir`` to keep them).

Shape legend: none (no tensor shapes of its own).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import tempfile
from pathlib import Path

import torch

from capsedu.zoo.recipes import RECIPES
from coursetools.train_zoo import train_shipped

TARGETS = (0.98, 0.985, 0.99, 0.995)  # those coursetools.train_zoo records


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--name", default="capsnet", choices=sorted(RECIPES))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--epochs", type=int, default=None, help="override the recipe's epochs")
    parser.add_argument("--batch-size", type=int, default=None)
    parser.add_argument("--lr", type=float, default=None, help="peak learning rate")
    parser.add_argument("--data-root", type=Path, default=None)
    parser.add_argument("--out-dir", type=Path, default=None)
    parser.add_argument("--threads", type=int, default=2, help="torch intra-op threads")
    return parser.parse_args(argv)


def _reached(metrics: dict, target: float) -> float | None:
    found = metrics[f"time_to_{target * 100:.1f}"]
    return None if found is None else found["train_seconds"]


def _cell(metrics: dict, target: float) -> str:
    found = metrics[f"time_to_{target * 100:.1f}"]
    return "not reached" if found is None else f"{found['train_seconds']:.0f} s (epoch {found['epoch']})"


def main(argv: list[str] | None = None) -> list[dict]:
    args = parse(argv)
    torch.set_num_threads(args.threads)
    overrides = {k: v for k, v in (("epochs", args.epochs), ("batch_size", args.batch_size),
                                   ("lr", args.lr)) if v is not None}
    runs = []
    for seed in args.seeds:
        recipe = dataclasses.replace(RECIPES[args.name], seed=seed, **overrides)
        out = args.out_dir or Path(tempfile.mkdtemp(prefix="capsedu-tta-"))
        metrics = train_shipped(f"{args.name}_seed{seed}", recipe, out, data_root=args.data_root,
                                progress=False)
        runs.append(metrics)
        times = ", ".join(f"{t:.1%} after {_reached(metrics, t) or float('nan'):.0f} s"
                          for t in TARGETS)
        print(f"seed {seed}: {times}; final {metrics['test_accuracy']:.2%} after "
              f"{metrics['train_wall_seconds']:.0f} s ({metrics['train_images_per_second']:.0f} "
              f"img/s); load {metrics['load_average_before']} -> {metrics['load_average_after']}",
              flush=True)
    print(f"\n{args.name}: {dataclasses.replace(RECIPES[args.name], seed=-1, **overrides)}")
    print(f"test data: {runs[0]['test_data']['source']} ({runs[0]['test_data']['images']:,} images)")
    print("| target | " + " | ".join(f"seed {s}" for s in args.seeds) + " | median |")
    print("| --- | " + " | ".join("---" for _ in args.seeds) + " | --- |")
    for target in TARGETS:
        values = [_reached(m, target) for m in runs]
        known = [v for v in values if v is not None]
        median = statistics.median(known) if len(known) == len(values) else None
        cells = [_cell(m, target) for m in runs]
        print(f"| {target:.1%} | " + " | ".join(cells) + " | "
              + ("not reached by every seed" if median is None else f"{median:.0f} s") + " |")
    finals = [m["test_accuracy"] for m in runs]
    print("| final | " + " | ".join(f"{a:.2%}" for a in finals) + f" | {statistics.median(finals):.2%} |")
    print(f"load average now {tuple(round(x, 2) for x in os.getloadavg())}")
    return runs


if __name__ == "__main__":
    main()
