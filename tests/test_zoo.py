"""The shipped networks: checksum verified on load, tampering refused, accuracy re-measured."""

import dataclasses
import json
import shutil

import pytest
import torch

import capsedu
from capsedu import CapsNet, CheckpointError, load_mnist, pretrained, pretrained_metrics
from capsedu.data.fashion_mnist import load_fashion_mnist
from capsedu.data.files import DataFileError, file_sha256
from capsedu.data.splits import SOURCES
from capsedu.data.transforms import on_canvas
from capsedu.training.hardware import reuse_large_allocations
from capsedu.zoo.data import fixed_pairs
from capsedu.zoo.recipes import RECIPES, Recipe
from capsedu.zoo.shipped import WEIGHTS_DIR, available

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
        assert {**defaults, **metrics["recipe"]} == dataclasses.asdict(RECIPES[name]), name
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
    assert model.config.to_dict() == pretrained_metrics()["recipe"]["config"]
    assert model.config == capsedu.CapsNetConfig.cpu()


def test_tampered_checkpoint_is_refused(weights_copy):
    pretrained("capsnet", weights_dir=weights_copy)  # an intact copy loads
    path = weights_copy / "capsnet.pt"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="fails its checksum"):
        pretrained("capsnet", weights_dir=weights_copy)


def test_missing_and_inconsistent_files_give_clear_errors(weights_copy):
    with pytest.raises(CheckpointError, match=r"no shipped network 'paper'.*shipped: 'capsnet'") as error:
        pretrained("paper", weights_dir=weights_copy)
    assert "zoo.train paper" not in str(error.value), "suggests a command that argparse rejects"
    with pytest.raises(CheckpointError, match=r"did you mean 'capsnet'\?"):
        pretrained("capsnett", weights_dir=weights_copy)
    with pytest.raises(CheckpointError, match=r"`python -m capsedu.zoo.train cnn` trains it"):
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


@pytest.mark.parametrize("name", SHIPPED)
def test_stored_accuracy_is_what_the_stored_weights_score(shared_data, name, all_threads):
    """Re-measure the recorded accuracy on the whole official test split (MultiMNIST networks:
    on the course's fixed 10,000 test pairs drawn from it)."""
    if RECIPES[name].dataset == "fashion":
        try:  # Debian's dataset-fashion-mnist, which .ci/run installs
            test = load_fashion_mnist("test", download=False, verbose=False)
        except DataFileError as error:
            pytest.skip(f"no Fashion-MNIST files here: {error}")
    else:
        test = load_mnist("test", root=shared_data, download=False, verbose=False)
    assert len(test) == 10_000
    metrics = pretrained_metrics(name)
    if RECIPES[name].pairs:
        pairs = fixed_pairs(test, RECIPES[name])
        scores = capsedu.pair_accuracy(pretrained(name), pairs)
        assert len(pairs) == 10_000
        assert scores["both"] == pytest.approx(metrics["test_accuracy"], abs=1e-4)
        assert scores["at_least_one"] == pytest.approx(metrics["test_at_least_one"], abs=1e-4)
        return
    reuse_large_allocations()  # EM routing's large tensors (capsedu.training.hardware)
    if RECIPES[name].canvas == 40:  # lesson 08's protocol networks: the expanded test set
        test = on_canvas(test)
    loader = torch.utils.data.DataLoader(test, batch_size=100)
    with torch.inference_mode():
        accuracy = capsedu.evaluate(pretrained(name), loader)["accuracy"]
    assert accuracy == pytest.approx(metrics["test_accuracy"], abs=1e-4)


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
