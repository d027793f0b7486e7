"""Mixed precision is an opt-in of fit that routes in float32 and falls back, saying why; every
accuracy comes with its binomial standard error, and a gap under two of them is a tie."""

import math
import warnings

import pytest
import torch

import capsedu
from capsedu.training import loop
from capsedu.training.hardware import bfloat16_problem
from capsedu.training.uncertainty import compare_accuracies, standard_error, with_error

pytestmark = pytest.mark.unit

SMALL = capsedu.CapsNetConfig(conv1_channels=8, primary_types=2, primary_dim=4, digit_dim=8,
                              decoder_hidden=(16, 32))


def _batches():
    generator = torch.Generator().manual_seed(0)
    return [(torch.rand(8, 1, 28, 28, generator=generator), torch.arange(8))]


def test_bfloat16_runs_the_convolutions_in_bfloat16_and_the_routing_in_float32(monkeypatch):
    monkeypatch.setattr(loop, "bfloat16_problem", lambda device: "")  # as on a CPU with AVX-512 BF16
    capsedu.set_seed(0)
    model, seen = capsedu.CapsNet(SMALL), {}
    model.conv1.register_forward_hook(lambda m, i, out: seen.setdefault("conv1", out.dtype) and None)
    model.class_caps.register_forward_hook(lambda m, i, out: seen.setdefault("routing", out[0].dtype) and None)
    history = capsedu.fit(model, _batches(), epochs=1, precision="bfloat16", progress=False)
    assert seen == {"conv1": torch.bfloat16, "routing": torch.float32}
    assert history["precision"] == ["bfloat16"] and math.isfinite(history["train_loss"][0])
    assert next(model.parameters()).dtype == torch.float32  # the weights themselves stay float32


def test_bfloat16_falls_back_to_float32_with_the_reason(monkeypatch):
    monkeypatch.setattr(loop, "bfloat16_problem", lambda device: "this CPU has neither AVX-512 BF16 nor AMX")
    capsedu.set_seed(0)
    with pytest.warns(RuntimeWarning, match="neither AVX-512 BF16 nor AMX; training in float32"):
        history = capsedu.fit(capsedu.CapsNet(SMALL), _batches(), epochs=1, precision="bfloat16",
                              progress=False)
    assert history["precision"] == ["float32"]
    with pytest.raises(ValueError, match="precision must be one of"):
        capsedu.fit(capsedu.CapsNet(SMALL), _batches(), epochs=1, precision="float16")


def test_float32_is_the_default_and_asks_nothing_of_the_machine():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        history = capsedu.fit(capsedu.CapsNet(SMALL), _batches(), epochs=1, progress=False)
    assert history["precision"] == ["float32"]
    assert isinstance(bfloat16_problem("cpu"), str)


def test_standard_errors_and_ties():
    assert standard_error(0.995, 10_000) == pytest.approx(math.sqrt(0.995 * 0.005 / 10_000))
    assert with_error(0.98, 1_000) == "98.00 ± 0.44 %"
    assert compare_accuracies("CapsNet", 0.8231, 10_000, "CNN", 0.8274, 10_000) == \
        "CNN ahead by 0.43 ± 0.54 points: a tie"
    assert compare_accuracies("CapsNet", 0.995, 10_000, "CNN", 0.990, 10_000).endswith("4.1 standard errors")
    # equal accuracies, also where both standard errors are 0 (every image lost to an attack)
    assert compare_accuracies("CapsNet", 0.0, 500, "CNN", 0.0, 500) == "CapsNet and CNN equal (0.00 %): a tie"
    assert compare_accuracies("CapsNet", 0.9, 500, "CNN", 0.9, 500) == "CapsNet and CNN equal (90.00 %): a tie"
    assert compare_accuracies("CapsNet", 0.0, 500, "CNN", 1.0, 500).startswith("CNN ahead by 100.00 ± 0.00")
    with pytest.raises(ValueError, match="accuracy must be a number in"):
        standard_error(98.0, 100)


def test_the_precision_benchmark_times_the_recipe_itself_for_one_short_epoch():
    from benchmarks.precision_speed import main, short_recipe
    from capsedu.zoo.recipes import RECIPES

    pairs = short_recipe(RECIPES["multimnist"], "bfloat16", 256)
    assert (pairs.epochs, pairs.precision, pairs.pairs["pairs_per_epoch"]) == (1, "bfloat16", 256)
    assert {k: v for k, v in pairs.pairs.items() if k != "pairs_per_epoch"} == \
        {k: v for k, v in RECIPES["multimnist"].pairs.items() if k != "pairs_per_epoch"}
    assert (pairs.lr, pairs.batch_size, pairs.config) == (RECIPES["multimnist"].lr, 64, RECIPES["multimnist"].config)
    images = short_recipe(RECIPES["capsnet"], "float32", 256)
    assert images.pairs == {} and images.max_shift == RECIPES["capsnet"].max_shift
    with pytest.raises(SystemExit):  # argparse: "names: unknown recipes ['capsnett']"
        main(["capsnett"])
