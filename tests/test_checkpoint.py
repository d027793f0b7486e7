import dataclasses
import os

import pytest
import torch

from capsedu import CapsNet, CapsNetConfig, CheckpointError, load_checkpoint, save_checkpoint
from capsedu.training.objectives import MarginObjective, SpreadObjective

pytestmark = pytest.mark.unit

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


@pytest.mark.parametrize("storage", ["float16", "bfloat16"])
def test_half_precision_round_trip_is_close_and_named(tmp_path, rng, storage):
    model = CapsNet(SMALL).eval()
    full = save_checkpoint(tmp_path / "full.pt", model)
    half = save_checkpoint(tmp_path / "half.pt", model, storage=storage)
    assert half.stat().st_size < 0.6 * full.stat().st_size
    loaded, info = load_checkpoint(half)
    assert info["storage"] == storage and load_checkpoint(full)[1]["storage"] == "float32"
    assert next(loaded.parameters()).dtype == torch.float32
    x = torch.rand(2, 1, 28, 28, generator=rng)
    tolerance = 1e-3 if storage == "float16" else 1e-2
    torch.testing.assert_close(loaded(x).lengths, model(x).lengths, atol=tolerance, rtol=1e-2)


def test_a_storage_dtype_outside_the_three_is_refused(tmp_path):
    with pytest.raises(ValueError, match="storage must be one of 'float32', 'float16', 'bfloat16', got 'int8'"):
        save_checkpoint(tmp_path / "m.pt", CapsNet(SMALL), storage="int8")


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


OLD_WEIGHT_NAMES = {"capsnet": [("class_caps.", "digits.")],  # before version 4, written out
                    "efficient": [("class_caps.prior", "digits.b"), ("class_caps.", "digits.")],
                    "em": [("class_caps.", "classes.")]}
OLD_CONFIG_NAMES = {"efficient": {"num_primary_caps": "primary_caps"}}


def _old_name(name: str, renames: list) -> str:
    for new, old in renames:
        if name == new or (new.endswith(".") and name.startswith(new)):
            return old + name[len(new):]
    return name


def _as_version_3(path) -> None:
    r"""Rewrite a checkpoint as version 3 wrote it: the class-capsule layer's weights under their
    old names (``digits.*``, ``classes.*``, ``digits.b``), the configs' old field names."""
    payload = torch.load(path, weights_only=True)
    kind = payload["kind"]
    state = {_old_name(name, OLD_WEIGHT_NAMES.get(kind, [])): value
             for name, value in payload["state_dict"].items()}
    fields = OLD_CONFIG_NAMES.get(kind, {})
    config = {fields.get(key, key): value for key, value in payload["config"].items()}
    torch.save({**payload, "version": 3, "config": config, "state_dict": state}, path)


def _as_version_2(path, kind_fields: dict, state_changes=None) -> None:
    r"""Rewrite a checkpoint as version 2 wrote it: no objective, ``kind_fields`` in the config,
    the weights' names of version 3."""
    _as_version_3(path)
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
    old_layout = model.class_caps.W.detach().transpose(-1, -2).contiguous()  # (I, J, D_in, D), as 0.2 stored it
    _as_version_2(path, {"recon_weight": 0.0005}, {"digits.W": old_layout})
    loaded, info = load_checkpoint(path)
    torch.testing.assert_close(loaded.class_caps.W, model.class_caps.W)
    x = torch.rand(2, 1, 28, 28)
    torch.testing.assert_close(loaded.class_scores(x), model.class_scores(x))
    assert info["objective"] == MarginObjective()


def test_a_version_2_em_network_reads_its_margin_schedule_from_its_recipe(tmp_path):
    from capsedu.nets.matrix_capsnet import MatrixCapsConfig, MatrixCapsNet

    small = MatrixCapsConfig(conv1_channels=4, primary_types=2, conv_caps1_types=2, conv_caps2_types=2)
    path = save_checkpoint(tmp_path / "em.pt", MatrixCapsNet(small), metadata={"recipe": {"margin_ramp_epochs": 16}})
    _as_version_2(path, {})
    assert load_checkpoint(path)[1]["objective"] == SpreadObjective(ramp_epochs=16)


