"""The shipped networks: checksum verified on load, tampering refused, per-image test results
re-measured."""

import dataclasses
import json
import shutil

import pytest
import torch

import capsedu
from capsedu import CapsNet, CheckpointError, load_mnist, pretrained, pretrained_metrics
from capsedu.data.fashion_mnist import load_fashion_mnist
from capsedu.data.files import DataFileError, file_sha256
from capsedu.data.mnist import MNISTData
from capsedu.data.multimnist import MultiMNIST
from capsedu.data.splits import SOURCES
from capsedu.data.transforms import on_canvas
from capsedu.nets.multi_digit import label_hits
from capsedu.nets.registry import network_class
from capsedu.training.hardware import reuse_large_allocations
from capsedu.zoo.recipes import RECIPES, Recipe
from capsedu.zoo.shipped import WEIGHTS_DIR, available, correct_on_test, study
from coursetools.recipe_data import fixed_pairs

pytestmark = pytest.mark.artefacts

SHIPPED = available()
FIRST_TEST_PAIRS = [[6044, 9035], [8239, 9449], [4933, 6115]]  # indices into the official test split


@pytest.fixture
def weights_copy(tmp_path):
    for suffix in (".pt", ".json"):
        shutil.copy(WEIGHTS_DIR / f"capsnet{suffix}", tmp_path / f"capsnet{suffix}")
    return tmp_path


def test_stored_jsons_record_todays_recipes_and_every_recipe_is_shipped():
    assert SHIPPED == sorted(RECIPES)
    for name in SHIPPED:
        metrics = pretrained_metrics(name)
        # a JSON written before a Recipe field existed trained with that field's default
        defaults = {f.name: f.default for f in dataclasses.fields(Recipe)
                    if f.default is not dataclasses.MISSING}
        recorded = {**defaults, **metrics["recipe"]}
        # and a config written before a config field existed (CapsNetConfig.routing) with its default
        config_class = network_class(recorded["kind"]).config_class
        recorded["config"] = config_class.from_dict(recorded["config"]).to_dict()
        assert recorded == dataclasses.asdict(RECIPES[name]), name
        assert metrics["kind"] == RECIPES[name].kind


@pytest.mark.parametrize("name", SHIPPED)
def test_stored_checkpoint_matches_its_stored_metrics(name):
    metrics = pretrained_metrics(name)
    checkpoint = WEIGHTS_DIR / metrics["checkpoint"]
    assert file_sha256(checkpoint) == metrics["sha256"]
    assert checkpoint.stat().st_size == metrics["size_bytes"] <= 10_000_000
    # the three splits of capsedu.data.splits, named by what they are: no offline (validation)
    # image among the training digits (tests/test_splits.py checks the split pixel by pixel)
    if RECIPES[name].dataset == "fashion":  # capsedu.data.fashion_mnist: split the same way
        assert metrics["train_data"]["images"] == 55_000 and metrics["validation_data"]["images"] == 5_000
        assert "less the first 500 of each class" in metrics["train_data"]["source"]
        assert "Fashion-MNIST" in metrics["test_data"]["source"] and metrics["test_data"]["images"] == 10_000
    else:
        assert metrics["train_data"] == {"source": SOURCES["train"], "images": 55_000}
        assert SOURCES["validation"] in metrics["validation_data"]["source"]
        assert SOURCES["test"] in metrics["test_data"]["source"] and metrics["test_data"]["images"] == 10_000
    assert metrics["test_data"]["accuracy"] == metrics["test_accuracy"]
    for split in ("validation_data", "test_data"):
        record = metrics[split]
        assert record["standard_error"] == pytest.approx(
            (record["accuracy"] * (1 - record["accuracy"]) / record["images"]) ** 0.5)


def test_pretrained_loads_an_eval_mode_capsnet_with_the_recorded_config():
    model = pretrained()
    assert isinstance(model, CapsNet) and not model.training
    assert model.config == capsedu.CapsNetConfig.from_dict(pretrained_metrics()["recipe"]["config"])
    assert model.config == capsedu.CapsNetConfig.cpu()


