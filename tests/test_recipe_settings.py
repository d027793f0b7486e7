"""Changing a recipe from the command line: ``--set field=value`` (coursetools.train_zoo.with_changes),
used by ``python -m coursetools.train_zoo`` and ``python -m benchmarks.recipe_search``."""

import pytest

from capsedu.zoo.recipes import RECIPES
from coursetools import train_zoo
from coursetools.train_zoo import with_changes

pytestmark = pytest.mark.tools  # the repository's tools (coursetools), not the package


def test_fields_and_config_fields_are_set_from_json_values():
    recipe, changes = with_changes(RECIPES["fashion_capsnet"], [
        "batch_size=64", "config.conv1_channels=48", "flip=true", "config.decoder_hidden=[8, 16]"])
    assert recipe.batch_size == 64 and recipe.flip is True
    assert recipe.config["conv1_channels"] == 48 and recipe.config["decoder_hidden"] == [8, 16]
    untouched = {k: v for k, v in recipe.config.items() if k not in ("conv1_channels", "decoder_hidden")}
    assert untouched == {k: v for k, v in RECIPES["fashion_capsnet"].config.items() if k in untouched}
    assert changes == {"batch_size": "64", "config.conv1_channels": "48", "flip": "true",
                       "config.decoder_hidden": "[8, 16]"}
    assert RECIPES["fashion_capsnet"].batch_size == 128  # the stored recipe is not changed


def test_two_settings_of_one_part_both_apply():
    recipe, _ = with_changes(RECIPES["capsnet"], ["config.conv1_channels=256", "config.primary_types=32"])
    assert (recipe.config["conv1_channels"], recipe.config["primary_types"]) == (256, 32)


@pytest.mark.parametrize("setting, message", [
    ("batch_size", "expected field=value"),
    ("epoch=3", "got 'epoch=3'"),
    ("seed.x=1", "got 'seed.x=1'"),
    ("lr=fast", "the value of 'lr' must be JSON"),
])
def test_bad_settings_name_what_was_expected(setting, message):
    with pytest.raises(ValueError, match=message):
        with_changes(RECIPES["capsnet"], [setting])


def test_the_training_command_trains_the_changed_recipe(monkeypatch, tmp_path):
    trained = {}

    def fake_train_shipped(name, recipe, out_dir, **options):
        trained[name] = recipe
        return {"name": name}

    monkeypatch.setattr(train_zoo, "train_shipped", fake_train_shipped)
    train_zoo.main(["capsnet", "--set", "batch_size=128", "--set", "config.primary_types=32",
                "--epochs", "2", "--out-dir", str(tmp_path)])
    assert trained["capsnet"].batch_size == 128 and trained["capsnet"].epochs == 2
    assert trained["capsnet"].config["primary_types"] == 32


@pytest.mark.parametrize("installed", ["site-packages", "dist-packages"])
def test_the_training_command_refuses_to_write_into_an_installed_package(monkeypatch, tmp_path,
                                                                          installed):
    inside = tmp_path / "lib" / "python3" / installed / "capsedu" / "zoo" / "weights"
    message = f"out_dir must be outside installed packages.*{installed}"
    with pytest.raises(ValueError, match=message):  # before loading any data
        train_zoo.train_shipped("capsnet", RECIPES["capsnet"], inside,
                                data_root=tmp_path / "no-data")

    def fail(*args, **options):
        raise AssertionError("trained before refusing the out-dir")

    monkeypatch.setattr(train_zoo, "train_shipped", fail)
    with pytest.raises(ValueError, match=message):  # before the first network of the list
        train_zoo.main(["capsnet", "--out-dir", str(inside)])
    assert train_zoo.writable_out_dir(tmp_path / "weights") == (tmp_path / "weights").resolve()
