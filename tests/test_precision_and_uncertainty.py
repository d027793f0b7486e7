"""Mixed precision is an opt-in of fit that routes in float32 and falls back, saying why; every
accuracy comes with its binomial standard error, and a gap under two of them is a tie."""

import math
import warnings

import numpy as np
import pytest
import torch

import capsedu
from capsedu.training import loop
from capsedu.training.hardware import bfloat16_problem
from capsedu.training.paired import compare_paired, pack_correct, shared_source_se, unpack_correct
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


@pytest.mark.tools  # a benchmark's command line
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


def _results(only_a: int, only_b: int, both: int, neither: int):
    a = [1] * only_a + [0] * only_b + [1] * both + [0] * neither
    b = [0] * only_a + [1] * only_b + [1] * both + [0] * neither
    return a, b


def test_paired_comparison_against_a_hand_computed_mcnemar():
    # 5 disagreements, all for B: exact two-sided p = 2 * (1/2)^5 = 0.0625
    result = compare_paired("A", _results(0, 5, 95, 0)[0], "B", _results(0, 5, 95, 0)[1])
    assert result.p_value == pytest.approx(0.0625)
    # 1 against 6: p = 2 * (C(7,0) + C(7,1)) / 2^7 = 0.125
    assert compare_paired("A", _results(1, 6, 50, 3)[0], "B", _results(1, 6, 50, 3)[1]).p_value == pytest.approx(0.125)
    # lesson 06's case in the review: 23 against 12 of 35 changed predictions
    a, b = _results(23, 12, 9_800, 165)
    result = compare_paired("routed", a, "uniform", b)
    by_hand = 2 * sum(math.comb(35, k) for k in range(13)) / 2 ** 35
    assert result.p_value == pytest.approx(by_hand)
    gap = 11 / 10_000
    assert result.gap == pytest.approx(gap)
    assert result.standard_error == pytest.approx(math.sqrt((35 / 10_000 - gap ** 2) / 10_000))
    assert str(result) == ("routed ahead by 0.11 ± 0.06 points on the same 10,000 images (paired: 23 right only "
                           "by routed, 12 only by uniform; exact McNemar p = 0.09): a tie")


def test_paired_error_is_the_spread_of_the_per_image_differences():
    a, b = [1] * 20, [1] * 16 + [0] * 4  # d = (0,...,0,1,1,1,1): mean 0.2, variance 0.16
    result = compare_paired("A", a, "B", b)
    assert result.standard_error == pytest.approx(math.sqrt(0.16 / 20))
    assert result.tie  # 2.2 standard errors, but 4 against 0 is a coin's luck once in 8
    assert str(result).endswith("(paired: 4 right only by A, 0 only by B; exact McNemar p = 0.12): a tie")
    a, b = [1] * 40, [1] * 32 + [0] * 8  # 8 against 0: p = 0.0078, 3.2 standard errors
    assert str(compare_paired("A", a, "B", b)).endswith("exact McNemar p = 0.0078): 3.2 standard errors")
    same = compare_paired("A", a, "B", a)
    assert same.tie and str(same) == "A and B right on exactly the same 40 images (100.00 %): a tie"
    swapped = compare_paired("A", [1, 0, 1], "B", [0, 1, 1])
    assert swapped.tie and "equal (66.67 %)" in str(swapped)


def test_paired_comparison_rejects_results_of_different_images():
    with pytest.raises(ValueError, match="correct_a and correct_b must cover the same images"):
        compare_paired("A", [1, 0], "B", [1, 0, 1])
    with pytest.raises(ValueError, match="correct_b must hold booleans or 0/1"):
        compare_paired("A", [1, 0], "B", [1, 2])
    with pytest.raises(ValueError, match="correct_a must be a non-empty 1-D"):
        compare_paired("A", [[1, 0]], "B", [1, 0])


def test_unpaired_known_answer_is_the_root_sum_of_squares():
    # 90 % and 70 % on 100 different images each: sqrt(0.0009 + 0.0021) = 0.0548, so 3.7 errors
    assert compare_accuracies("A", 0.9, 100, "B", 0.7, 100) == "A ahead by 20.00 ± 5.48 points: 3.7 standard errors"


@pytest.mark.artefacts  # the shipped CNN's record
def test_packed_correctness_round_trips_in_the_shipped_records_format():
    rng = np.random.default_rng(0)
    correct = rng.random(10_001) < 0.99
    text = pack_correct(correct)
    assert len(text) == 4 * math.ceil(1_251 / 3)  # base64 of 1,251 packed bytes
    np.testing.assert_array_equal(unpack_correct(text, 10_001), correct)
    np.testing.assert_array_equal(unpack_correct(pack_correct(torch.tensor([True, False, True])), 3),
                                  [True, False, True])
    shipped = capsedu.pretrained_metrics("cnn")
    assert unpack_correct(shipped["test_correct"], 10_000).mean() == pytest.approx(shipped["test_accuracy"])
    with pytest.raises(ValueError, match="not the 20 results asked for"):
        unpack_correct(text, 20)


def test_shared_digits_widen_the_error_and_unshared_ones_give_the_binomial_error():
    rng = np.random.default_rng(1)
    digits = rng.integers(0, 500, size=(1_000, 2))  # 1,000 pairs of 500 digits: each digit in about 4 pairs
    hard = rng.random(500) < 0.2  # a hard digit spoils every pair it is in
    correct = ~(hard[digits[:, 0]] | hard[digits[:, 1]])
    independent = math.sqrt(correct.mean() * (1 - correct.mean()) / correct.size)
    assert shared_source_se(correct, digits) > 1.3 * independent
    unshared = np.arange(2_000).reshape(1_000, 2)  # every pair its own digits: the binomial error again
    assert shared_source_se(correct, unshared) == pytest.approx(independent)
    # by hand: items 0 and 1 share digit 7; e = (1/3, 1/3, -2/3); sum_d: 7 -> 2/3, 1 -> 1/3, 2 -> 1/3,
    # 3 -> -2/3, 4 -> -2/3: 4/9 + 1/9 + 1/9 + 4/9 + 4/9 = 14/9, less one copy of each e^2 (6/9): 8/9
    assert shared_source_se([1, 1, 0], [[7, 1], [7, 2], [3, 4]]) == pytest.approx(math.sqrt(8 / 9) / 3)
    with pytest.raises(ValueError, match="sources must be"):
        shared_source_se(correct, digits[:10])
