"""The baseline CNN (lesson 08), the transformed test sets and the training warps."""

from types import SimpleNamespace

import pytest
import torch

import capsedu
from capsedu.data.augment import random_flip, random_warp, warp
from capsedu.data.transforms import affnist_like, transform_images, transformed_set
from capsedu.nets.cnn import BaselineCNN, CNNConfig
from capsedu.training.objectives import CrossEntropyObjective, MultiLabelObjective

pytestmark = pytest.mark.unit


def count(model):
    return sum(p.numel() for p in model.parameters())


def test_cpu_cnn_is_within_ten_percent_of_the_cpu_capsnet_with_its_decoder():
    capsnet = count(capsedu.CapsNet(capsedu.CapsNetConfig.cpu()))
    assert abs(count(BaselineCNN(CNNConfig.cpu())) / capsnet - 1) < 0.10
    assert 35.3e6 < count(BaselineCNN(CNNConfig.paper())) < 35.5e6  # the paper's 35.4 M


@pytest.mark.parametrize("size", [28, 36])
def test_cnn_shapes_losses_and_features(size):
    torch.manual_seed(0)
    model = BaselineCNN(CNNConfig.cpu(size)).eval()
    x = torch.rand(3, 1, size, size)
    assert model(x).shape == (3, 10) and model.features(x).shape == (3, model.config.hidden[-1])
    assert torch.allclose(model.probabilities(x).sum(dim=1), torch.ones(3))
    loss, correct = CrossEntropyObjective()(model, x, torch.tensor([1, 2, 3]))
    assert loss.dim() == 0 and 0 <= int(correct) <= 3
    multi = BaselineCNN(CNNConfig.cpu(size, multi_label=True)).eval()
    targets = torch.zeros(3, 10)
    targets[:, [2, 5]] = 1.0
    logits = multi(x)
    loss, correct = MultiLabelObjective()(multi, x, SimpleNamespace(multi_hot=targets))
    top2 = set(logits[0].topk(2).indices.tolist())
    assert int(correct) == sum(set(row.topk(2).indices.tolist()) == {2, 5} for row in logits)
    assert loss.dim() == 0 and top2 <= set(range(10))


def test_cnn_rejects_bad_input_and_configs():
    model = BaselineCNN(CNNConfig.cpu())
    with pytest.raises(ValueError, match=r"x must have shape \(B, 1, 28, 28\)"):
        model(torch.rand(2, 1, 36, 36))
    with pytest.raises(ValueError, match="NaN"):
        model(torch.full((1, 1, 28, 28), float("nan")))
    with pytest.raises(TypeError, match="config must be a CNNConfig"):
        BaselineCNN(capsedu.CapsNetConfig.cpu())
    with pytest.raises(ValueError, match="one pool flag per convolution"):
        BaselineCNN(CNNConfig(pool=(True,)))


def test_transformations_rotate_anticlockwise_and_keep_shapes_and_ink():
    digit = torch.zeros(1, 1, 28, 28)
    digit[0, 0, 14:16, 18:24] = 1.0  # a short horizontal bar right of the centre
    turned = transform_images(digit, angle=90)
    rows, cols = torch.nonzero(turned[0, 0] > 0.5, as_tuple=True)
    assert rows.float().mean() < 13 and (cols.float().mean() - 14).abs() < 1.5  # now above the centre
    assert torch.allclose(transform_images(digit), digit, atol=1e-5)
    moved, kept = transform_images(digit, shift=(8, 0), return_ink_kept=True)
    assert kept.item() < 0.9  # a large shift pushes ink out of the crop, and it is reported


def test_transformed_sets_are_deterministic_and_named():
    data = capsedu.load_offline("test", verbose=False).subset(40)
    rotated = transformed_set(data, angle=30)
    assert torch.equal(rotated.labels, data.labels) and "angle=30" in rotated.source
    first, again = affnist_like(data, seed=3), affnist_like(data, seed=3)
    assert torch.equal(first.images, again.images) and not torch.equal(first.images, data.images)
    assert not torch.equal(affnist_like(data, seed=4).images, first.images)


