"""capsedu.explore.frames: the explorers' static forms - frames computed in advance, chosen by
sliders linked in the browser (the book's Chromium test moves them on the built site)."""

import io

import numpy as np
import pytest
import torch
from PIL import Image

import capsedu
from capsedu.explore.em import em_explorer, em_trace, toy_votes
from capsedu.explore.frames import CSS_CLASS, Control, FrameExplorer, compress_png, sweep
from capsedu.explore.render import figure_png
from capsedu.explore.widgets import perturbation_explorer, routing_explorer

pytestmark = pytest.mark.unit

widgets = pytest.importorskip("ipywidgets")


@pytest.fixture(scope="module")
def dataset():
    generator = torch.Generator().manual_seed(2)
    images = torch.rand(3, 1, 28, 28, generator=generator)
    return capsedu.MNISTData(images, torch.tensor([0, 1, 2]), "random test images")


def _png(colour: str, size: int = 24) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (size, size), colour).save(buffer, format="png")
    return buffer.getvalue()




def test_compress_png_keeps_the_picture_in_fewer_bytes(strong_model, dataset):
    raw = routing_explorer(strong_model, dataset).view.value
    small = compress_png(raw, colours=64)
    assert len(small) < len(raw)
    before, after = (torch.tensor(np.asarray(Image.open(io.BytesIO(png)).convert("RGB")),
                                  dtype=torch.float32) for png in (raw, small))
    assert before.shape == after.shape and (before - after).abs().mean() < 3.0  # of 255
    with pytest.raises(TypeError, match="png must be"):
        compress_png(b"GIF89a")
    with pytest.raises(ValueError, match="colours must be in 2..256"):
        compress_png(raw, colours=1)


def test_each_inner_stack_and_the_outer_stack_follow_their_slider_in_the_browser():
    frames = [[_png(c) for c in ("red", "green", "blue")], [_png(c) for c in ("black", "white", "red")]]
    explorer = FrameExplorer(frames, Control("k", ("a", "b", "c"), start=1), Control("row", ("0", "1")),
                             note="two rows")
    outer_slider, inner_slider = explorer.sliders
    pairs = sorted((id(link.source[0]), id(link.target[0])) for link in explorer.links)
    assert pairs == sorted([(id(inner_slider), id(stack)) for stack in explorer.inner_stacks]
                           + [(id(outer_slider), id(explorer.view))])
    assert all(type(link).__name__ == "Link" and link.source[1] == "index"
               and link.target[1] == "selected_index" for link in explorer.links)
    assert [s.selected_index for s in explorer.inner_stacks] == [1, 1]
    assert inner_slider.index == 1 and inner_slider.options == ("a", "b", "c")
    assert explorer.frame_count == 6 and explorer.unique_frames == 5  # the two reds share one Image
    assert explorer.inner_stacks[0].children[0] is explorer.inner_stacks[1].children[2]
    assert CSS_CLASS in explorer.widget._dom_classes
    assert len({id(image.layout) for stack in explorer.inner_stacks for image in stack.children}) == 1


def test_every_frame_says_what_it_shows_and_where_the_sliders_are():
    import ipywidgets

    frames = [[_png(c) for c in ("red", "green", "blue")], [_png(c) for c in ("black", "white", "red")]]
    def images() -> set[str]:
        return {key for key, w in ipywidgets.Widget.widgets.items() if isinstance(w, ipywidgets.Image)}

    before = images()
    explorer = FrameExplorer(frames, Control("k", ("a", "b", "c")), Control("row", ("0", "1")),
                             alt="Coloured squares.")
    assert len(images() - before) == 5, "one Image per distinct frame (every widget is saved with the page)"
    assert [[image.tooltip for image in stack.children] for stack in explorer.inner_stacks] == [
        ["Coloured squares; row 0, k a.", "Coloured squares; row 0, k b.", "Coloured squares; row 0, k c."],
        ["Coloured squares; row 1, k a.", "Coloured squares; row 1, k b.", "Coloured squares; row 0, k a."]]
    single = FrameExplorer([frames[0]], Control("iterations r", ("1", "2", "3")))
    assert single.inner_stacks[0].children[2].tooltip == "Explorer; iterations r 3."


