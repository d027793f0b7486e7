import os

import pytest
import torch

from capsedu import CapsNet, CapsNetConfig, CheckpointError, load_checkpoint, save_checkpoint

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