@pytest.mark.parametrize("kwargs, match", [({"angle": 120}, "angle must be"), ({"scale": 3}, "scale must be"),
                                           ({"shear": 1.0}, "shear must be"), ({"shift": (9, 0)}, "shift must be")])
def test_out_of_range_transformations_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        transform_images(torch.zeros(1, 1, 28, 28), **kwargs)


def test_empty_and_foreign_inputs_are_named():
    with pytest.raises(ValueError, match="images is empty"):
        transform_images(torch.zeros(0, 1, 28, 28), angle=10)
    with pytest.raises(TypeError, match="data must be an MNISTData"):
        affnist_like(torch.zeros(2, 1, 28, 28))


def bar_right_of_centre(count=1):
    digit = torch.zeros(count, 1, 28, 28)
    digit[:, 0, 13:15, 18:24] = 1.0  # a short horizontal bar right of the centre (13.5, 13.5)
    return digit


def centre_of_ink(image):
    rows, cols = torch.meshgrid(torch.arange(28.0), torch.arange(28.0), indexing="ij")
    return float((image * rows).sum() / image.sum()), float((image * cols).sum() / image.sum())


def test_warp_turns_anticlockwise_scales_about_the_centre_and_keeps_the_identity():
    digit = bar_right_of_centre(3)
    out = warp(digit, torch.tensor([0.0, 90.0, 0.0]), torch.tensor([1.0, 1.0, 1.5]))
    torch.testing.assert_close(out[0], digit[0])  # no turn, no scale: the same pixels
    row, col = centre_of_ink(out[1])
    assert row < 10 and abs(col - 13.5) < 0.5  # turned anticlockwise: now above the centre
    row, col = centre_of_ink(out[2])
    assert abs(row - 13.5) < 0.5 and col > centre_of_ink(digit[0])[1] + 2  # further out


def test_random_flip_mirrors_about_half_the_images_each_by_its_own_seeded_coin():
    images = torch.rand(200, 1, 28, 28)
    flipped = random_flip(images, torch.Generator().manual_seed(0))
    mirrored = torch.tensor([torch.equal(f, i.flip(-1)) for f, i in zip(flipped, images)])  # (N,)
    kept = torch.tensor([torch.equal(f, i) for f, i in zip(flipped, images)])  # (N,)
    assert bool((mirrored ^ kept).all()), "each image is either mirrored left-right or unchanged"
    assert 70 < int(mirrored.sum()) < 130  # a fair coin: 100 +- 3.5 standard deviations
    torch.testing.assert_close(random_flip(images, torch.Generator().manual_seed(0)), flipped)
    with pytest.raises(ValueError, match=r"images must be a 4-D tensor \(N, C, H, W\)"):
        random_flip(torch.zeros(28, 28))


def test_random_warp_gives_each_image_its_own_seeded_warp():
    digits = bar_right_of_centre(4)
    first = random_warp(digits, 20, 0.1, torch.Generator().manual_seed(0))
    again = random_warp(digits, 20, 0.1, torch.Generator().manual_seed(0))
    assert torch.equal(first, again) and not torch.equal(first[0], first[1])
    torch.testing.assert_close(random_warp(digits, 0, 0), digits)
    with pytest.raises(ValueError, match=r"max_angle must be a number in \[0.0, 90.0\]"):
        random_warp(digits, 120, 0.1)
    with pytest.raises(ValueError, match=r"max_scale must be a number in \[0.0, 0.5\]"):
        random_warp(digits, 10, -0.1)
    with pytest.raises(ValueError, match=r"angles must be a \(4,\) tensor"):
        warp(digits, torch.zeros(3), torch.ones(4))
    with pytest.raises(ValueError, match="scales must all be > 0"):
        warp(digits, torch.zeros(4), torch.zeros(4))
    with pytest.raises(ValueError, match=r"images must be a 4-D tensor \(N, C, H, W\)"):
        random_warp(torch.zeros(28, 28))
    with pytest.raises(TypeError, match="images must be a floating-point tensor"):
        warp(torch.zeros(4, 1, 28, 28, dtype=torch.long), torch.zeros(4), torch.ones(4))
