r"""Figures for exploring a trained CapsNet: the static Figure-4 grid and the explorers' panels.

The explorer figures are built once and then *updated in place* (``set_data``, ``set_height``,
``set_text``) - :mod:`capsedu.explore.widgets` re-renders the same figure to PNG after each move, so a
slider never creates a new figure. They use ``matplotlib.figure.Figure`` directly (no pyplot
state), so a notebook shows them once, when asked.

Shape legend:
    I      primary capsules = T * G * G (T types on a G x G grid)
    J      digit capsules, one per class
    D_out  digit capsule dimension (16)
    V      perturbation values per dimension (11: -0.25 ... +0.25)
    H, W   image height and width (28)
"""

from __future__ import annotations

import numpy as np
import torch
from matplotlib.figure import Figure

from capsedu.explore.probes import (
    PERTURBATION_VALUES,
    RoutingTrace,
    couplings_on_grid,
    perturbation_sweep,
)


def _mosaic(tiles: list[list[np.ndarray]], gap: int = 1) -> np.ndarray:
    r"""Tile rows of equally sized 2-D arrays into one array, with NaN gaps between tiles."""
    def join(arrays: list[np.ndarray], axis: int) -> np.ndarray:
        widths = [(0, 0), (0, 0)]
        widths[axis] = (0, gap)
        padded = [np.pad(a, widths, constant_values=np.nan) for a in arrays]
        joined = np.concatenate(padded, axis=axis)
        return joined[:-gap] if axis == 0 else joined[:, :-gap]

    return join([join(row, axis=1) for row in tiles], axis=0)


def perturbation_grid(model, image: torch.Tensor,
                      values: tuple[float, ...] = PERTURBATION_VALUES) -> Figure:
    r"""The paper's Figure 4 for one image: row d decodes the winning capsule with dimension d moved.

    16 rows (dimensions of the predicted digit capsule) x 11 columns (offsets -0.25 ... +0.25,
    step 0.05); the middle column is the unperturbed reconstruction.
    """
    images, label = perturbation_sweep(model, image, values)  # (D_out, V, H, W)
    dim, count, height, width = images.shape
    tiles = images.cpu().numpy()
    mosaic = _mosaic([list(tiles[d]) for d in range(dim)])  # (D_out*(H+1)-1, V*(W+1)-1)
    figure = Figure(figsize=(0.55 * count + 1.2, 0.55 * dim + 1.0), dpi=100, layout="constrained")
    ax = figure.add_subplot()
    ax.imshow(np.ma.masked_invalid(mosaic), cmap="gray", vmin=0, vmax=1, interpolation="nearest")
    ax.set_xticks([(width + 1) * k + width / 2 for k in range(count)], [f"{v:+.2f}" for v in values],
                  rotation=90, fontsize=8)
    ax.set_yticks([(height + 1) * d + height / 2 for d in range(dim)], [f"dim {d}" for d in range(dim)],
                  fontsize=8)
    ax.set_xlabel("offset added to the dimension")
    ax.set_facecolor("white")
    ax.set_title(f"Perturbing each dimension of the class-{label} capsule\n"
                 "(decoder reconstructions, as in Figure 4 of the paper)", fontsize=10)
    return figure


class PerturbationFigure:
    r"""Original | live reconstruction | capsule lengths, updated in place."""

    def __init__(self, num_classes: int, image_size: int = 28) -> None:
        self.figure = Figure(figsize=(9.0, 2.9), dpi=80, layout="constrained")
        ax_in, ax_out, self.ax_bars = self.figure.subplots(1, 3, width_ratios=[1, 1, 1.7])
        blank = np.zeros((image_size, image_size))
        self.original = ax_in.imshow(blank, cmap="gray", vmin=0, vmax=1)
        self.reconstruction = ax_out.imshow(blank, cmap="gray", vmin=0, vmax=1)
        for ax in (ax_in, ax_out):
            ax.set_xticks([]), ax.set_yticks([])
        self.title_in, self.title_out = ax_in.set_title(""), ax_out.set_title("")
        classes = np.arange(num_classes)
        self.bars = self.ax_bars.bar(classes, np.zeros(num_classes), color="tab:gray")
        (self.baseline,) = self.ax_bars.plot(classes, np.zeros(num_classes), "_", color="black",
                                             markersize=14)
        self.ax_bars.set(xticks=classes, ylim=(0, 1.3), xlabel="digit class",
                         ylabel="capsule length ||v||",
                         title="Capsule lengths (black tick: before perturbing)")
        self.artists = [self.original, self.reconstruction, self.title_in, self.title_out,
                        *self.bars, self.baseline]  # what update() changes

    def update(self, original: torch.Tensor, reconstruction: torch.Tensor, lengths: torch.Tensor,
               baseline: torch.Tensor, label: int, true_label: int, moved: int) -> None:
        r"""Show images (H, W), perturbed ``lengths`` (J,) over the unperturbed ``baseline`` (J,)."""
        self.original.set_data(original.cpu().numpy())
        self.reconstruction.set_data(reconstruction.cpu().numpy())
        self.title_in.set_text(f"input (label {true_label})")
        moved_text = "unperturbed" if moved == 0 else f"{moved} dim(s) moved"
        self.title_out.set_text(f"decoded class {label}\n{moved_text}")
        for k, (bar, height) in enumerate(zip(self.bars, lengths.tolist())):
            bar.set_height(height)
            bar.set_color("tab:orange" if k == label else "tab:gray")
        self.baseline.set_ydata(baseline.cpu().numpy())


