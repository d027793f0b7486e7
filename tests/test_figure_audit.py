r"""coursetools.figure_audit: the colour rules every lesson figure keeps (issue 54, WCAG 1.4.1 and
1.4.3), each rule shown failing on a figure that breaks it and passing once the figure is fixed."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from matplotlib.backend_bases import FigureCanvasBase
from matplotlib.figure import Figure

from capsedu.explore import palette
from coursetools import figure_audit
from coursetools.figure_audit import problems

pytestmark = pytest.mark.tools  # the repository's tools (coursetools), not the package


def axes():
    figure = Figure(figsize=(4, 3))
    return figure, figure.subplots()


def test_a_figure_that_keeps_every_rule_has_no_problems():
    figure, ax = axes()
    ax.plot([0, 1], [0, 1], color=palette.BLUE, label="capsnet")
    ax.plot([0, 1], [1, 0], color=palette.VERMILLION, linestyle="--", label="cnn")
    ax.imshow(np.random.default_rng(0).random((4, 4)), cmap="viridis", extent=(0, 1, 0, 1))
    ax.set_title("a clean figure")
    ax.legend()
    assert problems(figure) == []


def test_two_lines_told_apart_by_colour_alone():
    figure, ax = axes()
    ax.plot([0, 1], [0, 1], color=palette.BLUE, label="capsnet")
    ax.plot([0, 1], [1, 0], color=palette.VERMILLION, label="cnn")
    assert any("'capsnet' and 'cnn' differ only in colour" in p for p in problems(figure))
    ax.lines[1].set_marker("o")
    assert problems(figure) == []


def test_colours_outside_the_palette_and_maps():
    figure, ax = axes()
    ax.plot([0, 1], [0, 1], color="tab:red", label="red")
    assert any("'red' is drawn in #d62728" in p for p in problems(figure))
    figure, ax = axes()
    ax.imshow(np.eye(3), cmap="jet")
    assert any("colour map 'jet'" in p for p in problems(figure))
    ax.images[0].set_cmap("cividis")
    assert problems(figure) == []


def test_bars_need_a_hatch_beside_their_colour():
    figure, ax = axes()
    ax.bar([0, 1], [1, 2], color=palette.BLUE, label="clean")
    ax.bar([0.4, 1.4], [2, 1], color=palette.ORANGE, label="shifted")
    assert any("bars" in p and "hatch" in p for p in problems(figure))
    for bar in ax.containers[1]:
        bar.set_hatch("//")
    assert problems(figure) == []


def test_points_coloured_by_category_need_a_map_or_markers():
    figure, ax = axes()
    ax.scatter([0, 1, 2], [0, 1, 2], c=[palette.BLUE, palette.VERMILLION, palette.BLUE])
    assert any("take 2 colours in one scatter" in p for p in problems(figure))
    figure, ax = axes()
    ax.scatter([0, 1, 2], [0, 1, 2], c=[0.0, 0.5, 1.0], cmap="tab10")
    assert any("colour map 'tab10'" in p for p in problems(figure))


@pytest.mark.parametrize("colour, size, fails", [
    ("0.6", 10, True),    # 2.8:1 on white
    ("0.45", 10, False),  # 4.6:1 (slightly darker than matplotlib's 'grey', 0.5: 4.0:1)
    ("0.55", 20, False),  # 3.3:1 is enough for 18 pt and larger
    ("black", 10, False),
])
def test_text_contrast_on_white(colour, size, fails):
    figure, ax = axes()
    ax.text(0.5, 0.5, "a label", color=colour, fontsize=size)
    assert any("'a label' has contrast" in p for p in problems(figure)) == fails


def test_text_contrast_is_measured_on_what_the_text_sits_on():
    figure, ax = axes()
    ax.imshow(np.zeros((2, 2)), cmap="gray", vmin=0, vmax=1, extent=(0, 1, 0, 1))
    ax.text(0.5, 0.5, "on black", color="white", ha="center", va="center")
    assert problems(figure) == []
    ax.texts[0].set_color("black")
    assert any("'on black' has contrast 1.0:1" in p for p in problems(figure))
    ax.texts[0].set_bbox({"facecolor": "white", "edgecolor": "none"})
    assert problems(figure) == []


def test_the_kernel_extension_logs_each_rendered_figure(tmp_path, monkeypatch):
    log = tmp_path / "figures.jsonl"
    monkeypatch.setattr(FigureCanvasBase, "print_figure", FigureCanvasBase.print_figure)
    monkeypatch.setenv(figure_audit.AUDIT_ENV, str(log))
    figure_audit.load_ipython_extension(None)
    figure, ax = axes()
    canvas = figure.canvas
    ax.text(0.5, 0.5, "faint", color="0.8")
    figure.savefig(tmp_path / "figure.png")
    assert figure.canvas is canvas
    [entry] = [json.loads(line) for line in log.read_text().splitlines()]
    assert "'faint' has contrast 1.6:1" in entry["problems"][0]
    figure.texts.clear()
    ax.texts[0].set_color("black")
    figure.savefig(tmp_path / "figure.png")
    assert len(log.read_text().splitlines()) == 1


def test_texts_that_make_room_in_a_constrained_layout_are_measured_where_they_are():
    figure = Figure(figsize=(3, 3), layout="constrained")
    ax = figure.subplots()
    ax.imshow(np.zeros((2, 2)), cmap="gray", vmin=0, vmax=1)
    ax.set_title("a black title on white, above a black image")
    ax.set_axis_off()
    assert problems(figure) == []
    assert figure.get_layout_engine().__class__.__name__ == "ConstrainedLayoutEngine"


def test_the_packages_figures_keep_the_rules(strong_model, image):
    r"""The figures capsedu draws for the lessons (their lessons' nbval run checks them again)."""
    from capsedu.explore.em import em_figure, em_trace, toy_votes
    from capsedu.explore.figures import perturbation_grid, reconstruction_grid, routing_strip
    from capsedu.explore.graph import routing_graph
    from capsedu.explore.panels import PerturbationFigure
    from capsedu.explore.transform_explorer import TransformFigure, transform_strip
    from capsedu.nets.cnn import BaselineCNN, CNNConfig

    cnn = BaselineCNN(CNNConfig.cpu()).eval()
    images = image.expand(3, 1, 28, 28)
    lengths = torch.tensor([0.1, 0.9, 0.2, 0.7, 0.0, 0.0, 0.0, 0.0, 0.0, 0.3])
    perturbation = PerturbationFigure(10)
    perturbation.update(image[0], image[0], lengths, lengths / 2, label=1, true_label=3, moved=2)
    transform = TransformFigure(10)
    transform.update(image[0], lengths, lengths.flip(0), image[0], true_label=3, described="+30°")
    votes, activations = toy_votes()
    figures = {
        "routing_strip": routing_strip(strong_model, image, label=3, shown=(1, 2)),
        "reconstruction_grid": reconstruction_grid(strong_model, images, torch.tensor([0, 1, 2]), "grid"),
        "perturbation_grid": perturbation_grid(strong_model, image, strongest=2),
        "routing_graph": routing_graph(2),
        "transform_strip": transform_strip(strong_model, cnn, image, 3, angles=[-30, 0, 30]),
        "PerturbationFigure": perturbation.figure,
        "TransformFigure": transform.figure,
        "em_figure": em_figure(em_trace(votes, activations, torch.zeros(3), torch.zeros(3), 2, 1.0),
                               votes, iteration=2),
    }
    assert {name: problems(figure) for name, figure in figures.items()} == dict.fromkeys(figures, [])


@pytest.mark.tools
def test_kernels_started_with_the_audit_log_their_figures(tmp_path, monkeypatch):
    r"""What the nbval plugin and coursetools.execute rely on: a kernel started in notebooks/ under
    audited_kernels' environment loads the extension and logs a figure's problems."""
    import nbformat
    from nbclient import NotebookClient

    for name, value in figure_audit.audited_kernels(tmp_path).items():
        monkeypatch.setenv(name, value)
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "import matplotlib.pyplot as plt\nplt.plot([0, 1], color='tab:red')\nplt.show()")])
    NotebookClient(notebook, kernel_name="python3",
                   resources={"metadata": {"path": str(figure_audit.REPO / "notebooks")}}).execute()
    found = figure_audit.logged_problems(tmp_path / "figures.jsonl")
    assert len(found) == 1 and "#d62728" in found[0], found


def test_error_bar_caps_follow_their_series():
    figure, ax = axes()
    ax.errorbar([0, 1], [0, 1], yerr=0.1, fmt="o-", capsize=3, color=palette.BLUE, label="capsnet")
    ax.errorbar([0, 1], [1, 0], yerr=0.1, fmt="s--", capsize=3, color=palette.VERMILLION, label="cnn")
    assert problems(figure) == []
    cnn_line = ax.containers[1].lines[0]  # the cnn's own line, now styled like the capsnet's
    cnn_line.set_linestyle("-")
    cnn_line.set_marker("o")
    assert any("differ only in colour" in p for p in problems(figure))
