r"""Dataset files on disk: a split's IDX pair found, checked by its content, read; or downloaded.

MNIST and Fashion-MNIST are published as IDX files, one pair (images, labels) per split,
gzip-compressed. A file here is accepted ``.gz`` or uncompressed and checked by the SHA-256 of
its *content* (the decompressed bytes), not of the archive: the same data compressed by someone
else - Debian recompressed Fashion-MNIST, so its archives' MD5 sums are not torchvision's -
passes, and a truncated, corrupt or different file is named with what to do.

Shape legend:
    N      images (and labels) in a file
    H, W   height and width of an image (28)
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import torch

ADVICE = "delete it (and its pair) so it is downloaded again, or point CAPSEDU_DATA at a good copy"


class DataFileError(RuntimeError):
    r"""A dataset file is missing, truncated or not the official one."""


def file_sha256(path: str | os.PathLike) -> str:
    r"""Hex SHA-256 of a file's bytes, read 1 MiB at a time."""
    hasher = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            hasher.update(block)
    return hasher.hexdigest()


def find_pair(folders: Sequence[Path], names: tuple[str, str]) -> tuple[Path, Path] | None:
    r"""The (images, labels) files ``names`` (each ``.gz`` or not) in the first of ``folders``
    that holds them, or None when none does; a folder holding only one of the two is an error."""
    for folder in folders:
        found = []
        for name in names:
            gz, raw = folder / f"{name}.gz", folder / name
            found.append(gz if gz.is_file() else raw if raw.is_file() else None)
        if all(found):
            return found[0], found[1]
        if any(found):
            missing = folder / names[found.index(None)]
            raise DataFileError(f"{missing}(.gz) is missing next to its pair in {folder}: "
                                "copy both files of the split there, or remove the one present")
    return None


def read_idx(path: Path, kind: str, sha256: Mapping[str, str], dataset: str, advice: str = ADVICE) -> torch.Tensor:
    r"""Read one IDX file with torchvision's readers after checking its content's SHA-256.

    ``sha256`` maps the file's name without ``.gz`` to the digest of the official content.
    torchvision is imported here, not at the top: importing it costs about 7 s on a 2-core
    machine (it loads ``torch._dynamo``), which every kernel that imports ``capsedu`` would pay.
    """
    from torchvision.datasets.mnist import read_image_file, read_label_file
    from torchvision.datasets.utils import extract_archive

    reader = read_image_file if kind == "images" else read_label_file
    try:
        with tempfile.TemporaryDirectory() as tmp:
            raw = Path(extract_archive(str(path), tmp)) if path.suffix == ".gz" else path
            expected, found = sha256[path.name.removesuffix(".gz")], file_sha256(raw)
            if found != expected:
                raise DataFileError(f"{path} is not the official {dataset} {kind} file (the SHA-256 of its "
                                    f"content is {found[:16]}..., expected {expected[:16]}...): {advice}")
            return reader(str(raw))
    except DataFileError:
        raise
    except Exception as error:  # truncated gzip, wrong magic number, wrong size, ...
        raise DataFileError(f"{path} could not be read as {dataset} {kind} "
                            f"({type(error).__name__}: {error}): {advice}") from None


def read_pair(images_path: Path, labels_path: Path, sha256: Mapping[str, str],
              dataset: str, advice: str = ADVICE) -> tuple[torch.Tensor, torch.Tensor]:
    r"""A split's images (N, 28, 28) uint8 and labels (N,) int64 from its checked pair of files;
    ``advice`` ends the error about a bad file (what to do about it)."""
    images = read_idx(images_path, "images", sha256, dataset, advice)  # (N, 28, 28) uint8
    labels = read_idx(labels_path, "labels", sha256, dataset, advice)  # (N,) int64
    if images.shape[0] != labels.shape[0] or tuple(images.shape[1:]) != (28, 28):
        raise DataFileError(f"{images_path} holds {tuple(images.shape)} images but {labels_path} holds "
                            f"{labels.shape[0]} labels; expected (N, 28, 28) and N labels")
    return images, labels


def outermost_missing(path: Path) -> Path | None:
    r"""The highest folder on the way to ``path`` (itself included) that does not exist yet."""
    missing = None
    for folder in (path, *path.parents):
        if folder.exists():
            break
        missing = folder
    return missing


def download(root: Path, split: str, dataset: str = "MNIST") -> tuple[tuple[torch.Tensor, torch.Tensor] | None, str]:
    r"""torchvision's download of ``dataset`` (a class of ``torchvision.datasets``: ``"MNIST"``,
    ``"FashionMNIST"``) into ``root``: ``(data, "")``, or ``(None, why it failed)`` - no network, no
    write access, a server down - removing the folders it had created."""
    import torchvision.datasets

    new = outermost_missing(root / dataset / "raw")  # where torchvision writes
    try:
        loaded = getattr(torchvision.datasets, dataset)(str(root), train=split == "train", download=True)
    except Exception as error:  # every failure means "no download": say which
        if new is not None:
            shutil.rmtree(new, ignore_errors=True)
        return None, f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else 'no message'}"
    return (loaded.data, loaded.targets), ""
