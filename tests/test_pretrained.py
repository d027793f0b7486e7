"""The shipped checkpoint: checksum verified on load, tampering refused, digits recognised."""

import json
import shutil

import pytest
import torch

import capsedu
from capsedu import CapsNet, CheckpointError, load_mnist, pretrained, pretrained_metrics
from capsedu.pretrain import Recipe, metrics_path, pretrain, sha256
from capsedu.pretrained import WEIGHTS_DIR, available


@pytest.fixture
def weights_copy(tmp_path):
    for suffix in (".pt", ".json"):
        shutil.copy(WEIGHTS_DIR / f"capsnet_cpu{suffix}", tmp_path / f"capsnet_cpu{suffix}")
    return tmp_path


def test_shipped_checkpoint_matches_its_metrics():
    metrics = pretrained_metrics("cpu")
    checkpoint = WEIGHTS_DIR / metrics["checkpoint"]
    assert "cpu" in available()
    assert sha256(checkpoint) == metrics["sha256"]
    assert checkpoint.stat().st_size == metrics["size_bytes"] <= 10_000_000
    assert metrics["test_data"]["images"] == 10_000 and "official" in metrics["test_data"]["source"]
    assert 0.985 <= metrics["test_accuracy"] <= 1.0  # the goal of the pretrained-weights issue


def test_pretrained_loads_an_eval_mode_capsnet_with_the_recorded_config():
    model = pretrained()
    assert isinstance(model, CapsNet) and not model.training
    assert model.config.to_dict() == pretrained_metrics()["config"]
    assert model.config == capsedu.CapsNetConfig.cpu()


def test_tampered_checkpoint_is_refused(weights_copy):
    pretrained("cpu", weights_dir=weights_copy)  # an intact copy loads
    path = weights_copy / "capsnet_cpu.pt"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="fails its checksum"):
        pretrained("cpu", weights_dir=weights_copy)


def test_missing_files_give_clear_errors(weights_copy):
    with pytest.raises(CheckpointError, match=r"no metrics file .*capsnet_paper.json.*shipped: 'cpu'"):
        pretrained("paper", weights_dir=weights_copy)
    (weights_copy / "capsnet_cpu.pt").unlink()
    with pytest.raises(CheckpointError, match="capsnet_cpu.pt named by capsnet_cpu.json is missing"):
        pretrained("cpu", weights_dir=weights_copy)
    metrics = json.loads((weights_copy / "capsnet_cpu.json").read_text())
    del metrics["sha256"]
    (weights_copy / "capsnet_cpu.json").write_text(json.dumps(metrics))
    with pytest.raises(CheckpointError, match="no 'sha256' entry"):
        pretrained_metrics("cpu", weights_dir=weights_copy)
    with pytest.raises(TypeError, match="name must be a non-empty str"):
        pretrained(3)


def test_shipped_accuracy_is_what_the_weights_really_score(shared_data):
    """Re-measure the recorded accuracy on the whole official test split (about 5 s)."""
    test = load_mnist("test", root=shared_data, download=False, verbose=False)
    assert len(test) == 10_000
    loader = torch.utils.data.DataLoader(test, batch_size=1000)
    accuracy = capsedu.evaluate(pretrained(), loader)["accuracy"]
    assert accuracy == pytest.approx(pretrained_metrics()["test_accuracy"], abs=1e-4)
    assert accuracy >= 0.985


@torch.no_grad()
def test_pretrained_classifies_official_test_digits(shared_data):
    test = load_mnist("test", root=shared_data, download=False, verbose=False)
    images, labels = test.images[:100], test.labels[:100]
    predictions = pretrained()(images).lengths.argmax(dim=1)
    correct = int((predictions == labels).sum())
    assert correct >= 95, f"only {correct}/100 official test digits classified correctly"


def test_pretrain_writes_a_checkpoint_that_pretrained_accepts(tmp_path):
    out = tmp_path / "weights" / "capsnet_smoke.pt"
    metrics = pretrain(Recipe(epochs=1, batch_size=8), out, data_root=tmp_path / "no-data",
                       train_images=16, test_images=10, test_from_epoch=1, progress=False)
    assert json.loads(metrics_path(out).read_text())["sha256"] == metrics["sha256"] == sha256(out)
    assert metrics["train_data"]["images"] == 16 and metrics["epochs"] == 1
    assert metrics["history"]["test_accuracy"] == [metrics["test_accuracy_float32"]]
    assert set(metrics["load_average_1min_during_training"]) == {"mean", "min", "max"}
    model = pretrained("smoke", weights_dir=out.parent)
    assert model.config == capsedu.CapsNetConfig.cpu()