@pytest.mark.parametrize("name", ["efficient", "fashion_efficient"])
def test_checkpoints_saved_with_a_transposed_w_load_into_a_contiguous_one(name):
    """Efficient-CapsNet's W was once a transposed view; its shipped checkpoints, saved then, load
    into today's contiguous parameter with the same values."""
    stored = torch.load(WEIGHTS_DIR / pretrained_metrics(name)["checkpoint"], weights_only=True)
    saved_w = stored["state_dict"]["digits.W"]  # the layer's earlier name; (I, J, D, D_in)
    assert not saved_w.is_contiguous(), "the shipped checkpoint no longer holds the transposed view"
    model = pretrained(name)
    assert model.class_caps.W.is_contiguous()
    assert torch.equal(model.class_caps.W.detach(), saved_w.float())


def test_tampered_checkpoint_is_refused(weights_copy):
    pretrained("capsnet", weights_dir=weights_copy)  # an intact copy loads
    path = weights_copy / "capsnet.pt"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="fails its checksum"):
        pretrained("capsnet", weights_dir=weights_copy)


@pytest.mark.parametrize("name", ["../weights/capsnet", "capsnet/../cnn", "/etc/passwd", "capsnet.json", ""])
def test_a_name_that_is_a_path_is_refused(name):
    """pretrained and study build a file name from `name`: a path must never reach the file system."""
    with pytest.raises((ValueError, TypeError), match=r"name must be"):
        pretrained(name)
    with pytest.raises((ValueError, TypeError), match=r"name must be one of the names it lists .*'adaptive'"):
        study(name)


def test_missing_and_inconsistent_files_give_clear_errors(weights_copy):
    with pytest.raises(CheckpointError, match=r"no shipped network 'paper'.*shipped: 'capsnet'") as error:
        pretrained("paper", weights_dir=weights_copy)
    assert "train_zoo paper" not in str(error.value), "suggests a command that argparse rejects"
    with pytest.raises(CheckpointError, match=r"did you mean 'capsnet'\?"):
        pretrained("capsnett", weights_dir=weights_copy)
    with pytest.raises(CheckpointError, match=r"`python -m coursetools.train_zoo cnn` trains it"):
        pretrained("cnn", weights_dir=weights_copy)  # a recipe not trained into this folder
    metrics = json.loads((weights_copy / "capsnet.json").read_text())
    (weights_copy / "capsnet.json").write_text(json.dumps({**metrics, "kind": "cnn"}))
    with pytest.raises(CheckpointError, match="holds a 'capsnet' network but capsnet.json says 'cnn'"):
        pretrained("capsnet", weights_dir=weights_copy)
    (weights_copy / "capsnet.json").write_text("{not json")
    with pytest.raises(CheckpointError, match="capsnet.json is not valid JSON"):
        pretrained("capsnet", weights_dir=weights_copy)
    (weights_copy / "capsnet.json").write_text(json.dumps(metrics))
    (weights_copy / "capsnet.pt").unlink()
    with pytest.raises(CheckpointError, match="capsnet.pt named by capsnet.json is missing"):
        pretrained("capsnet", weights_dir=weights_copy)
    with pytest.raises(TypeError, match="name must be a non-empty str"):
        pretrained(3)


def recorded_test_set(name: str, shared_data) -> MNISTData | MultiMNIST:
    r"""The test set ``name``'s record was measured on: its dataset's official test split, on
    lesson 08's 40x40 canvas for the canvas networks, or the course's fixed 10,000 test pairs."""
    if RECIPES[name].dataset == "fashion":
        try:  # Debian's dataset-fashion-mnist, which .ci/run installs
            test = load_fashion_mnist("test", download=False, verbose=False)
        except DataFileError as error:
            pytest.skip(f"no Fashion-MNIST files here: {error}")
    else:
        test = load_mnist("test", root=shared_data, download=False, verbose=False)
    assert len(test) == 10_000
    if RECIPES[name].pairs:
        return fixed_pairs(test, RECIPES[name])
    return on_canvas(test) if RECIPES[name].canvas == 40 else test


