"""Lesson 08's pieces: predict, the transform explorer, equivariance probes and the exercise checks."""

import pytest
import torch

import capsedu
from capsedu.course.checks import robustness as checks
from capsedu.data.transforms import transform_images
from capsedu.explore.equivariance import (
    capsule_trajectory,
    feature_trajectory,
    projection_2d,
    smoothness,
)
from capsedu.explore.probes import linear_probe_error
from capsedu.nets.cnn import BaselineCNN, CNNConfig

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def cnn():
    capsedu.set_seed(0)
    return BaselineCNN(CNNConfig.cpu()).eval()


@pytest.fixture(scope="module")
def digits():
    generator = torch.Generator().manual_seed(3)
    images = torch.rand(6, 1, 28, 28, generator=generator) * (torch.rand(6, 1, 28, 28, generator=generator) > 0.7)
    return capsedu.MNISTData(images, torch.tensor([0, 1, 2, 3, 4, 5]), "random sparse images")


def test_predict_is_the_argmax_of_each_networks_class_scores(model, cnn, digits):
    model.train()
    predicted = capsedu.predict(model, digits.images, batch_size=4)
    assert model.training, "predict must leave the model's mode as it found it"
    model.eval()
    with torch.no_grad():
        assert torch.equal(predicted, model(digits.images).lengths.argmax(dim=1))
        assert torch.equal(capsedu.predict(cnn, digits.images), cnn(digits.images).argmax(dim=1))
        torch.testing.assert_close(model.class_scores(digits.images), model(digits.images).lengths)
    with pytest.raises(ValueError, match="images must be a non-empty"):
        capsedu.predict(cnn, digits.images[:0])
    with pytest.raises(ValueError, match="batch_size must be >= 1"):
        capsedu.predict(cnn, digits.images, batch_size=0)


def test_capsule_trajectory_follows_one_capsule_through_the_rotation(model, digits):
    angles = [-10.0, 0.0, 10.0, 20.0]
    path = capsule_trajectory(model, digits.images[0], 3, angles=angles)
    assert path.poses.shape == (4, 16) and path.lengths.shape == (4, 10)
    assert path.reconstructions.shape == (4, 28, 28) and path.images.shape == (4, 1, 28, 28)
    with torch.no_grad():
        out = model(transform_images(digits.images[:1], angle=20.0))
    torch.testing.assert_close(path.poses[3], out.capsules[0, 3])
    torch.testing.assert_close(path.lengths[1], model(digits.images[:1]).lengths[0].detach())
    shifted = capsule_trajectory(model, digits.images[0], 3, shifts=[(0, 0), (2, 1)])
    torch.testing.assert_close(shifted.images[1], transform_images(digits.images[:1], shift=(2.0, 1.0))[0])
    with pytest.raises(ValueError, match="exactly one of angles"):
        capsule_trajectory(model, digits.images[0], 3)
    with pytest.raises(ValueError, match="angle must be a number in"):
        capsule_trajectory(model, digits.images[0], 3, angles=[120.0])
    with pytest.raises(TypeError, match="model must be a capsedu.CapsNet"):
        capsule_trajectory(BaselineCNN(), digits.images[0], 3, angles=angles)


def test_feature_trajectory_and_path_measures(cnn, digits):
    features, probabilities = feature_trajectory(cnn, digits.images[1], angles=[0.0, 5.0, 10.0])
    assert features.shape == (3, cnn.config.hidden[-1]) and torch.allclose(probabilities.sum(dim=1), torch.ones(3))
    with pytest.raises(TypeError, match="model must be a capsedu.BaselineCNN"):
        feature_trajectory(capsedu.CapsNet(capsedu.CapsNetConfig.cpu()), digits.images[1], angles=[0.0])
    line = torch.linspace(0, 1, 11)[:, None] * torch.tensor([[3.0, 4.0, 0.0]])  # evenly spaced
    assert smoothness(line) == pytest.approx(0.1)
    jump = torch.cat([torch.zeros(5, 3), torch.ones(5, 3)])  # stays, then jumps once
    assert smoothness(jump) == pytest.approx(1.0)
    flat = projection_2d(line)
    assert flat.shape == (11, 2) and flat[:, 1].abs().max() < 1e-5  # a line has one direction
    assert (flat[:, 0] - flat[0, 0]).abs().tolist() == pytest.approx((5 * torch.linspace(0, 1, 11)).tolist(), abs=1e-5)
    with pytest.raises(ValueError, match="path must be"):
        smoothness(torch.zeros(1, 3))


