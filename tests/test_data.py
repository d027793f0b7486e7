import gzip
import shutil
import struct

import pytest
import torch

from capsedu import DataFileError, load_mnist, random_shift
from capsedu.data import mnist as data_module
from capsedu.data.files import download, file_sha256

pytestmark = pytest.mark.unit


def write_idx(path, array: torch.Tensor) -> None:
    """Write a uint8 tensor in MNIST's IDX format (test fixture only; reading uses torchvision)."""
    header = struct.pack(">I", 0x0800 + array.dim()) + b"".join(struct.pack(">I", n) for n in array.shape)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(header + array.to(torch.uint8).numpy().tobytes())


def synthetic_split(root, prefix: str, n: int = 20):
    images = torch.randint(0, 256, (n, 28, 28), generator=torch.Generator().manual_seed(0))
    labels = torch.arange(n) % 10
    write_idx(root / f"{prefix}-images-idx3-ubyte", images)
    write_idx(root / f"{prefix}-labels-idx1-ubyte", labels)
    return images, labels


@pytest.fixture
def accept(monkeypatch):
    """Take the given uncompressed files as the official ones (their content's SHA-256)."""
    def accept(*paths, digests=data_module.SHA256):
        for path in paths:
            monkeypatch.setitem(digests, path.name, file_sha256(path))
    return accept


def test_shared_official_test_split(shared_data, capsys):
    test = load_mnist("test", root=shared_data, download=False)
    assert len(test) == 10_000
    assert test.images.shape == (10_000, 1, 28, 28) and test.images.dtype == torch.float32
    assert 0 <= test.images.min() and test.images.max() == 1
    assert test.labels[:10].tolist() == [7, 2, 1, 0, 4, 1, 4, 9, 5, 9]  # the famous first test digits
    assert torch.bincount(test.labels).tolist() == [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]
    assert "official MNIST files" in capsys.readouterr().out


def test_train_uses_all_offline_images_when_the_official_test_split_exists(shared_data):
    train = load_mnist("train", root=shared_data, download=False, verbose=False)
    assert len(train) == 5_000 and "all of it" in train.source


def test_environment_variable_sets_the_root(shared_data, monkeypatch):
    monkeypatch.setenv("CAPSEDU_DATA", str(shared_data))
    assert len(load_mnist("test", download=False, verbose=False)) == 10_000


def test_offline_subset_split_is_deterministic_balanced_and_disjoint(tmp_path, capsys):
    train = load_mnist("train", root=tmp_path, download=False)
    test = load_mnist("test", root=tmp_path, download=False)
    assert "offline subset of 5,000 MNIST training images" in capsys.readouterr().out
    assert (len(train), len(test)) == (4_000, 1_000)
    assert torch.bincount(train.labels).tolist() == [400] * 10
    assert torch.bincount(test.labels).tolist() == [100] * 10
    fingerprints = lambda d: {x.numpy().tobytes() for x in d.images}  # noqa: E731
    assert not fingerprints(train) & fingerprints(test)
    again = load_mnist("test", root=tmp_path, download=False, verbose=False)
    assert torch.equal(again.images, test.images)
    image, label = train[0]
    assert image.shape == (1, 28, 28) and label.dtype == torch.int64


