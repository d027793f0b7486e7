import os

import pytest
import torch

from capsedu import CapsNet, CapsNetConfig, CheckpointError, load_checkpoint, save_checkpoint
from capsedu.training.objectives import MarginObjective, SpreadObjective

SMALL = CapsNetConfig(conv1_channels=8, primary_types=2, primary_dim=4, digit_dim=8,
                      decoder_hidden=(16, 32))


def test_round_trip(tmp_path, rng):
    model = CapsNet(SMALL).eval()
    path = save_checkpoint(tmp_path / "ckpt" / "m.pt", model, history={"loss": [1.0, 0.5]},
                           metadata={"seed": 3})
    loaded, info = load_checkpoint(path, expected_config=SMALL)
    x = torch.rand(2, 1, 28, 28, generator=rng)
    torch.testing.assert_close(loaded(x).capsules, model(x).capsules)
    assert info["config"] == SMALL and info["history"] == {"loss": [1.0, 0.5]}
    assert info["metadata"] == {"seed": 3} and not loaded.training


def test_half_precision_round_trip_is_close(tmp_path, rng):
    model = CapsNet(SMALL).eval()
    full = save_checkpoint(tmp_path / "full.pt", model)
    half = save_checkpoint(tmp_path / "half.pt", model, half=True)
    assert half.stat().st_size < 0.6 * full.stat().st_size
    loaded, _ = load_checkpoint(half)
    assert next(loaded.parameters()).dtype == torch.float32
    x = torch.rand(2, 1, 28, 28, generator=rng)
    torch.testing.assert_close(loaded(x).lengths, model(x).lengths, atol=1e-3, rtol=1e-2)


def test_write_is_atomic(tmp_path, monkeypatch):
    path = tmp_path / "m.pt"
    save_checkpoint(path, CapsNet(SMALL))
    before = path.read_bytes()

    def broken_save(obj, handle):
        handle.write(b"partial")
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", broken_save)
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(path, CapsNet(SMALL))
    assert path.read_bytes() == before  # the old checkpoint survives
    assert sorted(os.listdir(tmp_path)) == ["m.pt"]  # and no temporary file is left


def test_mismatched_config_is_refused(tmp_path):
    path = save_checkpoint(tmp_path / "m.pt", CapsNet(SMALL))
    other = CapsNetConfig(**{**SMALL.to_dict(), "decoder_hidden": (16, 32), "digit_dim": 4})
    with pytest.raises(CheckpointError, match="digit_dim: expected 4, checkpoint has 8"):
        load_checkpoint(path, expected_config=other)


@pytest.mark.parametrize("content", [b"", b"not a checkpoint at all", None])
def test_corrupt_checkpoint(tmp_path, content):
    path = tmp_path / "m.pt"
    save_checkpoint(path, CapsNet(SMALL))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2] if content is None else content)
    with pytest.raises(CheckpointError, match="not a readable checkpoint"):
        load_checkpoint(path)


def test_missing_foreign_and_malicious_files(tmp_path):
    with pytest.raises(CheckpointError, match="checkpoint not found"):
        load_checkpoint(tmp_path / "nope.pt")
    torch.save({"weights": torch.zeros(2)}, tmp_path / "foreign.pt")
    with pytest.raises(CheckpointError, match="not a capsedu checkpoint"):
        load_checkpoint(tmp_path / "foreign.pt")
    torch.save({"format": "capsedu-checkpoint", "fn": os.getcwd}, tmp_path / "evil.pt")
    with pytest.raises(CheckpointError, match="not a readable checkpoint"):
        load_checkpoint(tmp_path / "evil.pt")  # weights_only=True refuses arbitrary objects


def test_weights_that_do_not_fit(tmp_path):
    path = save_checkpoint(tmp_path / "m.pt", CapsNet(SMALL))
    payload = torch.load(path, weights_only=True)
    payload["config"]["digit_dim"] = 4
    torch.save(payload, path)
    with pytest.raises(CheckpointError, match="weights do not fit the stored config"):
        load_checkpoint(path)


def test_the_objective_is_saved_and_loaded_with_the_network(tmp_path):
    path = save_checkpoint(tmp_path / "m.pt", CapsNet(SMALL), objective=MarginObjective(recon_weight=0.001))
    assert load_checkpoint(path)[1]["objective"] == MarginObjective(recon_weight=0.001)
    default = save_checkpoint(tmp_path / "d.pt", CapsNet(SMALL))
    assert load_checkpoint(default)[1]["objective"] == MarginObjective()  # its kind's default
    with pytest.raises(TypeError, match="objective must be a capsedu Objective"):
        save_checkpoint(tmp_path / "x.pt", CapsNet(SMALL), objective=lambda *a: None)


def _as_version_2(path, kind_fields: dict, state_changes=None) -> None:
    r"""Rewrite a checkpoint as version 2 wrote it: no objective, ``kind_fields`` in the config."""
    payload = torch.load(path, weights_only=True)
    state = {**payload["state_dict"], **(state_changes or {})}
    payload = {key: value for key, value in payload.items() if key != "objective"}
    torch.save({**payload, "version": 2, "config": {**payload["config"], **kind_fields},
                "state_dict": state}, path)


def test_a_version_2_capsnet_brings_its_reconstruction_weight_into_the_objective(tmp_path):
    model = CapsNet(SMALL).eval()
    path = save_checkpoint(tmp_path / "m.pt", model)
    _as_version_2(path, {"recon_weight": 0.002})
    loaded, info = load_checkpoint(path, expected_config=SMALL)
    assert info["objective"] == MarginObjective(recon_weight=0.002)
    x = torch.rand(2, 1, 28, 28)
    torch.testing.assert_close(loaded(x).capsules, model(x).capsules)


def test_a_version_2_efficient_capsnet_gets_its_weights_in_todays_layout(tmp_path):
    from capsedu.nets.efficient_capsnet import EfficientCapsNet

    torch.manual_seed(0)
    model = EfficientCapsNet().eval()
    path = save_checkpoint(tmp_path / "e.pt", model)
    old_layout = model.digits.W.detach().transpose(-1, -2).contiguous()  # (I, J, D_in, D), as 0.2 stored it
    _as_version_2(path, {"recon_weight": 0.0005}, {"digits.W": old_layout})
    loaded, info = load_checkpoint(path)
    torch.testing.assert_close(loaded.digits.W, model.digits.W)
    x = torch.rand(2, 1, 28, 28)
    torch.testing.assert_close(loaded.class_scores(x), model.class_scores(x))
    assert info["objective"] == MarginObjective()


def test_a_version_2_em_network_reads_its_margin_schedule_from_its_recipe(tmp_path):
    from capsedu.nets.matrix_capsnet import MatrixCapsConfig, MatrixCapsNet

    small = MatrixCapsConfig(conv1_channels=4, primary_types=2, conv_caps1_types=2, conv_caps2_types=2)
    path = save_checkpoint(tmp_path / "em.pt", MatrixCapsNet(small), metadata={"recipe": {"margin_ramp_epochs": 16}})
    _as_version_2(path, {})
    assert load_checkpoint(path)[1]["objective"] == SpreadObjective(ramp_epochs=16)
