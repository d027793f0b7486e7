r"""Lesson 08's table: the shipped CapsNet and CNN on rotated, scaled, sheared, shifted and
affNIST-like versions of the test split.

    CAPSEDU_DATA=/path/to/data .venv/bin/python -m benchmarks.robustness           # full test split
    .venv/bin/python -m benchmarks.robustness --images 1000 --out /tmp/robustness.json

Every transformation is :mod:`capsedu.data.transforms`' (a 40x40 canvas, torchvision's affine, the
central 28x28 crop); every image of the test split is used unless ``--images`` takes a seeded,
class-balanced subset. Writes the study that lesson 08 prints
(``capsedu/zoo/studies/robustness.json``): per transformation (its family and value), each
network's accuracy, its per-image results (``correct``, packed: :func:`capsedu.unpack_correct`)
and the mean share of ink the 28x28 frame kept.

Shape legend: none (no tensor shapes of its own).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import torch

import capsedu
from capsedu.data.transforms import ROTATIONS, affnist_like, transform_images
from capsedu.zoo.shipped import STUDIES_DIR
from coursetools.out_paths import outside_installed_packages

from .measure import scored

NETWORKS = ("capsnet", "cnn")
SCALES = (0.7, 0.8, 0.9, 1.1, 1.2, 1.3)
SHEARS = (-0.3, -0.2, -0.1, 0.1, 0.2, 0.3)
SHIFTS = (2, 3, 4, 5, 6)


def transformations() -> list[tuple[str, str, float, dict]]:
    r"""(row name, family, value, keywords of transform_images) for every row of the table."""
    rows = [(f"rotation {a:+d}°", "rotation", float(a), {"angle": float(a)}) for a in ROTATIONS]
    rows += [(f"scale {s:.1f}", "scale", s, {"scale": s}) for s in SCALES]
    rows += [(f"shear {s:+.1f}", "shear", s, {"shear": s}) for s in SHEARS]
    rows += [(f"shift {s} px right", "shift right", float(s), {"shift": (float(s), 0.0)}) for s in SHIFTS]
    rows += [(f"shift {s} px diagonal", "shift diagonal", float(s), {"shift": (float(s), float(s))})
             for s in SHIFTS]
    return rows


def measure(test: capsedu.MNISTData) -> dict:
    models = {name: capsedu.pretrained(name) for name in NETWORKS}
    table: dict[str, dict] = {"clean": {"family": "clean", "value": None, "ink_kept": 1.0,
                                        **scored(models, test.images, test.labels)}}
    for name, kind, value, kwargs in transformations():
        images, kept = transform_images(test.images, **kwargs, return_ink_kept=True)
        table[name] = {"family": kind, "value": value, "ink_kept": float(kept.mean()),
                       **scored(models, images, test.labels)}
        print(name, {k: v for k, v in table[name].items() if k not in ("family", "correct")}, flush=True)
    affine = affnist_like(test, seed=0)
    table["affNIST-like"] = {"family": "affNIST-like", "value": None, "ink_kept": None,
                             **scored(models, affine.images, test.labels)}
    print("affNIST-like", {k: v for k, v in table["affNIST-like"].items() if k != "correct"})
    return {"networks": {net: {"parameters": sum(p.numel() for p in m.parameters()),
                               "recorded_test_accuracy": capsedu.pretrained_metrics(net)["test_accuracy"]}
                         for net, m in models.items()},
            "test_data": {"images": len(test), "source": test.source}, "table": table,
            "affnist_like": {"seed": 0, "rotation": [-20, 20], "shear": [-0.2, 0.2],
                             "scale": [0.8, 1.2], "max_shift": 2},
            "load_average": os.getloadavg()}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--images", type=int, default=None, help="a class-balanced subset of the test split")
    parser.add_argument("--data-root", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=STUDIES_DIR / "robustness.json")
    args = parser.parse_args(argv)
    args.out = outside_installed_packages(args.out, "--out")  # before any work
    torch.set_num_threads(2)
    test = capsedu.load_mnist("test", args.data_root, download=False)
    if args.images:
        test = test.subset(args.images, seed=0)
    result = measure(test)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    return result


if __name__ == "__main__":
    main()
