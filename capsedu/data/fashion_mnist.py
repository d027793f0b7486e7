r"""Fashion-MNIST (Xiao, Rasul & Vollgraf 2017): Zalando's 28x28 clothing images, MNIST's format.

Ten classes (:data:`CLASSES`), 6,000 training and 1,000 test images each, released under the MIT
licence. Read the way :mod:`.mnist` reads MNIST - the same IDX files and in-memory dataset - from
the first source that has them:

1. files under the data root (``root``, else ``$CAPSEDU_DATA``, else ``~/.cache/capsedu``), in
   torchvision's layout ``FashionMNIST/raw/`` or in ``fashion-mnist/``;
2. Debian's ``dataset-fashion-mnist`` package (``sudo apt install dataset-fashion-mnist``), which
   puts the four files in ``/usr/share/datasets/fashion-mnist/``;
3. a torchvision download into the data root, where the network allows.

There is no offline subset: without any of them :func:`load_fashion_mnist` stops and says how to
get the files. Each file is checked by the SHA-256 of its content (:mod:`.files`): Debian
recompressed the archives, so their MD5 sums are not the ones torchvision checks, but their
content is the publisher's - the two label files decompress to exactly what the publisher's
repository holds (zalandoresearch/fashion-mnist, archives with torchvision's MD5 sums), and all
four digests equal those that other projects record for the publisher's archives.

Splits, as for the shipped MNIST networks (:mod:`.splits`): ``"validation"`` is the first 500
images of each class of the official training file, ``"train"`` the other 55,000, ``"test"`` the
official 10,000.

Shape legend:
    N      images in a split
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

from capsedu.data import files
from capsedu.data.files import DataFileError, find_pair, read_pair
from capsedu.data.mnist import FILES, MNISTData, data_root, root_name
from capsedu.data.splits import offline_positions

CLASSES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
           "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot")
DEBIAN_FOLDER = Path("/usr/share/datasets/fashion-mnist")
SPLITS = ("train", "validation", "test")
SHA256 = {"train-images-idx3-ubyte": "c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888",
          "train-labels-idx1-ubyte": "bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9",
          "t10k-images-idx3-ubyte": "5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b",
          "t10k-labels-idx1-ubyte": "0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34"}
HOW_TO_GET = ("install Debian's package (sudo apt install dataset-fashion-mnist), or, with a network, "
              "call load_fashion_mnist(download=True), or copy the four files of "
              "https://github.com/zalandoresearch/fashion-mnist (data/fashion/) into DATA_ROOT/fashion-mnist/")

DEBIAN_ADVICE = ("the files of Debian's package are damaged: reinstall it "
                 "(sudo apt install --reinstall dataset-fashion-mnist)")


def folders(root: Path) -> tuple[Path, ...]:
    r"""Where Fashion-MNIST files are looked for, in order (never the data root itself: MNIST's
    files carry the same names)."""
    return root / "FashionMNIST" / "raw", root / "fashion-mnist", DEBIAN_FOLDER


def _official(split: str, root: str | os.PathLike | None, download: bool) -> tuple[torch.Tensor, torch.Tensor, str]:
    r"""The official ``"train"`` or ``"test"`` file pair's images (N, 28, 28), labels and source."""
    folder = data_root(root)
    found = find_pair(folders(folder), FILES[split])
    if found:
        debian = found[0].parent == DEBIAN_FOLDER
        where = "Debian's dataset-fashion-mnist" if debian else root_name(root)
        advice = DEBIAN_ADVICE if debian else files.ADVICE
        return *read_pair(*found, SHA256, "Fashion-MNIST", advice), f"official Fashion-MNIST files ({where})"
    fetched, why = files.download(folder, split, "FashionMNIST") if download else (None, "download=False")
    if fetched is None:
        looked = ", ".join(str(f) for f in folders(folder))
        raise DataFileError(f"no Fashion-MNIST {split} files (looked in {looked}; no download: {why}). "
                            f"To get them: {HOW_TO_GET.replace('DATA_ROOT', str(folder))}")
    return *fetched, f"torchvision download under {root_name(root)}"


def load_fashion_mnist(split: str = "train", root: str | os.PathLike | None = None, *,
                       download: bool = True, verbose: bool = True) -> MNISTData:
    r"""A Fashion-MNIST split as an in-memory dataset of (1, 28, 28) images in [0, 1].

    Args:
        split: ``"train"`` (55,000), ``"validation"`` (5,000) or ``"test"`` (10,000).
        root: data root; defaults to ``$CAPSEDU_DATA`` or ``~/.cache/capsedu``.
        download: try torchvision's download when no files are found.
        verbose: print one line naming the split and its source.

    Raises:
        DataFileError: no files and no download (saying how to get them), or a corrupt file.
    """
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    images, labels, source = _official("test" if split == "test" else "train", root, download)
    if split != "test":
        held_out = torch.zeros(len(labels), dtype=torch.bool)
        held_out[offline_positions(labels)] = True  # the first 500 of each class
        keep = held_out if split == "validation" else ~held_out
        images, labels = images[keep], labels[keep]
        source += ", the first 500 of each class" if split == "validation" else ", less the first 500 of each class"
    data = MNISTData(images.unsqueeze(1).float().div_(255.0), labels.long(), source)
    if verbose:
        print(f"Fashion-MNIST {split}: {len(data):,} images, {source}")
    return data


