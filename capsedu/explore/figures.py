r"""Static figures for looking inside a trained CapsNet, shared by the lessons.

* :func:`image_rows` - rows of digits with a name on the left (inputs, reconstructions, ...);
* :func:`reconstruction_grid` - test digits, "true -> predicted" and what the decoder redraws;
* :func:`perturbation_grid` - the paper's Figure 4: one capsule dimension moved per row;
* :func:`routing_strip` - coupling maps for several routing iterations, vote shares and lengths.

Couplings are drawn as :math:`J\,c_{ij}` ("times a fair share"): 1 is the uniform 1/J. Every
coupling map of the course uses one colour scale (:func:`coupling_norm`): 0 blue, 1 white,
:data:`COUPLING_TOP` = 4 red (larger values, rare, in the top colour - the colour bar's arrow), so
that maps compare across figures, explorers and lessons.
Figures are ``matplotlib.figure.Figure`` objects (no pyplot state): a notebook shows one when it
is a cell's last value.

Shape legend:
    N      images;  H, W  image height and width (28)
    I      primary capsules = T * G * G (T types on a G x G grid);  J digit capsules
    D_out  digit capsule dimension (16);  V perturbation values per dimension (11)
"""

from __future__ import annotations

import numpy as np
import torch
from matplotlib.colors import TwoSlopeNorm
from matplotlib.figure import Figure

from capsedu.explore.palette import BLUE, TEXT_VERMILLION, VERMILLION
from capsedu.explore.probes import (
    PERTURBATION_VALUES,
    coupling_map,
    encode_image,
    perturbation_sweep,
    routing_trace,
)
from capsedu.nets.capsnet import CapsNet, require_capsnet
from capsedu.training.modes import eval_mode

# A class's role in a figure (the true label, a wrong prediction, the others) - its colour
# (palette.py) and a second clue: the line's style and marker, the bar's hatch.
TRUE_COLOUR, PREDICTED_COLOUR, OTHER_COLOUR = VERMILLION, BLUE, "0.65"
CLASS_LINES = {"true": {"color": TRUE_COLOUR, "ls": "-", "marker": "o", "lw": 2.5, "zorder": 3},
               "predicted": {"color": PREDICTED_COLOUR, "ls": "--", "marker": "s", "lw": 2.5, "zorder": 3},
               "other": {"color": OTHER_COLOUR, "ls": "-", "marker": "", "lw": 1, "zorder": 1}}
CLASS_HATCHES = {"true": "//", "predicted": "..", "other": ""}
WRONG_TEXT = TEXT_VERMILLION  # a wrong prediction's title (5.5:1 on white)
COUPLING_CMAP = "RdBu_r"  # ColorBrewer's red-blue: safe for the common colour-vision deficiencies


COUPLING_TOP = 4.0  # J c at the red end of every coupling map's colour scale


def coupling_norm() -> TwoSlopeNorm:
    r"""The one colour scale of :math:`J c_{ij}`: 0 blue, 1 (a fair share) white, 4 red."""
    return TwoSlopeNorm(vmin=0.0, vcenter=1.0, vmax=COUPLING_TOP)


def class_role(k: int, true_label: int, prediction: int) -> str:
    r"""``"true"`` for the true class, ``"predicted"`` for a different predicted one, else ``"other"``."""
    return "true" if k == true_label else "predicted" if k == prediction else "other"


def grid_extent(model: CapsNet) -> tuple[float, float, float, float]:
    r"""Pixel extent of the primary grid when each cell sits at the centre of its receptive field."""
    cfg = model.config
    first = (cfg.conv1_kernel + cfg.primary_kernel - 2) / 2 + 0.5  # centre of grid cell 0
    half, step = cfg.primary_stride / 2, cfg.primary_stride
    low, high = first - half, first + step * (cfg.primary_grid - 1) + half
    return low, high, high, low


