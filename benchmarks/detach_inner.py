r"""Does detaching the inner routing iterations matter for training? The shipped recipe, both ways.

    CAPSEDU_DATA=/path/to/data .venv/bin/python -m benchmarks.detach_inner --seeds 0 1 2
    .venv/bin/python -m benchmarks.detach_inner --seeds 0 --epochs 5 --out /tmp/study.json

``detach_inner=True`` (capsedu's default, and most re-implementations') lets gradients reach the
prediction vectors only through the last routing iteration; ``False`` (the paper's code)
differentiates through every iteration's agreement and softmax. This script trains the shipped
CapsNet recipe (:data:`capsedu.zoo.recipes.RECIPES`) with each setting and each seed - same data,
same initial weights per seed - on the three splits of :mod:`capsedu.data.splits`, and records
the validation accuracy after each epoch, the test accuracy on the official split (with its
standard error), the epoch and training time at which 98.5 % was first reached on validation,
the training time, and the load average. ``--epochs`` shortens the recipe (its one-cycle schedule
shrinks with it). The result is written as the study JSON that lesson 03
prints (``capsedu/zoo/studies/detach_inner.json`` by default).

Shape legend: none (no tensor shapes of its own).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

import torch

from capsedu.zoo.recipes import RECIPES
from capsedu.zoo.shipped import STUDIES_DIR
from coursetools.out_paths import outside_installed_packages
from coursetools.train_zoo import train_shipped


def run(seeds: list[int], epochs: int | None, data_root: Path | None) -> dict:
    runs = []
    for seed in seeds:
        for detach in (True, False):
            base = RECIPES["capsnet"]
            recipe = dataclasses.replace(base, seed=seed, config={**base.config, "detach_inner": detach},
                                         **({"epochs": epochs} if epochs else {}))
            metrics = train_shipped(f"detach_{detach}_seed{seed}", recipe, tempfile.mkdtemp(),
                                    data_root=data_root, progress=False)
            reached = metrics["time_to_98.5"]
            runs.append({"detach_inner": detach, "seed": seed, "test_accuracy": metrics["test_accuracy"],
                         "test_standard_error": metrics["test_standard_error"],
                         "validation_accuracy": metrics["history"]["validation_accuracy"],
                         "epoch_to_98.5": reached and reached["epoch"],
                         "seconds_to_98.5": reached and reached["train_seconds"],
                         "train_seconds": metrics["train_wall_seconds"],
                         "load_average": [metrics["load_average_before"], metrics["load_average_after"]]})
            print(json.dumps(runs[-1]), flush=True)
    summary = {}
    for detach in (True, False):
        chosen = [r for r in runs if r["detach_inner"] is detach]
        accuracies = [r["test_accuracy"] for r in chosen]
        summary[str(detach)] = {"mean_accuracy": statistics.mean(accuracies),
                                "min_accuracy": min(accuracies), "max_accuracy": max(accuracies),
                                "mean_train_seconds": statistics.mean(r["train_seconds"] for r in chosen)}
    return {"recipe": dataclasses.asdict(RECIPES["capsnet"]), "epochs": epochs or RECIPES["capsnet"].epochs,
            "train_data": metrics["train_data"], "test_data": metrics["test_data"],
            "cpu": metrics["cpu"], "cpu_count": os.cpu_count(),
            "torch": torch.__version__, "runs": runs, "summary": summary}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--epochs", type=int, default=None, help="override the recipe's epochs")
    parser.add_argument("--data-root", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=STUDIES_DIR / "detach_inner.json")
    args = parser.parse_args(argv)
    args.out = outside_installed_packages(args.out, "--out")  # before any work
    torch.set_num_threads(2)
    result = run(args.seeds, args.epochs, args.data_root)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    for detach, row in result["summary"].items():
        print(f"detach_inner={detach}: test accuracy {row['mean_accuracy']:.2%} (min {row['min_accuracy']:.2%},"
              f" max {row['max_accuracy']:.2%}), {row['mean_train_seconds']:.0f} s of training")
    print(f"written to {args.out}", file=sys.stderr)
    return result


if __name__ == "__main__":
    main()
