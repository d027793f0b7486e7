"""Lesson 08's protocol: digits placed on a 40x40 canvas, the affNIST-like 40x40 test set, the
independent x and y scaling under it, the 40x40 recipes' data; and recipes read the dataset they
name (MNIST or Fashion-MNIST)."""

import dataclasses

import pytest
import torch

from capsedu.data.augment import affine
from capsedu.data.mnist import MNISTData
from capsedu.data.transforms import AFFNIST_RANGES, CANVAS, affnist_like_40, on_canvas
from capsedu.zoo.recipes import RECIPES
from capsedu.zoo.train import padded

pytestmark = pytest.mark.unit

# the first test digits' ink after affnist_like_40(test, seed=0): a fingerprint of the set that
# every machine must draw the same way (tolerances cover bilinear float differences between CPUs)
FIRST_INK = [71.71, 109.304, 32.692, 177.501, 71.692, 46.146]
FIRST_CENTRES = [[16.7, 19.1], [17.9, 23.9], [27.1, 14.0], [26.2, 22.2], [13.3, 13.4], [18.3, 26.9]]


def _digits(n=6, seed=0):
    """Blocky 28x28 'digits': a filled rectangle of random size and place inside the frame."""
    g = torch.Generator().manual_seed(seed)
    images = torch.zeros(n, 1, 28, 28)
    for k in range(n):
        h, w = (int(v) for v in torch.randint(6, 14, (2,), generator=g))
        top, left = (int(v) for v in torch.randint(4, 10, (2,), generator=g))
        images[k, 0, top:top + h, left:left + w] = 1.0
    return MNISTData(images, torch.arange(n) % 10, "blocks")


def _centre(images):
    """Ink-weighted centre (x, y) of each (N, 1, H, W) image."""
    ys, xs = torch.meshgrid(torch.arange(images.shape[-2]), torch.arange(images.shape[-1]), indexing="ij")
    mass = images.sum(dim=(1, 2, 3))
    return torch.stack([(images[:, 0] * xs).sum((1, 2)) / mass, (images[:, 0] * ys).sum((1, 2)) / mass], 1)


def test_scales_per_axis_stretch_one_axis_and_one_factor_is_both():
    square = torch.zeros(1, 1, 40, 40)
    square[..., 16:24, 16:24] = 1.0
    zero = torch.zeros(1, dtype=torch.float64)
    wide = affine(square, zero, torch.tensor([[2.0, 1.0]], dtype=torch.float64), zero, torch.zeros(1, 2))
    cols, rows = (wide[0, 0] > 0.5).any(0).sum(), (wide[0, 0] > 0.5).any(1).sum()
    assert (int(cols), int(rows)) == (16, 8)
    one = affine(square, zero, torch.tensor([1.5], dtype=torch.float64), zero, torch.zeros(1, 2))
    both = affine(square, zero, torch.tensor([[1.5, 1.5]], dtype=torch.float64), zero, torch.zeros(1, 2))
    assert torch.equal(one, both)
    with pytest.raises(ValueError, match=r"scales must be a \(1, 2\) tensor"):
        affine(square, zero, torch.ones(1, 3), zero, torch.zeros(1, 2))


def test_on_canvas_places_every_digit_whole_within_six_pixels_of_the_centre():
    data = _digits(50)
    placed = on_canvas(data, seed=3)
    assert placed.images.shape == (50, 1, CANVAS, CANVAS)
    assert torch.allclose(placed.images.sum((1, 2, 3)), data.images.sum((1, 2, 3)))  # nothing cut off
    moves = _centre(placed.images) - _centre(data.images) - 6  # the frame's move from the centre
    assert moves.abs().max() <= 6 + 1e-4 and moves.abs().max() >= 4  # up to 6 px, and used
    assert torch.equal(on_canvas(data, seed=3).images, placed.images)
    assert not torch.equal(on_canvas(data, seed=4).images, placed.images)


