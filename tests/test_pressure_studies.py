"""Lesson 13's recorded studies re-measured in part: the attack curves and the deep capsule stacks."""

import dataclasses

import pytest

import capsedu
from benchmarks.adversarial_study import APGD_STEPS, DATASETS, NO_APGD, PGD_STEPS
from benchmarks.deep_capsules import HIDDEN, calibrate, gradient_norms
from capsedu.explore.attacks import apgd, attacked_accuracy, fgsm, pgd
from capsedu.nets.capsnet import CapsNetConfig
from capsedu.nets.deep_capsnet import DeepCapsConfig, DeepCapsNet
from capsedu.zoo.shipped import study

pytestmark = pytest.mark.artefacts


def test_the_attack_study_covers_every_network_and_attack():
    record = study("adversarial")
    for dataset, (names, source, eps_values) in DATASETS.items():
        assert record[dataset]["eps"] == list(eps_values) and record[dataset]["transfer_from"] == source
        assert sorted(record[dataset]["networks"]) == sorted(names)
        for name, row in record[dataset]["networks"].items():
            attacks = ("fgsm", "pgd", "transfer") + (() if name in NO_APGD else ("apgd",))
            assert ("apgd" in row) == (name not in NO_APGD), name
            assert all(len(row[key]) == len(eps_values) for key in attacks)
            assert all(0 <= a <= 1 for key in attacks for a in row[key])


@pytest.mark.parametrize("eps_index", [1, 3])
def test_the_capsnets_recorded_attack_curve_is_what_its_weights_give(shared_data, eps_index, all_threads):
    """FGSM, PGD, Auto-PGD and the transfer attack on the CapsNet, re-run on the recorded images:
    the same accuracy within one image (float sums differ between CPUs)."""
    record = study("adversarial")["mnist"]
    row, eps = record["networks"]["capsnet"], record["eps"][eps_index]
    test = capsedu.load_mnist("test", root=shared_data, download=False, verbose=False)
    images, labels = test.images[:row["images"]], test.labels[:row["images"]]
    capsnet, cnn = capsedu.pretrained("capsnet"), capsedu.pretrained("cnn")
    one_image = 1.5 / row["images"]
    assert attacked_accuracy(capsnet, images, labels, None) == pytest.approx(row["clean"], abs=one_image)
    assert attacked_accuracy(capsnet, images, labels, lambda x, y: fgsm(capsnet, x, y, eps)) == pytest.approx(
        row["fgsm"][eps_index], abs=one_image)
    assert attacked_accuracy(capsnet, images, labels, pgd(capsnet, eps, steps=PGD_STEPS)) == pytest.approx(
        row["pgd"][eps_index], abs=one_image)
    assert attacked_accuracy(capsnet, images, labels, pgd(cnn, eps, steps=PGD_STEPS)) == pytest.approx(
        row["transfer"][eps_index], abs=one_image)
    assert attacked_accuracy(capsnet, images, labels, apgd(capsnet, eps, steps=APGD_STEPS)) == pytest.approx(
        row["apgd"][eps_index], abs=one_image)


@pytest.mark.parametrize("init", ["default", "calibrated"])
def test_the_deep_stacks_start_as_recorded(full_data, init):
    """Each depth's gradient norms before training, on the recorded probe batch, for seed 0."""
    record = study("deep_capsules")
    train = capsedu.data.splits.load_split("train", root=full_data, download=False, verbose=False)
    probe = train.images[:128], train.labels[:128]
    for depth in HIDDEN:
        run = next(r for r in record["runs"] if r["routed_layers"] == depth and r["init"] == init and r["seed"] == 0)
        capsedu.set_seed(0)
        model = DeepCapsNet(DeepCapsConfig(**dataclasses.asdict(CapsNetConfig.cpu()), hidden_caps=HIDDEN[depth]))
        if init == "calibrated":
            calibrate(model, probe[0])
        for layer, norm in gradient_norms(model, *probe).items():
            assert norm == pytest.approx(run["gradient_norms"][0][layer], rel=1e-3, abs=1e-30), (depth, layer)
