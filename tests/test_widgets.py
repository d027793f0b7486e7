"""capsedu.explore.widgets: drive the explorers' controls directly and check what they show."""

import matplotlib.pyplot as plt
import pytest
import torch

import capsedu
from capsedu.explore import probes
from capsedu.explore.figures import COUPLING_TOP, coupling_norm, perturbation_grid
from capsedu.explore.widgets import perturbation_explorer, routing_explorer, share_axis_top

pytestmark = pytest.mark.unit

pytest.importorskip("ipywidgets")



@pytest.fixture(scope="module")
def dataset():
    generator = torch.Generator().manual_seed(2)
    images = torch.rand(4, 1, 28, 28, generator=generator)
    return capsedu.MNISTData(images, torch.tensor([0, 1, 2, 3]), "random test images")


def test_slider_moves_the_reconstruction_and_the_winning_bar(model, dataset):
    ex = perturbation_explorer(model, dataset)
    label, before_png = ex.encoded.prediction, ex.view.value
    before_recon, before_lengths = ex.reconstruction.clone(), ex.lengths.clone()
    redraws = ex.redraws
    ex.sliders[4].value = 0.25
    assert ex.redraws == redraws + 1  # one redraw per move
    assert not torch.allclose(ex.reconstruction, before_recon)
    capsules = ex.encoded.capsules.clone()
    capsules[label, 4] += 0.25
    with torch.no_grad():
        expected = model.decode(capsules[None], torch.tensor([label]))[0, 0]
    assert torch.allclose(ex.reconstruction, expected, atol=1e-6)
    assert torch.allclose(ex.lengths, capsules.norm(dim=-1), atol=1e-6)
    others = [k for k in range(10) if k != label]
    assert torch.equal(ex.lengths[others], before_lengths[others])
    bar_heights = torch.tensor([bar.get_height() for bar in ex.panel.bars])
    assert torch.allclose(bar_heights, ex.lengths, atol=1e-6)
    shown = torch.as_tensor(ex.panel.reconstruction.get_array())
    assert torch.allclose(shown.float(), ex.reconstruction, atol=1e-6)
    assert ex.view.value != before_png


def test_reset_restores_the_original_in_one_redraw(model, dataset):
    ex = perturbation_explorer(model, dataset)
    original, lengths = ex.reconstruction.clone(), ex.lengths.clone()
    ex.sliders[0].value = -0.25
    ex.sliders[15].value = 0.1
    redraws = ex.redraws
    ex.reset_button.click()
    assert ex.redraws == redraws + 1
    assert all(s.value == 0 for s in ex.sliders)
    assert torch.allclose(ex.reconstruction, original)
    assert torch.allclose(ex.lengths, lengths)


def test_perturbation_index_change_reencodes_and_resets(model, dataset):
    ex = perturbation_explorer(model, dataset)
    ex.sliders[2].value = 0.2
    ex.index.value = 3
    assert all(s.value == 0 for s in ex.sliders)
    with torch.no_grad():
        out = model(dataset.images[3:4])
    assert torch.allclose(ex.encoded.capsules, out.capsules[0], atol=1e-6)
    assert torch.allclose(ex.reconstruction, out.reconstruction[0, 0], atol=1e-6)
    assert torch.equal(torch.as_tensor(ex.panel.original.get_array()).float(), dataset.images[3, 0])
    assert ex.panel.title_in.get_text() == "input (label 3)"


def test_explorers_update_one_figure_in_place(model, dataset):
    figures_before = plt.get_fignums()
    ex = perturbation_explorer(model, dataset)
    figure, axes = ex.figure, list(ex.figure.axes)
    for value in (0.05, 0.1, -0.25):
        ex.sliders[7].value = value
    ex.index.value = 1
    assert ex.figure is figure and list(ex.figure.axes) == axes
    assert len(ex.panel.bars) == 10 and len(ex.figure.axes[2].patches) == 10
    assert plt.get_fignums() == figures_before


@pytest.mark.tools  # over a second of CPU: the unit tier keeps a margin below its 2.5 s
def test_routing_slider_changes_couplings_without_recomputing_u_hat(strong_model, dataset,
                                                                    monkeypatch):
    model = strong_model
    ex = routing_explorer(model, dataset)
    calls = []
    monkeypatch.setattr("capsedu.explore.widgets.encode_image",
                        lambda *a: calls.append(1) or probes.encode_image(*a))
    u_hat = ex.encoded.u_hat
    ex.iterations.value = 1
    uniform = ex.trace.couplings.clone()
    assert torch.allclose(uniform, torch.full_like(uniform, 0.1))
    png = ex.view.value
    ex.iterations.value = 3
    assert not torch.allclose(ex.trace.couplings, uniform)
    assert ex.trace.lengths.shape == (3, 10)
    assert ex.encoded.u_hat is u_hat and calls == []  # u_hat reused across slider moves
    with torch.no_grad():
        out = model(dataset.images[0:1], return_couplings=True, routing_iterations=3)
    assert torch.allclose(ex.trace.couplings, out.couplings[0], atol=1e-6)
    assert torch.allclose(ex.trace.lengths[-1], out.lengths[0], atol=1e-6)
    lines = ex.panel.lines
    assert all(len(line.get_xdata()) == 3 for line in lines)
    assert ex.view.value != png