def coupling_scales(trace: RoutingTrace, num_types: int, num_classes: int) -> tuple[float, float]:
    r"""Colour-scale top and per-type bar top that show the couplings of ``trace`` (its last r).

    The colour scale ends at the 95th percentile of the couplings toward the predicted class
    (a few very strong capsules would otherwise make every other one look alike), the bars at
    1.3 times the largest per-type mean; neither goes below twice the uniform coupling 1/J.
    """
    toward = trace.couplings[:, trace.prediction]  # (I,)
    floor = 2 / num_classes
    colour_top = max(float(toward.quantile(0.95)), floor)
    bar_top = max(1.3 * float(toward.view(num_types, -1).mean(dim=1).max()), floor)
    return colour_top, bar_top


class RoutingFigure:
    r"""Input and prediction | couplings on the primary grid | per-type mean | lengths per iteration."""

    def __init__(self, num_types: int, num_classes: int, max_iterations: int,
                 image_size: int = 28) -> None:
        self.num_types, self.columns = num_types, min(num_types, 8 if num_types > 16 else 4)
        self.figure = Figure(figsize=(9.0, 6.0), dpi=80, layout="constrained")
        (ax_img, self.ax_map), (self.ax_types, self.ax_lines) = self.figure.subplots(2, 2)
        self.input = ax_img.imshow(np.zeros((image_size, image_size)), cmap="gray", vmin=0, vmax=1)
        ax_img.set_xticks([]), ax_img.set_yticks([])
        self.title_img = ax_img.set_title("")
        self.map = self.ax_map.imshow(np.zeros((2, 2)), cmap="viridis", vmin=0, vmax=1,
                                      interpolation="nearest")
        self.ax_map.set_xticks([]), self.ax_map.set_yticks([])
        self.title_map = self.ax_map.set_title("")
        self.figure.colorbar(self.map, ax=self.ax_map, shrink=0.8, extend="max",
                             label="coupling $c_{ij}$ (scale fixed per image)")
        types = np.arange(num_types)
        self.type_bars = self.ax_types.bar(types, np.zeros(num_types), color="tab:green")
        self.uniform = self.ax_types.axhline(1 / num_classes, color="black", linestyle=":")
        self.ax_types.set(ylim=(0, 1), xlabel="primary capsule type", ylabel="mean coupling",
                          xticks=types[::2] if num_types > 8 else types,
                          title="Mean coupling per capsule type (dotted: 1/J)")
        self.lines = [self.ax_lines.plot([], [], marker="o", markersize=3, label=str(k))[0]
                      for k in range(num_classes)]
        self.ax_lines.set(xlim=(0.7, max_iterations + 0.3), ylim=(0, 1), xlabel="routing iterations r",
                          ylabel="capsule length ||v_j||", title="Capsule lengths after r iterations",
                          xticks=range(1, max_iterations + 1))
        self.ax_lines.legend(title="class", fontsize=7, title_fontsize=7, loc="center left",
                             bbox_to_anchor=(1.01, 0.5))
        self.artists = [self.input, self.title_img, self.map, self.title_map, *self.type_bars,
                        self.uniform, *self.lines]  # what update() changes (not the colour scale)

    def update(self, image: torch.Tensor, trace: RoutingTrace, true_label: int,
               scale: float = 1.0, bar_top: float = 1.0) -> None:
        r"""Redraw for one image (H, W) and its routing ``trace`` (R iterations).

        ``scale`` is the top of the coupling colour scale and ``bar_top`` that of the per-type
        bars; keep both fixed while only r changes (:func:`coupling_scales` computes them).
        """
        self.input.set_data(image.cpu().numpy())
        iterations = trace.lengths.shape[0]
        verdict = "correct" if trace.prediction == true_label else "WRONG"
        self.title_img.set_text(f"label {true_label}, predicted {trace.prediction} ({verdict})\n"
                                f"after r = {iterations} iteration(s)")
        grid = couplings_on_grid(trace.couplings, trace.prediction, self.num_types).cpu().numpy()
        rows = [list(grid[start:start + self.columns]) for start in range(0, self.num_types, self.columns)]
        mosaic = _mosaic(rows)  # (rows*(G+1)-1, columns*(G+1)-1)
        self.map.set_data(np.ma.masked_invalid(mosaic))
        self.map.set_clim(0, scale)
        self.ax_types.set_ylim(0, bar_top)
        self.map.set_extent((-0.5, mosaic.shape[1] - 0.5, mosaic.shape[0] - 0.5, -0.5))
        self.title_map.set_text(f"Couplings toward class {trace.prediction}\n"
                                f"({self.num_types} types, each on its {grid.shape[1]}x{grid.shape[2]} grid)")
        for bar, height in zip(self.type_bars, grid.reshape(self.num_types, -1).mean(axis=1)):
            bar.set_height(float(height))
        steps = np.arange(1, iterations + 1)
        for k, line in enumerate(self.lines):
            line.set_data(steps, trace.lengths[:, k].cpu().numpy())
            line.set_linewidth(3 if k == trace.prediction else 1)
