"""`benchmarks.adversarial_study --networks`: re-measuring some networks keeps the other rows."""

import pytest

from benchmarks.adversarial_study import merged

pytestmark = pytest.mark.unit


def _study():
    row = {"images": 4, "clean": 1.0, "fgsm": [0.5], "pgd": [0.25], "transfer": [0.75], "seconds": 1.0}
    return {"mnist": {"test_data": "official", "eps": [0.1], "transfer_from": "cnn",
                      "networks": {"cnn": dict(row), "em": dict(row, images=2)}},
            "seconds": 10}


def test_the_named_rows_are_replaced_and_the_others_kept():
    recorded = _study()
    fresh_em = dict(recorded["mnist"]["networks"]["em"], pgd=[0.0])
    partial = {"mnist": {**recorded["mnist"], "networks": {"em": fresh_em}}}
    result = merged(recorded, partial, {"seconds": 3, "cpu": "test"})
    assert result["mnist"]["networks"]["em"]["pgd"] == [0.0]
    assert result["mnist"]["networks"]["cnn"] == recorded["mnist"]["networks"]["cnn"]
    assert result["updates"] == [{"networks": ["em"], "seconds": 3, "cpu": "test"}]
    assert result["seconds"] == 10 and "updates" not in recorded  # the whole run's record, the input untouched
    again = merged(result, partial, {"seconds": 4})
    assert [u["seconds"] for u in again["updates"]] == [3, 4]


@pytest.mark.parametrize("change, words", [({"eps": [0.2]}, "other eps"), ({"test_data": "other"}, "other eps or test data")])
def test_a_partial_run_with_other_settings_is_refused(change, words):
    recorded = _study()
    partial = {"mnist": {**recorded["mnist"], **change, "networks": {"em": recorded["mnist"]["networks"]["em"]}}}
    with pytest.raises(ValueError, match=words):
        merged(recorded, partial, {})


def test_a_partial_run_on_other_images_is_refused():
    recorded = _study()
    partial = {"mnist": {**recorded["mnist"], "networks": {"em": dict(recorded["mnist"]["networks"]["em"], images=3)}}}
    with pytest.raises(ValueError, match="em's recorded row used 2 images, this run 3"):
        merged(recorded, partial, {})