@pytest.mark.parametrize("version", [2, 3])
def test_a_capsnet_saved_before_routing_was_a_choice_loads_and_runs_as_it_trained(tmp_path, version):
    """Its config has no ``routing`` (so the default, "factored", as it trained with detach_inner)
    and its W was stored as DigitCaps kept it then: (I, J, D, D_in) seen through a permuted view."""
    model = CapsNet(SMALL).eval()
    path = save_checkpoint(tmp_path / "old.pt", model)
    _as_version_3(path)
    payload = torch.load(path, weights_only=True)
    W = payload["state_dict"]["digits.W"]  # (I, J, D_out, D_in)
    I, J, D_out, D_in = W.shape
    strided = torch.empty(J, D_in, I, D_out).permute(2, 0, 3, 1).copy_(W)  # the old memory order
    payload["state_dict"]["digits.W"] = strided
    payload["config"] = {key: value for key, value in payload["config"].items() if key != "routing"}
    torch.save(payload, path)
    if version == 2:
        _as_version_2(path, {"recon_weight": 0.0005})
    assert not torch.load(path, weights_only=True)["state_dict"]["digits.W"].is_contiguous()
    loaded, info = load_checkpoint(path, expected_config=SMALL)
    assert info["config"].routing == "factored" and loaded.class_caps.W.is_contiguous()
    x = torch.rand(2, 1, 28, 28)
    torch.testing.assert_close(loaded(x).capsules, model(x).capsules, rtol=0, atol=0)


def _small_network(kind: str):
    from capsedu.nets.efficient_capsnet import EfficientCapsConfig, EfficientCapsNet
    from capsedu.nets.matrix_capsnet import MatrixCapsConfig, MatrixCapsNet

    torch.manual_seed(0)
    if kind == "efficient":
        return EfficientCapsNet(EfficientCapsConfig(conv_channels=(8, 8, 8, 16), num_primary_caps=4,
                                                    primary_dim=4, digit_dim=4, decoder_hidden=(8,)))
    if kind == "em":
        return MatrixCapsNet(MatrixCapsConfig(conv1_channels=4, primary_types=2, conv_caps1_types=2,
                                              conv_caps2_types=2))
    return CapsNet(SMALL)


@pytest.mark.parametrize("kind", ["capsnet", "efficient", "em"])
def test_a_version_3_checkpoint_with_the_old_names_loads(tmp_path, kind):
    """Version 3 named the class-capsule layer ``digits`` or ``classes`` (and Efficient-CapsNet's
    prior ``b``, its count of primary capsules ``primary_caps``): all load as today's names."""
    model = _small_network(kind).eval()
    path = save_checkpoint(tmp_path / "v3.pt", model)
    _as_version_3(path)
    stored = torch.load(path, weights_only=True)
    assert stored["version"] == 3 and not any(name.startswith("class_caps.") for name in stored["state_dict"])
    loaded, info = load_checkpoint(path, expected_config=model.config)
    assert sorted(loaded.state_dict()) == sorted(model.state_dict())
    x = torch.rand(2, 1, 28, 28)
    torch.testing.assert_close(loaded.class_scores(x), model.class_scores(x), rtol=0, atol=0)


def test_a_version_3_checkpoint_of_a_learners_own_network_keeps_its_names(tmp_path):
    """Only the course's kinds were renamed: a registered network's own ``digits`` layer stays."""
    from torch import nn

    from capsedu.nets.contract import NetworkConfig
    from capsedu.nets.registry import _EXTRA, register_network

    @dataclasses.dataclass(frozen=True)
    class OwnConfig(NetworkConfig):
        width: int = 3

    class OwnNet(nn.Module):
        kind, config_class = "own_digits_net", OwnConfig

        def __init__(self, config: OwnConfig) -> None:
            super().__init__()
            self.config, self.digits = config, nn.Linear(784, config.width)

        def class_scores(self, x: torch.Tensor) -> torch.Tensor:
            return self.digits(x.flatten(1))

    register_network(OwnNet)
    try:
        path = save_checkpoint(tmp_path / "own.pt", OwnNet(OwnConfig()), objective=None)
        payload = torch.load(path, weights_only=True)
        torch.save({**payload, "version": 3}, path)
        loaded, _ = load_checkpoint(path)
        assert sorted(loaded.state_dict()) == ["digits.bias", "digits.weight"]
    finally:
        _EXTRA.pop("own_digits_net", None)


def test_a_checkpoint_newer_than_this_package_is_refused(tmp_path):
    path = save_checkpoint(tmp_path / "m.pt", CapsNet(SMALL))
    payload = torch.load(path, weights_only=True)
    torch.save({**payload, "version": payload["version"] + 1}, path)
    with pytest.raises(CheckpointError, match="expected 1 to 4"):
        load_checkpoint(path)