def test_affnist_like_40_keeps_the_ink_on_the_canvas_and_moves_it_far():
    data = _digits(200)
    centred = affnist_like_40(data, parts=("rotation", "shear", "scale"))
    moved = affnist_like_40(data)
    assert torch.allclose(moved.images.sum((1, 2, 3)), centred.images.sum((1, 2, 3)), rtol=1e-5)
    shift = _centre(moved.images) - _centre(centred.images)
    assert shift.abs().max() > 8  # beyond the training digits' 6-pixel moves
    near = affnist_like_40(data, max_move=6)
    near_shift = _centre(near.images) - _centre(centred.images)
    assert near_shift.abs().max() <= 6 + 1e-4
    assert torch.allclose(near.images.sum((1, 2, 3)), centred.images.sum((1, 2, 3)), rtol=1e-5)


def test_affnist_like_40_parts_use_the_same_draws_and_nothing_is_identity():
    data = _digits(20)
    plain = affnist_like_40(data, parts=())
    assert torch.allclose(plain.images, torch.nn.functional.pad(data.images, [6] * 4), atol=1e-5)
    turned = affnist_like_40(data, parts=("rotation",))
    assert not torch.equal(turned.images, plain.images)
    assert torch.equal(affnist_like_40(data, parts=("rotation",)).images, turned.images)
    with pytest.raises(ValueError, match="parts must be a tuple of names"):
        affnist_like_40(data, parts=("zoom",))
    with pytest.raises(ValueError, match="parts must be a tuple"):
        affnist_like_40(data, parts="rotation")
    with pytest.raises(TypeError, match="data must be an MNISTData"):
        affnist_like_40(data.images)
    assert AFFNIST_RANGES == {"rotation": 20.0, "shear": 0.2, "scale": (0.8, 1.25)}


@pytest.mark.tools  # over a second of CPU: the unit tier keeps a margin below its 2.5 s
def test_affnist_like_40_test_set_is_drawn_the_same_on_every_machine(shared_data):
    from capsedu import load_mnist

    test = load_mnist("test", root=shared_data, download=False, verbose=False)
    first = MNISTData(test.images[:6], test.labels[:6], test.source)
    images = affnist_like_40(first).images
    assert images.sum((1, 2, 3)).tolist() == pytest.approx(FIRST_INK, abs=0.05)
    assert _centre(images).flatten().tolist() == pytest.approx(sum(FIRST_CENTRES, []), abs=0.1)


@pytest.mark.tools  # the repository's recipe data (coursetools)
def test_padded_and_the_40x40_recipes(monkeypatch):
    from coursetools.recipe_data import recipe_data

    data = _digits(4)
    assert padded(data, 28) is data
    assert padded(data, 40).images.shape == (4, 1, 40, 40)
    with pytest.raises(ValueError, match="recipe.canvas must be 28 or 40"):
        padded(data, 36)
    for name in ("capsnet40", "cnn40"):
        recipe = RECIPES[name]
        assert (recipe.canvas, recipe.max_shift, recipe.config["image_size"]) == (40, 6, 40)
    monkeypatch.setattr("coursetools.recipe_data.load_split", lambda split, root=None, **kw: _digits(10, seed=len(split)))
    sets = recipe_data(RECIPES["capsnet40"])
    assert {k: v.images.shape[-1] for k, v in sets.items()} == {
        "train": 28, "validation": 40, "test": 40, "validation_affnist": 40}
    assert "placed on a 40x40 canvas" in sets["test"].source
    assert set(recipe_data(dataclasses.replace(RECIPES["capsnet40"], canvas=28))) == {"train", "validation", "test"}


@pytest.mark.tools  # the repository's recipe data (coursetools)
def test_a_recipe_reads_the_dataset_it_names(monkeypatch):
    from coursetools.recipe_data import recipe_data

    read = []
    monkeypatch.setattr("coursetools.recipe_data.load_split", lambda split, root=None, **kw: read.append(("mnist", split)) or _digits(4))
    monkeypatch.setattr("coursetools.recipe_data.load_fashion_mnist",
                        lambda split, root=None, **kw: read.append(("fashion", split)) or _digits(4))
    recipe_data(RECIPES["fashion_capsnet"])
    recipe_data(RECIPES["capsnet"])
    assert read == [("fashion", s) for s in ("train", "validation", "test")] + [
        ("mnist", s) for s in ("train", "validation", "test")]
    with pytest.raises(ValueError, match="recipe.dataset must be one of"):
        recipe_data(dataclasses.replace(RECIPES["capsnet"], dataset="cifar"))
