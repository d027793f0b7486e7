"""The shipped networks' three splits (capsedu.data.splits): 55,000 train, the 5,000 offline images
as validation, the official 10,000 test - disjoint, named by what they are, and refused when the
official training files are missing or are not MNIST's."""

from __future__ import annotations

import pytest
import torch

from capsedu.data.mnist import DataFileError
from capsedu.data.splits import SOURCES, load_split, offline_positions

pytestmark = pytest.mark.unit


def pixel_rows(images: torch.Tensor) -> set[bytes]:
    return {row.tobytes() for row in (images * 255).round().to(torch.uint8).flatten(1).numpy()}


def test_the_three_splits_are_disjoint_and_named(full_data):
    splits = {name: load_split(name, full_data, download=False, verbose=False) for name in SOURCES}
    assert {name: len(data) for name, data in splits.items()} == {
        "train": 55_000, "validation": 5_000, "test": 10_000}
    assert {name: data.source for name, data in splits.items()} == SOURCES
    assert "/" not in "".join(SOURCES.values()), "a split is named by what it is, never by a path"
    assert torch.bincount(splits["validation"].labels).tolist() == [500] * 10
    seen = pixel_rows(splits["train"].images)
    assert not seen & pixel_rows(splits["validation"].images), "a validation digit is in the train split"
    assert len(seen) > 54_900  # MNIST's training file repeats a handful of digits, no more


def test_the_offline_subset_is_the_first_500_of_each_class():
    labels = torch.tensor([3, 1, 3, 0] * 1500)
    positions = offline_positions(labels)
    assert len(positions) == 1500 and torch.equal(positions, positions.sort().values)
    assert torch.bincount(labels[positions]).tolist() == [500, 500, 0, 500]
    assert positions[-1] == 1999  # the 500th 3, 0 and 1 are all within the first 2,000


def test_training_without_the_official_files_names_capsedu_data(tmp_path, full_data):
    for name in ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"):
        (tmp_path / name).write_bytes((full_data / name).read_bytes())
    with pytest.raises(DataFileError, match="CAPSEDU_DATA"):
        load_split("train", tmp_path, download=False, verbose=False)
    assert len(load_split("test", tmp_path, download=False, verbose=False)) == 10_000


def test_training_files_without_the_offline_subset_are_refused(tmp_path, full_data, monkeypatch):
    r"""Files in MNIST's format whose images are not MNIST's (here: the first image, an offline
    one, blanked) are refused by their content's digest, and, were that digest taken as the
    official one, by the split rather than split in the wrong place."""
    from capsedu.data import mnist
    from capsedu.data.files import file_sha256

    images = bytearray((full_data / "train-images-idx3-ubyte").read_bytes())
    images[16:16 + 784] = bytes(784)  # blank the first training image, an offline one
    (tmp_path / "train-images-idx3-ubyte").write_bytes(bytes(images))
    for name in ("train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"):
        (tmp_path / name).write_bytes((full_data / name).read_bytes())
    with pytest.raises(DataFileError, match="train-images-idx3-ubyte is not the official MNIST images file"):
        load_split("train", tmp_path, download=False, verbose=False)
    monkeypatch.setitem(mnist.SHA256, "train-images-idx3-ubyte", file_sha256(tmp_path / "train-images-idx3-ubyte"))
    with pytest.raises(DataFileError, match="do not hold the offline subset"):
        load_split("train", tmp_path, download=False, verbose=False)


def test_bad_split_is_named():
    with pytest.raises(ValueError, match="split must be one of"):
        load_split("valid")