@pytest.mark.tools  # renders every frame of every explorer: about 6 s of CPU, past the unit tier's 2 s
def test_the_explorers_frames_say_what_they_show(strong_model, dataset):
    for frames in (routing_explorer(strong_model, dataset).frames(), perturbation_explorer(strong_model, dataset).frames()):
        tooltips = [image.tooltip for stack in frames.inner_stacks for image in stack.children]
        assert all(len(text.split()) >= 20 and "image 0" in text for text in tooltips), tooltips[:2]


def test_a_frame_grid_of_the_wrong_shape_is_named():
    with pytest.raises(ValueError, match=r"frames must be 2 row\(s\) of 3 PNG frames"):
        FrameExplorer([[_png("red")] * 3], Control("k", ("a", "b", "c")), Control("row", ("0", "1")))
    with pytest.raises(ValueError, match="start must be in 0..2"):
        Control("k", ("a", "b", "c"), start=3)


@pytest.mark.tools  # over a second of CPU: the unit tier keeps a margin below its 2.5 s
def test_routing_frames_are_the_live_pictures_and_leave_the_explorer_as_found(strong_model, dataset):
    live = routing_explorer(strong_model, dataset, index=1)
    live.iterations.value = 2
    frames = live.frames(colours=256)
    assert live.iterations.value == 2 and live.index.value == 1  # set back where it was
    assert frames.sliders[0].options == tuple(str(r) for r in range(1, 8))
    assert frames.sliders[0].index == 1  # opens where the live explorer was
    pictures = [image.value for image in frames.inner_stacks[0].children]
    assert len(set(pictures)) == 7  # every r draws a different picture
    live.iterations.value = 5
    assert pictures[4] == compress_png(live.view.value, colours=256)
    with pytest.raises(ValueError, match="has no control 'iteration'"):
        sweep(live, "iteration", [1, 2])


@pytest.mark.tools  # renders 16 x 11 frames: about 6 s of CPU, past the unit tier's 2 s
def test_perturbation_frames_move_one_dimension_at_a_time(strong_model, dataset):
    live = perturbation_explorer(strong_model, dataset)
    live.sliders[3].value = 0.1
    frames = live.frames()
    assert [s.value for s in live.sliders] == [0.0] * 3 + [0.1] + [0.0] * 12  # set back
    dimension, offset = frames.sliders
    assert dimension.options == tuple(str(d) for d in range(16))
    assert offset.options[0] == "-0.25" and offset.options[5] == "+0.00" and offset.options[-1] == "+0.25"
    assert offset.index == 10 and frames.frame_count == 16 * 11  # opens at +0.25: "dimension" changes it
    zero = {id(stack.children[5]) for stack in frames.inner_stacks}
    assert len(zero) == 1  # offset 0 is the same picture for every dimension: one shared Image
    live_size = Image.open(io.BytesIO(live.view.value)).size  # the live view is back at its dpi
    assert live.figure.dpi == 80 and live_size == Image.open(io.BytesIO(figure_png(live.figure))).size
    live.figure.set_dpi(64)  # the frames' dpi
    live.renderer.invalidate()
    live.reset()
    live.sliders[7].value = -0.25
    assert frames.inner_stacks[7].children[0].value == compress_png(live.view.value, 64, "fastoctree")
    with pytest.raises(ValueError, match="offsets must be >= 2"):
        live.frames(offsets=1)
    with pytest.raises(ValueError, match="method must be one of"):
        compress_png(live.view.value, method="kmeans")


def test_em_frames_follow_the_iterations():
    votes, activations = toy_votes(seed=0)
    zeros = torch.zeros(3)
    live = em_explorer(em_trace(votes, activations, zeros, zeros, 4, 0.1), votes, iteration=3)
    frames = live.frames()
    assert frames.sliders[0].index == 2 and live.iteration.value == 3
    assert len({image.value for image in frames.inner_stacks[0].children}) == 4


@pytest.mark.tools  # over a second of CPU: the unit tier keeps a margin below its 2.5 s
def test_a_frame_is_a_valid_png_of_the_figure(strong_model, dataset):
    live = routing_explorer(strong_model, dataset)
    frame = live.frames().inner_stacks[0].children[0].value
    assert Image.open(io.BytesIO(frame)).size == Image.open(io.BytesIO(figure_png(live.figure))).size