def scores_and_truth(model, test: MNISTData | MultiMNIST,
                     index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    r"""``model``'s class scores (N, J) on ``test``'s images ``index`` (N,), in batches as the
    record writer measured (100 images, 500 pairs), and their labels as multi-hot (N, J)."""
    if isinstance(test, MultiMNIST):
        (images, targets), batch = test.batch(index), 500
        truth = torch.zeros(len(index), 10, dtype=torch.long).scatter_(1, targets.labels, 1)  # (N, J)
    else:
        images, truth, batch = test.images[index], torch.nn.functional.one_hot(test.labels[index], 10), 100
    with torch.inference_mode():
        scores = torch.cat([model.class_scores(part) for part in images.split(batch)])  # (N, J)
    return scores, truth


@pytest.mark.parametrize("name", SHIPPED)
def test_stored_per_image_results_are_what_the_stored_weights_score(shared_data, name, all_threads):
    """The record's per-image test results add up to its test accuracy exactly, and the shipped
    weights score them again, image by image, on a fixed seeded sample of 2,000 of the 10,000
    test images or pairs (all of them took 5-60 s per network on 2 cores; a sample, not the first
    2,000: MNIST's test split puts its harder half last)."""
    metrics, recorded = pretrained_metrics(name), correct_on_test(name)  # (N,) bool
    assert len(recorded) == metrics["test_data"]["images"] == 10_000
    assert int(recorded.sum()) == round(metrics["test_accuracy"] * len(recorded))  # in images
    test = recorded_test_set(name, shared_data)
    sample = torch.randperm(len(test), generator=torch.Generator().manual_seed(0))[:2_000]
    index = sample.sort().values  # (2000,)
    reuse_large_allocations()  # EM routing's large tensors (capsedu.training.hardware)
    scores, truth = scores_and_truth(pretrained(name), test, index)
    k = truth.sum(dim=1)[:, None]  # (N, 1) labels per image: right when its k best scores are them
    measured = label_hits(scores, truth) == k[:, 0]  # (N,)
    ranked = scores.sort(dim=1, descending=True).values  # (N, J)
    margin = ranked.gather(1, k - 1) - ranked.gather(1, k)  # (N, 1) the gap that decides the image
    differ = (measured != recorded[index]).nonzero()[:, 0]
    # Float sums differ between machines, thread counts and batch shapes (some records were
    # measured on a GPU): an image may flip only where the two scores that decide it are within
    # float noise of each other (1e-4, where float32 sums err by ~1e-6), and at most two may.
    assert len(differ) <= 2 and (margin[differ] < 1e-4).all(), (
        f"{name}: {len(differ)} of {len(index)} images scored otherwise than recorded "
        f"(test indices {index[differ].tolist()[:10]}, decision gaps {margin[differ, 0].tolist()[:10]})")


def test_stored_first_multimnist_test_pairs_are_drawn_again(shared_data):
    """The same pairs on every machine with the official split: a fingerprint of the first ones."""
    test = load_mnist("test", root=shared_data, download=False, verbose=False)
    pairs = fixed_pairs(test, RECIPES["multimnist"])
    assert pairs.pairs[:3].tolist() == FIRST_TEST_PAIRS
    assert (pairs.shifts.abs() <= 4).all() and pairs.canvas == 36 and pairs.merge == "clip"


def test_the_measured_tables_are_written_from_their_records():
    """README.md's networks and lesson times, the instructors' sizing table: as the records say."""
    from coursetools import readme_tables

    stale = [path.name for path, text in readme_tables.documents().items() if path.read_text() != text]
    assert not stale, f"tables that differ from the records in {stale}: run `python -m coursetools.readme_tables`"


@pytest.mark.parametrize("name", SHIPPED)
def test_the_summary_states_validation_and_test_with_their_errors(name):
    metrics, text = pretrained_metrics(name), capsedu.shipped_summary(name)
    for split in ("validation_data", "test_data"):
        record = metrics[split]
        assert capsedu.with_error(record["accuracy"], record["images"]) in text, (split, text)
    learned = "Fashion-MNIST training images" if RECIPES[name].dataset == "fashion" else "training digits"
    assert f"{metrics['train_data']['images']:,} {learned}" in text
