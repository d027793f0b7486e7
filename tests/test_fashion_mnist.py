"""Fashion-MNIST: found where the docstring says, checked by content, split 55,000 / 5,000 / 10,000."""

import gzip
import shutil

import pytest
import torch

from capsedu import DataFileError, load_fashion_mnist
from capsedu.data import fashion_mnist

pytestmark = pytest.mark.unit

DEBIAN = fashion_mnist.DEBIAN_FOLDER
needs_debian = pytest.mark.skipif(not (DEBIAN / "t10k-labels-idx1-ubyte.gz").is_file(),
                                  reason="Debian's dataset-fashion-mnist is not installed (.ci/run installs it)")


@pytest.fixture
def no_debian(monkeypatch, tmp_path):
    monkeypatch.setattr(fashion_mnist, "DEBIAN_FOLDER", tmp_path / "no-debian-package")


@needs_debian
@pytest.mark.tools  # over a second of CPU: the unit tier keeps a margin below its 2.5 s
def test_debian_package_gives_the_official_splits(tmp_path, capsys):
    test = load_fashion_mnist("test", root=tmp_path, download=False)
    assert "Fashion-MNIST test: 10,000 images, official Fashion-MNIST files (Debian's" in capsys.readouterr().out
    assert test.images.shape == (10_000, 1, 28, 28) and test.images.max() == 1 and test.images.min() == 0
    assert test.labels[:10].tolist() == [9, 2, 1, 1, 6, 1, 4, 6, 5, 7]  # ankle boot, pullover, trouser, ...
    assert torch.bincount(test.labels).tolist() == [1_000] * 10
    train = load_fashion_mnist("train", root=tmp_path, download=False, verbose=False)
    validation = load_fashion_mnist("validation", root=tmp_path, download=False, verbose=False)
    assert torch.bincount(train.labels).tolist() == [5_500] * 10
    assert torch.bincount(validation.labels).tolist() == [500] * 10
    seen = {image.numpy().tobytes() for image in train.images}
    assert not seen & {image.numpy().tobytes() for image in validation.images}
    assert len(fashion_mnist.CLASSES) == 10 and fashion_mnist.CLASSES[9] == "Ankle boot"


@needs_debian
def test_files_under_the_data_root_come_first_in_torchvision_layout(tmp_path, capsys):
    folder = tmp_path / "FashionMNIST" / "raw"
    folder.mkdir(parents=True)
    for name in ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"):
        shutil.copy(DEBIAN / name, folder)
    test = load_fashion_mnist("test", root=tmp_path, download=False)
    assert "official Fashion-MNIST files (the given data root)" in capsys.readouterr().out
    assert len(test) == 10_000


@needs_debian
def test_a_changed_file_is_named_whatever_compressed_it(tmp_path):
    folder = tmp_path / "fashion-mnist"
    folder.mkdir()
    shutil.copy(DEBIAN / "t10k-images-idx3-ubyte.gz", folder)
    labels = bytearray(gzip.decompress((DEBIAN / "t10k-labels-idx1-ubyte.gz").read_bytes()))
    labels[8] = (labels[8] + 1) % 10  # one label changed: a valid IDX file, not the official one
    (folder / "t10k-labels-idx1-ubyte").write_bytes(labels)
    with pytest.raises(DataFileError, match=r"fashion-mnist/t10k-labels-idx1-ubyte is not the official "
                                            r"Fashion-MNIST labels file \(the SHA-256 of its content.*"
                                            r"so it is downloaded again"):  # a copy of one's own
        load_fashion_mnist("test", root=tmp_path, download=False)


@needs_debian
def test_a_damaged_debian_file_says_to_reinstall_the_package(tmp_path, monkeypatch):
    folder = tmp_path / "debian-copy"  # stands in for /usr/share/datasets/fashion-mnist
    folder.mkdir()
    shutil.copy(DEBIAN / "t10k-images-idx3-ubyte.gz", folder)
    (folder / "t10k-labels-idx1-ubyte.gz").write_bytes((DEBIAN / "t10k-labels-idx1-ubyte.gz").read_bytes()[:-9])
    monkeypatch.setattr(fashion_mnist, "DEBIAN_FOLDER", folder)
    with pytest.raises(DataFileError, match=r"apt install --reinstall dataset-fashion-mnist"):
        load_fashion_mnist("test", root=tmp_path / "empty", download=False)


def test_without_files_it_stops_and_says_how_to_get_them(tmp_path, no_debian, shared_data):
    for name in ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"):  # MNIST in the root itself
        shutil.copy(shared_data / "mnist" / name, tmp_path)
    with pytest.raises(DataFileError, match=r"no Fashion-MNIST test files \(looked in .*FashionMNIST/raw, "
                                            r".*fashion-mnist, .*no-debian-package; no download: "
                                            r"download=False\).*apt install dataset-fashion-mnist"):
        load_fashion_mnist("test", root=tmp_path, download=False)


def test_a_download_is_asked_for_fashion_mnist_when_nothing_is_on_disk(tmp_path, no_debian, monkeypatch):
    calls = []
    images, labels = torch.zeros(60_000, 28, 28, dtype=torch.uint8), torch.arange(60_000) % 10

    def fake_download(root, split, dataset):
        calls.append((root, split, dataset))
        return (images, labels), ""

    monkeypatch.setattr("capsedu.data.files.download", fake_download)
    validation = load_fashion_mnist("validation", root=tmp_path, verbose=False)
    assert calls == [(tmp_path, "train", "FashionMNIST")]
    assert len(validation) == 5_000 and "torchvision download" in validation.source
    monkeypatch.setattr("capsedu.data.files.download", lambda root, split, dataset: (None, "URLError: offline"))
    with pytest.raises(DataFileError, match="no download: URLError: offline"):
        load_fashion_mnist("test", root=tmp_path)


def test_bad_split():
    with pytest.raises(ValueError, match=r"split must be one of \('train', 'validation', 'test'\), got 'valid'"):
        load_fashion_mnist("valid")
