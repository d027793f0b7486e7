r"""The data a shipped network's recipe trains and is measured on (:func:`recipe_data`): a tool of
the repository (``python -m coursetools.train_zoo``, the benchmarks), not of the package.

Every recipe (:mod:`capsedu.zoo.recipes`) learns from the 55,000-image train split of its dataset
(MNIST, :mod:`capsedu.data.splits`, or Fashion-MNIST, :mod:`capsedu.data.fashion_mnist`), is
validated on the 5,000-image validation split and tested on the official test split. A pairs
recipe (MultiMNIST) is measured on fixed pairs drawn from them (:func:`fixed_pairs`); a 40x40
recipe (``canvas=40``, lesson 08) on digits placed on the canvas as in training (:func:`padded`,
:func:`capsedu.data.transforms.on_canvas`, :func:`capsedu.zoo.train.padded`), and after every epoch also on affNIST-like
validation digits.

Shape legend:
    N      number of images
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from capsedu.data.fashion_mnist import load_fashion_mnist
from capsedu.data.mnist import MNISTData
from capsedu.data.multimnist import MULTIMNIST_TEST, MULTIMNIST_VALIDATION, MultiMNIST
from capsedu.data.splits import load_split
from capsedu.data.transforms import CANVAS, affnist_like_40, on_canvas
from capsedu.zoo.recipes import Recipe
from capsedu.zoo.train import require_canvas


def fixed_pairs(digits: MNISTData, recipe: Recipe, fixed: dict[str, int] = MULTIMNIST_TEST) -> MultiMNIST:
    r"""The fixed MultiMNIST pairs of a pairs recipe drawn from ``digits``: by default the course's
    test pairs (from the test split); ``MULTIMNIST_VALIDATION`` for the validation pairs."""
    options = {k: v for k, v in recipe.pairs.items() if k != "pairs_per_epoch"}
    return MultiMNIST(digits, fixed["num_pairs"], seed=fixed["seed"], **options)


def _loader(dataset: str) -> Callable[..., MNISTData]:
    r"""The function loading ``dataset``'s splits: MNIST's or Fashion-MNIST's."""
    loaders = {"mnist": load_split, "fashion": load_fashion_mnist}
    if dataset not in loaders:
        raise ValueError(f"recipe.dataset must be one of {sorted(loaders)}, got {dataset!r}")
    return loaders[dataset]


def recipe_data(recipe: Recipe, data_root: str | os.PathLike | None = None) -> dict[str, Any]:
    r"""The recipe's three sets: ``train`` digits, ``validation`` and ``test`` (digits, or for a
    pairs recipe the fixed pairs drawn from them)."""
    data: dict[str, Any] = {split: _loader(recipe.dataset)(split, data_root, download=split != "validation")
                            for split in ("train", "validation", "test")}
    if recipe.pairs:
        data["validation"] = fixed_pairs(data["validation"], recipe, MULTIMNIST_VALIDATION)
        data["test"] = fixed_pairs(data["test"], recipe)
    if require_canvas(recipe.canvas) == CANVAS:
        data["validation_affnist"] = affnist_like_40(data["validation"])
        data["validation"], data["test"] = on_canvas(data["validation"]), on_canvas(data["test"])
    return data
