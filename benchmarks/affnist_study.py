r"""Lesson 08's protocol study (Sabour et al. 2017, Section 5.2): the CapsNet and the CNN trained on
digits placed anywhere on a 40x40 canvas, measured on the expanded and the affNIST-like test sets.

    CAPSEDU_DATA=/path/to/data .venv/bin/python -m benchmarks.affnist_study
    .venv/bin/python -m benchmarks.affnist_study --images 1000 --out /tmp/affnist40.json

It measures the shipped ``capsnet40`` and ``cnn40``
(``python -m coursetools.train_zoo capsnet40 cnn40``) on the official test split: placed on the
canvas as in training (:func:`on_canvas`, the paper's "expanded MNIST"), and under affNIST-like
transformations (:func:`affnist_like_40`) - all four at once, and each alone with the same draws
(the per-transformation breakdown), keeping each network's per-image results (``correct``,
packed) for paired comparisons. It copies each network's per-epoch validation curves
(expanded and affNIST-like) from its record, and the same for the runs with other seeds in
``capsedu/zoo/studies/seeds40/`` (``python -m coursetools.train_zoo capsnet40 cnn40 --seed 1
--out-dir DIR``; their records, without weights). Writes
``capsedu/zoo/studies/affnist40.json``, which lesson 08 prints.

Shape legend: none (no tensor shapes of its own).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import capsedu
from capsedu.data.transforms import AFFNIST_RANGES, PARTS, affnist_like_40, on_canvas
from capsedu.zoo.shipped import STUDIES_DIR, pretrained_metrics
from coursetools.out_paths import outside_installed_packages

from .measure import scored

NETWORKS = ("capsnet40", "cnn40")
SETS = {"centred": (), **{part: (part,) for part in PARTS}, "affNIST-like": PARTS}
TRAINED_MOVE = 6  # the largest move of the training digits' 28x28 frame (capsnet40's max_shift)
SEEDS_DIR = STUDIES_DIR / "seeds40"


def curves(record: dict) -> dict:
    r"""A training record's seed and per-epoch validation accuracies (expanded and affNIST-like)."""
    history = record["history"]
    return {"seed": record["recipe"]["seed"], "validation": history["validation_accuracy"],
            "validation_affnist": history["validation_affnist_accuracy"],
            "test_expanded": record["test_accuracy"], "device": record.get("device", "cpu")}


def measure(test: capsedu.MNISTData) -> dict:
    models = {name: capsedu.pretrained(name) for name in NETWORKS}
    sets = {"expanded": on_canvas(test), **{name: affnist_like_40(test, parts=parts)
                                             for name, parts in SETS.items()},
            f"translation within {TRAINED_MOVE} px": affnist_like_40(test, parts=("translation",),
                                                                    max_move=TRAINED_MOVE),
            f"affNIST-like, moves within {TRAINED_MOVE} px": affnist_like_40(test, max_move=TRAINED_MOVE)}
    table = {}
    for set_name, data in sets.items():
        table[set_name] = scored(models, data.images, data.labels)
        print(set_name, {k: v for k, v in table[set_name].items() if k != "correct"}, flush=True)
    return table


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--images", type=int, default=None, help="a class-balanced subset (default: all)")
    parser.add_argument("--out", type=Path, default=STUDIES_DIR / "affnist40.json")
    args = parser.parse_args(argv)
    args.out = outside_installed_packages(args.out, "--out")  # before any work
    test = capsedu.load_mnist("test", root=os.environ.get("CAPSEDU_DATA"), download=False)
    test = test.subset(args.images) if args.images else test
    seeds = {net: [curves(pretrained_metrics(net))] for net in NETWORKS}
    for path in sorted(SEEDS_DIR.glob("*.json")):
        record = json.loads(path.read_text())
        seeds[record["name"]].append(curves(record))
    study = {"images": len(test), "source": test.source, "ranges": AFFNIST_RANGES, "seed": 0,
             "accuracy": measure(test), "runs": seeds,
             "parameters": {net: sum(p.numel() for p in capsedu.pretrained(net).parameters())
                            for net in NETWORKS},
             "train_minutes": {net: round(pretrained_metrics(net)["train_wall_seconds"] / 60, 1)
                               for net in NETWORKS},
             "device": {net: pretrained_metrics(net)["device"] for net in NETWORKS}}
    args.out.write_text(json.dumps(study, indent=1) + "\n")
    print(f"wrote {args.out}")
    return study


if __name__ == "__main__":
    main()