def image_rows(rows: dict[str, torch.Tensor], *, title: str = "",
               column_titles: list[str] | None = None, thumb: float = 1.1) -> Figure:
    r"""One row of images (N, 1, H, W) per entry of ``rows``, the row's name on its left."""
    columns = max(len(images) for images in rows.values())
    figure = Figure(figsize=(thumb * columns + 1.2, thumb * len(rows) + 0.6), layout="constrained")
    axes = figure.subplots(len(rows), columns, squeeze=False)
    for row, (name, images) in zip(axes, rows.items()):
        for ax, image in zip(row, images):
            ax.imshow(image.detach().cpu().squeeze(0).numpy(), cmap="gray", vmin=0, vmax=1)
        for ax in row:
            ax.set_xticks([])
            ax.set_yticks([])
            ax.spines[:].set_visible(False)
        row[0].set_ylabel(name, rotation=0, ha="right", va="center", fontsize=10)
    for ax, text in zip(axes[0], column_titles or []):
        ax.set_title(text, fontsize=9)
    if title:
        figure.suptitle(title)
    return figure


@torch.no_grad()
def reconstruction_grid(model: CapsNet, images: torch.Tensor, labels: torch.Tensor, title: str,
                        columns: int = 10) -> Figure:
    r"""Inputs (N, 1, H, W) with "true -> predicted" above (dark vermillion when wrong) and, below
    each row of inputs, the test-time reconstructions (decoder masked by the longest capsule)."""
    with eval_mode(require_capsnet(model)):
        out = model(images)  # masked by the longest capsule
    predictions = out.lengths.argmax(dim=1)  # (N,)
    rows = -(-len(images) // columns)
    figure = Figure(figsize=(1.05 * columns + 0.9, 2.35 * rows + 0.5), layout="constrained")
    axes = figure.subplots(2 * rows, columns, squeeze=False)
    for ax in axes.flat:
        ax.set_axis_off()
    for k, (image, recon) in enumerate(zip(images, out.reconstruction)):
        top, bottom = axes[2 * (k // columns), k % columns], axes[2 * (k // columns) + 1, k % columns]
        top.imshow(image[0].cpu().numpy(), cmap="gray", vmin=0, vmax=1)
        bottom.imshow(recon[0].cpu().numpy(), cmap="gray", vmin=0, vmax=1)
        wrong = int(predictions[k]) != int(labels[k])
        top.set_title(f"{int(labels[k])} → {int(predictions[k])}", fontsize=10,
                      color=WRONG_TEXT if wrong else "black")
    for row in range(rows):
        axes[2 * row, 0].text(-4, 14, "input", ha="right", va="center", fontsize=9)
        axes[2 * row + 1, 0].text(-4, 14, "redrawn", ha="right", va="center", fontsize=9)
    figure.suptitle(title)
    return figure


def perturbation_grid(model: CapsNet, image: torch.Tensor, values: tuple[float, ...] = PERTURBATION_VALUES,
                      *, strongest: int | None = None) -> Figure:
    r"""The paper's Figure 4 for one image: row d decodes the winning capsule with dimension d moved.

    Columns are the offsets (-0.25 ... +0.25 in steps of 0.05); the middle column is the plain
    reconstruction. Each row is labelled with its effect, the mean absolute pixel change between
    the two extreme columns. ``strongest=k`` keeps the k dimensions with the largest effect,
    strongest first (larger thumbnails); by default all 16 rows, in dimension order.
    """
    images, label = perturbation_sweep(model, image, values)  # (D_out, V, H, W)
    effects = (images[:, -1] - images[:, 0]).abs().mean(dim=(1, 2))  # (D_out,)
    dims = (effects.argsort(descending=True)[:strongest] if strongest else
            torch.arange(images.shape[0])).tolist()
    thumb = 0.62 if len(dims) > 8 else 0.85
    figure = Figure(figsize=(thumb * len(values) + 1.9, thumb * len(dims) + 1.2), layout="constrained")
    axes = figure.subplots(len(dims), len(values), squeeze=False)
    for row, d in zip(axes, dims):
        for ax, picture in zip(row, images[d].cpu().numpy()):
            ax.imshow(picture, cmap="gray", vmin=0, vmax=1)
            ax.set_xticks([])
            ax.set_yticks([])
        row[0].set_ylabel(f"dim {d}\n({float(effects[d]):.3f})", rotation=0, ha="right",
                          va="center", fontsize=9)
    for ax, value in zip(axes[-1], values):
        ax.set_xlabel(f"{value:+.2f}", fontsize=8, rotation=90)
    which = f"the {len(dims)} strongest dimensions" if strongest else "each dimension"
    figure.suptitle(f"Moving {which} of the class-{label} capsule, decoded (as Figure 4 of the "
                    "paper)\nleft: dimension (mean |pixel change| from -0.25 to +0.25); "
                    "bottom: offset added", fontsize=10)
    return figure


def draw_coupling_map(ax, model: CapsNet, image: torch.Tensor, values: torch.Tensor,
                      norm: TwoSlopeNorm):
    r"""A (G, G) map of :math:`J c` over the digit, with the digit's outline; returns the image artist."""
    picture = image.detach().cpu().reshape(image.shape[-2:]).numpy()  # (H, W)
    ax.imshow(picture, cmap="gray_r", alpha=0.25, extent=(0, picture.shape[1], picture.shape[0], 0))
    heat = ax.imshow(values.cpu().numpy(), cmap=COUPLING_CMAP, norm=norm, extent=grid_extent(model), alpha=0.9)
    centres = np.arange(picture.shape[0]) + 0.5
    ax.contour(centres, centres, picture, levels=[0.5], colors="black", linewidths=1.0)
    ax.set(xlim=(3, picture.shape[1] - 3), ylim=(picture.shape[0] - 3, 3))
    ax.set_axis_off()
    return heat


def routing_strip(model: CapsNet, image: torch.Tensor, label: int,
                  shown: tuple[int, ...] = (1, 2, 3, 5, 7)) -> Figure:
    r"""Routing one digit with r = 1..max(shown): coupling maps toward the predicted class for
    each listed r (top), the vote share and capsule length of every class against r (bottom)."""
    encoded = encode_image(model, image)
    trace = routing_trace(encoded.u_hat, max(shown), encoded.u)
    cfg = model.config
    maps = {r: cfg.num_classes * coupling_map(routing_trace(encoded.u_hat, r, encoded.u).couplings,
                                              encoded.u, int(trace.lengths[r - 1].argmax()),
                                              cfg.primary_types) for r in shown}
    norm = coupling_norm()
    figure = Figure(figsize=(2.3 * len(shown) + 0.8, 6.2), layout="constrained")
    top, bottom = figure.subfigures(2, 1, height_ratios=[1, 1.05])
    for ax, r in zip(top.subplots(1, len(shown)), shown):
        heat = draw_coupling_map(ax, model, image, maps[r], norm)
        ax.set_title(f"r = {r}: toward {int(trace.lengths[r - 1].argmax())}", fontsize=10)
    top.colorbar(heat, ax=top.axes, shrink=0.85, extend="max", label=r"$J\,c_{ij}$ (1 = fair share)")
    ax_share, ax_len = bottom.subplots(1, 2)
    steps = np.arange(1, max(shown) + 1)
    for k in range(cfg.num_classes):
        style = ({**CLASS_LINES["true"], "label": f"class {k} (true label)"} if k == label
                 else CLASS_LINES["other"])
        ax_share.plot(steps, trace.shares[:, k].cpu().numpy(), ms=4, **style)
        ax_len.plot(steps, trace.lengths[:, k].cpu().numpy(), ms=4, **style)
    ax_share.axhline(1 / cfg.num_classes, color="black", ls=":", lw=1, label="uniform 1/J")
    ax_share.set(xlabel="routing iterations r", ylabel="share of the votes", xticks=steps,
                 title="vote share per class (grey: other classes)")
    ax_len.set(xlabel="routing iterations r", ylabel=r"capsule length $\|\mathbf{v}_j\|$",
               xticks=steps, ylim=(0, 1), title="capsule length per class")
    ax_share.legend(loc="upper left", fontsize=8)
    ax_len.legend(loc="center right", fontsize=8)
    return figure
