"""Lesson 13's recorded studies re-measured in part: the adaptive attacks and the deep capsule
stacks."""

import dataclasses

import pytest

import capsedu
from benchmarks.adaptive_attacks import DATASETS, PGD_STEPS, alone, batch_size, crafted
from benchmarks.deep_capsules import HIDDEN, calibrate, gradient_norms
from capsedu.data.fashion_mnist import DEBIAN_FOLDER
from capsedu.explore.attacks import attacked_correct, pgd
from capsedu.nets.capsnet import CapsNetConfig
from capsedu.nets.deep_capsnet import DeepCapsConfig, DeepCapsNet
from capsedu.zoo.shipped import study

pytestmark = pytest.mark.artefacts


def test_the_adaptive_study_attacks_every_network_on_the_same_images():
    """At least 1,000 images for every network, the EM network too; each capsule network attacked
    through both of its gradients; every eps of the setting measured."""
    record = study("adaptive")
    assert set(record) - {"attacks"} == set(DATASETS)  # MNIST and Fashion-MNIST
    for dataset, setting in DATASETS.items():
        assert record[dataset]["eps"] == list(setting.eps) and record[dataset]["headline"] == setting.headline
        assert list(record[dataset]["networks"]) == list(setting.networks)
        for name, row in record[dataset]["networks"].items():
            assert row["images"] >= 1000 and row["images"] == record[dataset]["networks"][setting.networks[0]]["images"]
            assert sorted(row["by_eps"]) == sorted(str(eps) for eps in setting.eps)
            headline = row["by_eps"][str(setting.headline)]
            assert all(f"PGD {view}".strip() in headline["attacks"] for view in row["views"]), name
            assert any("Square" in link for link in headline["added"]), name


def test_the_adaptive_studys_first_batch_is_what_the_weights_give(shared_data, all_threads):
    """Step 1 re-run on the study's first batch of MNIST (250 images; the EM network's first 25):
    PGD through the CapsNet's true gradient and its surrogate, the vote attack, the CNN's PGD and
    its transfer to the CapsNet, the EM network's pre-sigmoid PGD, at the headline eps - each
    image's result as recorded, within one image of float noise between CPUs."""
    record = study("adaptive")["mnist"]
    eps = record["headline"]
    test = capsedu.load_mnist("test", root=shared_data, download=False, verbose=False)
    models = {name: capsedu.pretrained(name) for name in ("capsnet", "cnn", "em")}
    for name, model in models.items():
        size = batch_size(model)
        x, y = test.images[:size], test.labels[:size]
        crafted_by = {"cnn": crafted(pgd(models["cnn"], eps, steps=PGD_STEPS), x, y, size)} if name == "capsnet" else {}
        measured = alone(model, name, eps, True, crafted_by, x, y)
        row = record["networks"][name]
        for attack, right in measured.items():
            if attack not in row["by_eps"][str(eps)]["correct"]:
                continue  # the transfer from the CapsNet is crafted on the full batch of 250 only in the study
            stored = capsedu.unpack_correct(row["by_eps"][str(eps)]["correct"][attack], row["images"])[:size]
            differ = int((right.numpy() != stored).sum())
            assert differ <= 1, (name, attack, differ)


@pytest.mark.skipif(not (DEBIAN_FOLDER / "t10k-labels-idx1-ubyte.gz").is_file(),
                    reason="Debian's dataset-fashion-mnist is not installed (.ci/run installs it)")
def test_the_adaptive_studys_fashion_batch_is_what_the_weights_give(all_threads):
    """Fashion-MNIST's first batch (250 images) at the headline eps: the CNN's PGD, and the images
    it crafts shown to the CapsNet and to Efficient-CapsNet (transfers) - each image's result as
    recorded, within one image. (The capsule networks' own attacks cost about a minute a batch:
    the MNIST test above re-runs those on MNIST's networks.)"""
    record = study("adaptive")["fashion"]
    eps, size = record["headline"], 250
    test = capsedu.load_fashion_mnist("test", download=False, verbose=False)
    x, y = test.images[:size], test.labels[:size]
    cnn = capsedu.pretrained("fashion_cnn")
    measured = {("fashion_cnn", "PGD"): alone(cnn, "fashion_cnn", eps, True, {}, x, y)["PGD"]}
    adversarial = crafted(pgd(cnn, eps, steps=PGD_STEPS), x, y, size)
    for name in ("fashion_capsnet", "fashion_efficient"):
        model = capsedu.pretrained(name)
        measured[name, "transfer from fashion_cnn"] = attacked_correct(model, adversarial, y, None, batch_size=size)
    for (name, attack), right in measured.items():
        row = record["networks"][name]
        stored = capsedu.unpack_correct(row["by_eps"][str(eps)]["correct"][attack], row["images"])[:size]
        differ = int((right.numpy() != stored).sum())
        assert differ <= 1, (name, attack, differ)


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