def test_falls_back_to_offline_when_download_fails(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr("capsedu.data.files.download", lambda root, split: calls.append(split) or (None, "offline"))
    with pytest.warns(RuntimeWarning, match=r"no download \(offline\)"):
        data = load_mnist("test", root=tmp_path, verbose=False)
    assert calls == ["test"] and len(data) == 1_000


def test_download_failure_is_not_an_error_and_says_why(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("the data root cannot be created below a file")
    data, why = download(blocker / "root", "test")
    assert data is None and why.split(":")[0] in {"NotADirectoryError", "FileExistsError", "OSError", "RuntimeError"}


@pytest.mark.parametrize("layout", ["MNIST/raw", "mnist", "."])
def test_local_uncompressed_files_in_each_layout(tmp_path, layout, accept):
    images, labels = synthetic_split(tmp_path / layout, "t10k")
    accept(*(tmp_path / layout).iterdir())
    data = load_mnist("test", root=tmp_path, download=False, verbose=False)
    assert torch.equal(data.labels, labels)
    torch.testing.assert_close(data.images[:, 0], images.float() / 255)
    assert "official MNIST files" in data.source


def test_truncated_gz_is_reported(tmp_path, shared_data):
    folder = tmp_path / "mnist"
    folder.mkdir()
    shutil.copy(shared_data / "mnist" / "t10k-labels-idx1-ubyte.gz", folder)
    good = (shared_data / "mnist" / "t10k-images-idx3-ubyte.gz").read_bytes()
    (folder / "t10k-images-idx3-ubyte.gz").write_bytes(good[: len(good) // 2])  # truncated download
    with pytest.raises(DataFileError, match=r"t10k-images-idx3-ubyte.gz could not be read as MNIST images "
                                             r"\(EOFError.*delete it"):
        load_mnist("test", root=tmp_path, download=False)


def test_gz_that_is_not_the_official_file_is_reported(tmp_path):
    folder = tmp_path / "mnist"
    synthetic_split(folder, "t10k")
    for name in ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"):
        with open(folder / name, "rb") as src, gzip.open(folder / f"{name}.gz", "wb") as dst:
            dst.write(src.read())
    with pytest.raises(DataFileError, match=r"t10k-images-idx3-ubyte.gz is not the official MNIST images file "
                                             r"\(the SHA-256 of its content is [0-9a-f]{16}\.\.\., expected 0fa7898d"):
        load_mnist("test", root=tmp_path, download=False)


def test_truncated_uncompressed_file_is_reported(tmp_path, accept):
    synthetic_split(tmp_path, "t10k")
    path = tmp_path / "t10k-images-idx3-ubyte"
    path.write_bytes(path.read_bytes()[:1000])
    accept(path)
    with pytest.raises(DataFileError, match=r"t10k-images-idx3-ubyte could not be read as MNIST images"):
        load_mnist("test", root=tmp_path, download=False)


def test_missing_pair_and_mismatched_counts_are_reported(tmp_path, accept):
    synthetic_split(tmp_path, "t10k")
    (tmp_path / "t10k-labels-idx1-ubyte").unlink()
    with pytest.raises(DataFileError, match="t10k-labels-idx1-ubyte.*is missing"):
        load_mnist("test", root=tmp_path, download=False)
    write_idx(tmp_path / "t10k-labels-idx1-ubyte", torch.zeros(7))
    accept(*tmp_path.iterdir())
    with pytest.raises(DataFileError, match="holds .20, 28, 28. images but .* holds 7 labels"):
        load_mnist("test", root=tmp_path, download=False)


def test_bad_split():
    with pytest.raises(ValueError, match="split must be 'train' or 'test', got 'valid'"):
        load_mnist("valid")


def test_subset_is_balanced_and_deterministic(tmp_path):
    train = load_mnist("train", root=tmp_path, download=False, verbose=False)
    small = train.subset(95)
    assert torch.bincount(small.labels, minlength=10).tolist() == [10] * 5 + [9] * 5 or \
        sorted(torch.bincount(small.labels, minlength=10).tolist()) == [9] * 5 + [10] * 5
    assert torch.equal(small.images, train.subset(95).images)
    with pytest.raises(ValueError, match="n must be in"):
        train.subset(0)


def test_random_shift_moves_images_within_range():
    images = torch.zeros(50, 1, 28, 28)
    images[:, 0, 10:18, 10:18] = 1.0
    shifted = random_shift(images, max_shift=2, generator=torch.Generator().manual_seed(0))
    assert shifted.shape == images.shape
    torch.testing.assert_close(shifted.sum(dim=(1, 2, 3)), images.sum(dim=(1, 2, 3)))  # nothing cut off
    rows = shifted[:, 0].sum(dim=2).nonzero()[:, 1].view(50, 8)[:, 0] - 10
    cols = shifted[:, 0].sum(dim=1).nonzero()[:, 1].view(50, 8)[:, 0] - 10
    assert rows.abs().max() <= 2 and cols.abs().max() <= 2
    assert len(set(zip(rows.tolist(), cols.tolist()))) > 10  # many different offsets
    assert torch.equal(random_shift(images, max_shift=0), images)
    with pytest.raises(ValueError, match=r"images must be a 4-D tensor \(B, C, H, W\)"):
        random_shift(torch.zeros(28, 28))


def test_load_offline_gives_the_same_parts_whatever_files_exist(tmp_path, shared_data):
    from capsedu import load_offline

    train, test = load_offline("train", verbose=False), load_offline("test", verbose=False)
    no_files = load_mnist("test", root=tmp_path, download=False, verbose=False)
    assert torch.equal(test.images, no_files.images)  # lessons without an official split test here
    assert torch.equal(load_mnist("train", root=tmp_path, download=False, verbose=False).images,
                       train.images)
    seen = {x.numpy().tobytes() for x in train.images}
    assert not seen & {x.numpy().tobytes() for x in test.images}  # the shipped networks never saw it
    assert len(load_offline("all", verbose=False)) == 5_000
    with pytest.raises(ValueError, match="part must be one of"):
        load_offline("validation")


def test_the_offline_test_part_mixes_the_classes_and_examples_are_chosen_by_class(shared_data):
    """Offline, test image 0 is not what it is online; the first 7 is a 7 in both (issue 53)."""
    from capsedu import load_offline

    test = load_offline("test", verbose=False)
    assert len(set(test.labels[:20].tolist())) >= 6  # shuffled: not a hundred 0s first
    assert torch.equal(load_offline("test", verbose=False).labels, test.labels)  # a fixed order
    train = load_offline("train", verbose=False)
    assert torch.equal(train.labels, train.labels.sort().values)  # training keeps the file's order
    official = load_mnist("test", root=shared_data / "mnist", download=False, verbose=False)
    assert official.first_index(7) == 0 and official.first_index(4, nth=1) == 6  # the text's images
    for data in (test, official):
        assert [int(data.labels[i]) for i in data.one_per_class()] == list(range(10))
        assert int(data.labels[data.first_index(3, nth=2)]) == 3
        assert data.describe_examples([data.first_index(7)]).startswith("example digit: 7 — image ")
    line = official.describe_examples(official.one_per_class()[:3])
    assert line == "example digits: 0 1 2 — images 3, 2, 1 of the " + official.source
    with pytest.raises(ValueError, match="nth must be below 100, got 100"):
        test.first_index(5, nth=100)
    with pytest.raises(ValueError, match="digit"):
        test.first_index(-1)


def test_the_learner_profile_trains_on_at_most_5000_of_60000_official_images(tmp_path, shared_data, accept):
    """A synthetic full-size training split in MNIST's file format: load_mnist reads all 60,000,
    the learner profile's training set (learner_subset, used by lessons 05 and 06) keeps 5,000."""
    from capsedu import learner_subset

    images = torch.randint(0, 256, (60_000, 28, 28), generator=torch.Generator().manual_seed(0),
                           dtype=torch.uint8)
    write_idx(tmp_path / "MNIST" / "raw" / "train-images-idx3-ubyte", images)
    write_idx(tmp_path / "MNIST" / "raw" / "train-labels-idx1-ubyte", torch.arange(60_000) % 10)
    for gz in (shared_data / "mnist").glob("t10k-*.gz"):
        shutil.copy(gz, tmp_path / "MNIST" / "raw" / gz.name)
    accept(*(tmp_path / "MNIST" / "raw").glob("train-*"))
    train = load_mnist("train", root=tmp_path, download=False, verbose=False)
    assert len(train) == 60_000 and "official MNIST files" in train.source
    capped = learner_subset(train)
    assert len(capped) == 5_000 and torch.bincount(capped.labels).tolist() == [500] * 10
    assert learner_subset(capped) is capped  # 5,000 or fewer images: used as they are
    with pytest.raises(ValueError, match="limit"):
        learner_subset(train, limit=0)


def test_the_lessons_cap_their_training_set_with_learner_subset():
    from conftest import REPO

    for lesson in ("05_decoder", "06_training"):
        source = (REPO / "notebooks" / "src" / f"{lesson}.py").read_text()
        assert "capsedu.learner_subset(train" in source, f"{lesson} trains on an uncapped set"


def test_random_shift_returns_the_offsets_it_applied():
    images = torch.zeros(6, 1, 28, 28)
    images[:, 0, 10, 12] = 1.0
    shifted, offsets = random_shift(images, 2, torch.Generator().manual_seed(3), return_offsets=True)
    for image, (dx, dy) in zip(shifted, offsets.tolist()):
        assert image[0, 10 + dy, 12 + dx] == 1.0 and image.sum() == 1.0
    assert offsets.abs().max() <= 2


@pytest.mark.parametrize("batch_size", [32, 7])
def test_batch_loader_gives_the_dataloaders_batches_in_its_order(batch_size):
    """Every epoch the same batches as DataLoader(shuffle=True) with the same generator (so the
    shipped recipes train on exactly what they did), and in order without a generator."""
    from torch.utils.data import DataLoader

    from capsedu import batch_loader, load_offline
    data = load_offline("train", verbose=False).subset(300)
    expected = DataLoader(data, batch_size=batch_size, shuffle=True,
                          generator=torch.Generator().manual_seed(3))
    got = batch_loader(data, batch_size, torch.Generator().manual_seed(3))
    assert len(got) == len(expected) == -(-300 // batch_size)
    for _ in range(3):  # each loader runs its epoch to the end, as fit does
        for (x1, y1), (x2, y2) in zip(list(expected), list(got), strict=True):
            assert torch.equal(x1, x2) and torch.equal(y1, y2)
    in_order = torch.cat([labels for _, labels in batch_loader(data, batch_size)])
    assert torch.equal(in_order, data.labels)
    with pytest.raises(ValueError, match="batch_size must be >= 1"):
        batch_loader(data, 0)


def test_a_misspelt_data_root_stops_with_the_path_and_leaves_nothing_behind(tmp_path, monkeypatch):
    typo = tmp_path / "shraed" / "data"
    monkeypatch.setenv("CAPSEDU_DATA", str(typo))
    with pytest.raises(DataFileError, match=r"shraed/data \(CAPSEDU_DATA\) does not exist: check its spelling"):
        load_mnist("train")
    with pytest.raises(DataFileError, match="given as root"):
        load_mnist("test", root=tmp_path / "nope")
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no folder was created


def test_a_named_empty_root_warns_loudly_and_a_failed_download_removes_its_folders(tmp_path, capsys, monkeypatch):
    def failing_download(*args, **kwargs):
        (tmp_path / "MNIST" / "raw").mkdir(parents=True)  # what torchvision does before it fails
        raise RuntimeError("Error downloading train-images-idx3-ubyte.gz: no network")

    monkeypatch.setattr("torchvision.datasets.MNIST", failing_download)
    with pytest.warns(RuntimeWarning, match="no MNIST train files in the data root you named"):
        data = load_mnist("train", root=tmp_path, verbose=False)
    assert len(data) == 4_000 and "WARNING" in capsys.readouterr().out
    assert not (tmp_path / "MNIST").exists()  # the download's folders are gone with it
