"""Lesson 12's comparison table: written by benchmarks/compare_networks.py from the shipped
networks as they are now, and benchmarks/README.md shows exactly what the script wrote."""

import pytest

from benchmarks.compare_networks import MARKERS, NETWORKS, README, markdown
from capsedu import pretrained_metrics
from capsedu.zoo.shipped import study

pytestmark = pytest.mark.artefacts


def test_stored_comparison_study_covers_every_single_digit_network_as_shipped_now():
    rows = study("comparison")["rows"]
    assert list(rows) == list(NETWORKS)
    for name, row in rows.items():
        metrics = pretrained_metrics(name)
        assert row["recorded_clean"] == metrics["test_accuracy"], f"{name} was re-shipped: rerun the benchmark"
        assert row["train_minutes"] == metrics["train_wall_seconds"] / 60
        assert abs(row["clean"] - metrics["test_accuracy"]) < 0.002  # re-measured on the same 10,000
        assert 0 < row["rotated_45"] < row["clean"] and 0 < row["affnist_like"] <= 1


def test_stored_readme_table_is_the_stored_studys_output():
    text = README.read_text()
    start, end = text.index(MARKERS[0]) + len(MARKERS[0]), text.index(MARKERS[1])
    assert text[start:end].strip() == markdown(study("comparison")).strip()
