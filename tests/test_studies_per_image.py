"""The recorded studies keep each network's per-image results, so that every lesson comparison of
two networks on the same images can be paired: each stored accuracy is the mean of its stored
per-image results, and shipped networks' clean results agree with their own records."""

import numpy as np
import pytest

from capsedu import correct_on_test, unpack_correct
from capsedu.zoo.shipped import study

pytestmark = pytest.mark.artefacts


def _agrees(accuracy: float, packed: str, count: int) -> None:
    right = unpack_correct(packed, count)
    assert right.mean() == pytest.approx(accuracy, abs=1e-6), "an accuracy is not its per-image results' mean"


def test_robustness_rows_keep_both_networks_results_per_image():
    record = study("robustness")
    count = record["test_data"]["images"]
    for row in record["table"].values():
        for net in record["networks"]:
            _agrees(row[net], row["correct"][net], count)
    if count == 10_000:  # the official test split, in order: the clean row is the network's own record
        for net in record["networks"]:
            np.testing.assert_array_equal(unpack_correct(record["table"]["clean"]["correct"][net], count),
                                          correct_on_test(net).numpy())


def test_affnist_protocol_keeps_per_image_results():
    record = study("affnist40")
    for scores in record["accuracy"].values():
        for net, packed in scores["correct"].items():
            _agrees(scores[net], packed, record["images"])


def test_comparison_bench_keeps_per_image_results():
    record = study("comparison")
    count = record["test_data"]["images"]
    for row in record["rows"].values():
        _agrees(row["clean"], row["correct"]["clean"], count)
        _agrees(row["affnist_like"], row["correct"]["affnist_like"], count)
        _agrees(row["rotated_45"], row["correct"]["rotated_45"], 2 * count)


def test_adaptive_attack_rows_keep_per_image_results_and_each_worst_case_is_every_attacks_worst():
    """Lesson 13's adaptive study: every accuracy is its per-image mean; an image robust in the
    worst case survived every attack measured alone and the worst case at the smaller eps (a
    smaller ball lies inside a larger one); the chain's counts add up to the worst case."""
    record = study("adaptive")
    for dataset in (name for name in ("mnist", "fashion") if name in record):
        for name, row in record[dataset]["networks"].items():
            count = row["images"]
            _agrees(row["clean"], row["clean_correct"], count)
            before = unpack_correct(row["clean_correct"], count)
            for eps in record[dataset]["eps"]:
                cell = row["by_eps"][str(eps)]
                worst = unpack_correct(cell["worst_correct"], count)
                _agrees(cell["worst"], cell["worst_correct"], count)
                survived = before.copy()
                for attack, packed in cell["correct"].items():
                    _agrees(cell["attacks"][attack], packed, count)
                    survived &= unpack_correct(packed, count)
                assert int(survived.sum()) == cell["right after step 1"], (name, eps)
                assert not (worst & ~survived).any(), (name, eps)
                assert int(survived.sum()) - sum(cell["added"].values()) == int(worst.sum()), (name, eps)
                before = worst