def test_routing_index_change_recomputes_u_hat(model, dataset):
    ex = routing_explorer(model, dataset)
    ex.index.value = 2
    with torch.no_grad():
        out = model(dataset.images[2:3], routing_iterations=ex.iterations.value)
    assert torch.allclose(ex.trace.lengths[-1], out.lengths[0], atol=1e-6)
    assert "label 2" in ex.panel.title_img.get_text()
    assert f"predicted {int(out.lengths.argmax())}" in ex.panel.title_img.get_text()


@pytest.mark.tools  # over a second of CPU: the unit tier keeps a margin below its 2.5 s
def test_perturbation_grid_rows_are_dimensions_and_columns_offsets(strong_model, dataset):
    figure = perturbation_grid(strong_model, dataset.images[0])
    assert len(figure.axes) == 16 * 11
    images, _ = probes.perturbation_sweep(strong_model, dataset.images[0])  # (16, 11, H, W)
    first_row = [torch.as_tensor(ax.images[0].get_array()).float() for ax in figure.axes[:11]]
    for shown, expected in zip(first_row, images[0]):
        assert torch.allclose(shown, expected, atol=1e-6)
    assert not torch.allclose(first_row[0], first_row[-1])  # the offsets really move the digit
    assert figure.axes[10].get_xlabel() == "" and figure.axes[-1].get_xlabel() == "+0.25"
    strongest = perturbation_grid(strong_model, dataset.images[0], strongest=3)
    effects = (images[:, -1] - images[:, 0]).abs().mean(dim=(1, 2))
    rows = [int(ax.get_ylabel().split()[1]) for ax in strongest.axes[::11]]
    assert rows == effects.argsort(descending=True)[:3].tolist()


def test_explorers_leave_the_model_mode_as_found(model, dataset):
    model.train()
    try:
        ex = routing_explorer(model, dataset)
        ex.iterations.value = 2
        perturbation_explorer(model, dataset).sliders[0].value = 0.1
        assert model.training
    finally:
        model.eval()


def test_bad_arguments_are_named(model, dataset):
    with pytest.raises(TypeError, match="model"):
        perturbation_explorer("model", dataset)
    with pytest.raises(TypeError, match="dataset"):
        routing_explorer(model, [1, 2, 3])
    with pytest.raises(ValueError, match="dataset"):
        empty = capsedu.MNISTData(torch.zeros(0, 1, 28, 28), torch.zeros(0, dtype=torch.long), "x")
        perturbation_explorer(model, empty)


def _pixels(png: bytes):
    import io

    import numpy as np
    from PIL import Image

    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(int)


@pytest.mark.tools  # over a second of CPU: the unit tier keeps a margin below its 2.5 s
def test_blitted_frames_equal_a_full_redraw(strong_model, dataset):
    from capsedu.explore.render import figure_png

    ex = routing_explorer(strong_model, dataset)
    full_draws = ex.renderer.full_draws
    for value in (1, 5, 2):
        ex.iterations.value = value
    assert ex.renderer.full_draws == full_draws  # slider moves only blit
    blitted = _pixels(ex.view.value)
    for artist in ex.renderer.artists + ex.renderer.overlays:
        artist.set_animated(False)
    full = _pixels(figure_png(ex.figure))
    assert blitted.shape == full.shape
    assert (abs(blitted - full) > 8).mean() < 0.001
    ex.index.value = 1
    assert ex.renderer.full_draws == full_draws + 1  # a new image redraws the colour scale


def test_snapshot_is_what_the_widget_shows(model, dataset):
    ex = perturbation_explorer(model, dataset)
    ex.sliders[1].value = 0.1
    assert ex.snapshot().data == ex.view.value


def test_every_coupling_map_has_one_colour_scale_and_the_share_axis_fits_the_trace():
    trace = probes.RoutingTrace(torch.rand(3, 10), torch.full((3, 10), 0.1), torch.full((288, 10), 0.1),
                                prediction=3)
    assert share_axis_top(trace) == pytest.approx(0.125)
    norm = coupling_norm()  # 0 blue, 1 white (a fair share), COUPLING_TOP red, in every lesson
    assert (norm.vmin, norm.vcenter, norm.vmax) == (0.0, 1.0, COUPLING_TOP)