def test_transform_explorer_shows_both_networks_on_the_transformed_digit(model, cnn, digits):
    pytest.importorskip("ipywidgets")
    from capsedu.explore.transform_explorer import transform_explorer, transform_strip

    cnn.train()
    ex = transform_explorer(model, cnn, digits, index=2)
    assert cnn.training, "the explorer must leave the CNN's mode as it found it"
    cnn.eval()
    redraws, before = ex.redraws, ex.view.value
    ex.angle.value = 30
    ex.dx.value = 3
    assert ex.redraws == redraws + 2 and ex.view.value != before
    shown = transform_images(digits.images[2:3], angle=30.0, shift=(3.0, 0.0))
    torch.testing.assert_close(torch.as_tensor(ex.panel.digit.get_array()).float(), shown[0, 0])
    with torch.no_grad():
        torch.testing.assert_close(ex.scores[0], model(shown).lengths[0])
        torch.testing.assert_close(ex.scores[1], cnn.probabilities(shown)[0])
    heights = torch.tensor([bar.get_height() for bar in ex.panel.cnn_bars])
    torch.testing.assert_close(heights, ex.scores[1], atol=1e-6, rtol=0)
    assert ex.panel.marker.get_x() == pytest.approx(1.5)  # the true class, 2, is shaded
    redraws = ex.redraws
    ex.reset_button.click()
    assert (ex.angle.value, ex.dx.value, ex.dy.value) == (0, 0, 0) and ex.redraws == redraws + 1
    with pytest.raises(TypeError, match="cnn must be a capsedu.BaselineCNN"):
        transform_explorer(model, model, digits)
    figure = transform_strip(model, cnn, digits.images[0], 0, [-30.0, 0.0, 30.0])
    assert len(figure.subfigs[0].axes) == 6


def test_the_linear_probe_fits_with_a_bias_and_measures_on_held_out_examples():
    generator = torch.Generator().manual_seed(0)
    angles = 90 * torch.rand(80, generator=generator) - 45
    features = torch.stack([angles / 45 + 3.0, torch.randn(80, generator=generator)], dim=1)  # offset: a bias is needed
    assert linear_probe_error(features[:40], angles[:40], features[40:], angles[40:]) < 1e-3
    assert linear_probe_error(features[:40, 1:], angles[:40], features[40:, 1:], angles[40:]) > 15


def learners_per_class(capsules, labels, angles, fit, held):
    pose = capsules[torch.arange(len(labels)), labels]
    squared, count = 0.0, 0
    for k in range(int(labels.max()) + 1):
        f, h = fit[labels[fit] == k], held[labels[held] == k]
        if len(f) and len(h):
            squared += linear_probe_error(pose[f], angles[f], pose[h], angles[h]) ** 2 * len(h)
            count += len(h)
    return (squared / count) ** 0.5


def test_check_class_probe_passes_one_probe_per_class_and_names_mistakes(capsys):
    assert checks.check_class_probe(learners_per_class)
    assert checks.check_class_probe(checks.class_probe_error)
    for kind, fragment in (("longest", "capsule of its label"), ("all_capsules", "all the capsules"),
                           ("shared", "one probe for every class"), ("unweighted", "mean of the classes' errors"),
                           ("weighted_errors", "pool their squared errors, weighted"),
                           ("swapped", "fitted on the held-out digits")):
        assert not checks.check_class_probe(lambda *a, kind=kind: checks.class_probe_error(*a, kind=kind))
        assert fragment in capsys.readouterr().out, kind
    assert not checks.check_class_probe(lambda *a: [1.0, 2.0])
    assert "one number" in capsys.readouterr().out
    assert not checks.check_class_probe(lambda c, lab, ang, fit, held: learners_per_class(c, lab, ang, fit, held) * 1.1)
    assert "class 3 has none to fit on" in capsys.readouterr().out


def test_check_orientation_reads_bars_and_names_mistakes(capsys):
    assert checks.check_orientation(checks.reference_orientation)
    angles = checks.reference_orientation(checks._strokes())
    assert angles.tolist() == pytest.approx([0.0, 30.0, 60.0, -45.0], abs=1.0)  # bars drawn at these
    assert not checks.check_orientation(lambda x: -checks.reference_orientation(x))
    assert "wrong way" in capsys.readouterr().out
    assert not checks.check_orientation(lambda x: torch.deg2rad(checks.reference_orientation(x)))
    assert "degrees, not radians" in capsys.readouterr().out
    assert not checks.check_orientation(lambda x: 2 * checks.reference_orientation(x))
    assert "halve it" in capsys.readouterr().out

    def stub(images):
        raise NotImplementedError

    assert not checks.check_orientation(stub)
    assert "still the stub" in capsys.readouterr().out
