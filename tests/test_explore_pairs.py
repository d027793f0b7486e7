"""Lesson 09's figures and pair explorer: what they draw is what the network computes."""


import numpy as np
import pytest
import torch
from matplotlib.figure import Figure

import capsedu
from capsedu.explore.pairs import (
    colour_pair,
    pair_accuracy_matrix,
    pair_explorer,
    pair_figure,
    pair_matrix_figure,
    reconstruct,
)
from capsedu.nets.multi_digit import pair_hits

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def model(pair_capsnet):
    return pair_capsnet


@pytest.fixture(scope="module")
def pairs():
    return capsedu.MultiMNIST(capsedu.load_offline("test"), 200, seed=0)


def test_reconstruct_masks_all_but_the_chosen_capsule(model, pairs):
    images, targets = pairs.batch(torch.arange(4))
    lengths, recon = reconstruct(model, images, targets.labels[:, 1])
    with torch.no_grad():
        out = model(images, targets.labels[:, 1])
    torch.testing.assert_close(lengths, out.lengths)
    torch.testing.assert_close(recon, out.reconstruction[:, 0])
    assert model.training  # left as found


def test_colour_pair_puts_each_reconstruction_in_its_colour():
    blank = torch.zeros(5, 5)
    first = blank.clone()
    first[1, 1] = 1.0
    rgb = colour_pair(blank, first, blank)
    assert rgb.shape == (5, 5, 3) and rgb[1, 1, 0] > rgb[1, 1, 2] and rgb[0, 0].sum() == 0


def test_pair_accuracy_matrix_agrees_with_pair_accuracy(model, pairs):
    shares, counts = pair_accuracy_matrix(model, pairs, batch_size=64)
    assert torch.equal(counts, counts.T) and counts.sum() == 2 * len(pairs)
    assert torch.isnan(shares.diagonal()).all()  # a pair never has two digits of one class
    with torch.no_grad():
        images, targets = pairs.batch(torch.arange(len(pairs)))
        hits = pair_hits(model.class_scores(images), targets.labels) == 2
    seen = counts > 0
    assert (shares[seen] * counts[seen]).sum() / 2 == pytest.approx(float(hits.sum()))


def test_figures_draw(model, pairs):
    assert isinstance(pair_figure(model, pairs, [0, 1]), Figure)
    shares, _ = pair_accuracy_matrix(model, pairs)
    assert isinstance(pair_matrix_figure({"a": shares, "b": shares}), Figure)


def test_the_matrix_title_names_the_lowest_cell_with_its_standard_error():
    shares = torch.full((10, 10), 0.9)
    shares[2, 5] = shares[5, 2] = 0.75
    counts = torch.full((10, 10), 300)
    figure = pair_matrix_figure({"CapsNet": shares}, {"CapsNet": counts})
    # 0.75 of 300 pairs: a standard error of 2.5 points
    assert figure.axes[0].get_title() == "CapsNet: lowest cell 2 & 5 (75 ± 2 %)"


def test_the_explorer_reconstructs_the_chosen_capsules(model, pairs):
    explorer = pair_explorer(model, pairs, index=3)
    labels = pairs.batch(torch.tensor([3]))[1].labels[0].tolist()
    assert explorer.shown == tuple(labels) and explorer.redraws == 1
    first_png = explorer.view.value
    explorer.first.value = (labels[0] + 1) % 10
    assert explorer.shown == ((labels[0] + 1) % 10, labels[1]) and explorer.redraws == 2
    assert explorer.view.value != first_png
    shown = explorer.panel.pictures[1].get_array()
    _, expected = reconstruct(model, pairs.batch(torch.tensor([3]))[0], torch.tensor([explorer.shown[0]]))
    np.testing.assert_allclose(np.asarray(shown), expected[0].numpy(), atol=1e-6)
    explorer.index.value = 7
    assert explorer.redraws == 3 and explorer.shown[1] == pairs.batch(torch.tensor([7]))[1].labels[0, 1]
    assert model.training
    with pytest.raises(TypeError, match="pairs must be a capsedu MultiMNIST"):
        pair_explorer(model, capsedu.load_offline("test"))
