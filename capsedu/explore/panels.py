r"""The explorers' figures, built once and then updated in place.

:mod:`capsedu.explore.widgets` renders them to PNG after every move of a control with
:class:`~capsedu.explore.render.BlitRenderer`: ``artists`` lists what an update changes, and
everything else (axes, labels, legends, colour bars, the digit's outline) is drawn once per
image. After :meth:`RoutingFigure.show_image` the renderer must redraw that background.

Shape legend:
    I      primary capsules = T * G * G (T types on a G x G grid)
    J      digit capsules, one per class
    r      routing iterations shown
    H, W   image height and width (28)
"""

from __future__ import annotations

import numpy as np
import torch
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from capsedu.explore.figures import (
    CLASS_HATCHES,
    CLASS_LINES,
    COUPLING_CMAP,
    OTHER_COLOUR,
    class_role,
    coupling_norm,
)
from capsedu.explore.probes import RoutingTrace, coupling_map, couplings_on_grid


def mosaic(tiles: list[list[np.ndarray]], gap: int = 2) -> np.ndarray:
    r"""Tile rows of equally sized 2-D arrays into one array, with NaN gaps between tiles."""
    def join(arrays: list[np.ndarray], axis: int) -> np.ndarray:
        widths = [(0, 0), (0, 0)]
        widths[axis] = (0, gap)
        joined = np.concatenate([np.pad(a, widths, constant_values=np.nan) for a in arrays], axis=axis)
        return joined[:-gap] if axis == 0 else joined[:, :-gap]

    return join([join(row, axis=1) for row in tiles], axis=0)


def type_tiles(maps: np.ndarray, columns: int) -> np.ndarray:
    r"""Per-type maps (T, G, G) as one mosaic, ``columns`` tiles a row; empty tiles are NaN."""
    count, side, _ = maps.shape
    rows = -(-count // columns)
    padded = np.full((rows * columns, side, side), np.nan)
    padded[:count] = maps
    return mosaic([list(padded[r * columns:(r + 1) * columns]) for r in range(rows)])


def class_roles(num_classes: int, true_label: int, prediction: int) -> list[str]:
    r"""Each class's role (:func:`~capsedu.explore.figures.class_role`): true, predicted, other."""
    return [class_role(k, true_label, prediction) for k in range(num_classes)]


def paint_bars(bars, heights: list[float], roles: list[str]) -> None:
    r"""Each bar's height, and its role's colour and hatch (hatched in black, edged in white)."""
    for bar, height, role in zip(bars, heights, roles):
        bar.set_height(height)
        bar.set_facecolor(CLASS_LINES[role]["color"])
        bar.set_hatch(CLASS_HATCHES[role])
        bar.set_edgecolor("white")
        bar.set_hatchcolor("black")


class PerturbationFigure:
    r"""Original | live reconstruction | capsule lengths, updated in place."""

    def __init__(self, num_classes: int, image_size: int = 28) -> None:
        self.figure = Figure(figsize=(9.6, 3.2), dpi=80, layout="constrained")
        ax_in, ax_out, self.ax_bars = self.figure.subplots(1, 3, width_ratios=[1, 1, 1.7])
        blank = np.zeros((image_size, image_size))
        self.original = ax_in.imshow(blank, cmap="gray", vmin=0, vmax=1)
        self.reconstruction = ax_out.imshow(blank, cmap="gray", vmin=0, vmax=1)
        for ax in (ax_in, ax_out):
            ax.set_xticks([]), ax.set_yticks([])
        self.title_in, self.title_out = ax_in.set_title(""), ax_out.set_title("")
        classes = np.arange(num_classes)
        self.bars = self.ax_bars.bar(classes, np.zeros(num_classes), color=OTHER_COLOUR)
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
        self.title_out.set_text(f"decoded as class {label}\n{moved_text}")
        paint_bars(self.bars, lengths.tolist(), class_roles(len(self.bars), true_label, label))
        self.baseline.set_ydata(baseline.cpu().numpy())


class RoutingFigure:
    r"""Input | J c over the digit | vote shares  /  lengths per iteration | per-type coupling maps."""

    def __init__(self, num_types: int, grid: int, num_classes: int, max_iterations: int,
                 extent: tuple[float, float, float, float], image_size: int = 28) -> None:
        self.num_types, self.num_classes, self.extent = num_types, num_classes, extent
        self.columns = min(num_types, 4 if num_types <= 16 else 8)
        self.figure = Figure(figsize=(11.5, 7.4), dpi=80, layout="constrained")
        layout = self.figure.add_gridspec(2, 3, width_ratios=[1, 1.1, 1.5], height_ratios=[1, 1.05])
        ax_img, self.ax_map, self.ax_shares = (self.figure.add_subplot(layout[0, k]) for k in range(3))
        self.ax_lines = self.figure.add_subplot(layout[1, 0])
        self.ax_types = self.figure.add_subplot(layout[1, 1:])
        blank = np.zeros((image_size, image_size))
        self.input = ax_img.imshow(blank, cmap="gray", vmin=0, vmax=1)
        ax_img.set_xticks([]), ax_img.set_yticks([])
        self.title_img = ax_img.set_title("")
        self.backdrop = self.ax_map.imshow(blank, cmap="gray_r", alpha=0.25, vmin=0, vmax=1,
                                           extent=(0, image_size, image_size, 0))
        self.map = self.ax_map.imshow(np.ones((2, 2)), cmap=COUPLING_CMAP, norm=coupling_norm(),
                                      extent=extent, alpha=0.9)
        self.ink = self.ax_map.imshow(np.zeros((image_size, image_size, 4)),
                                      extent=(0, image_size, image_size, 0))  # the digit, on top
        self.ax_map.set(xlim=(3, image_size - 3), ylim=(image_size - 3, 3))
        self.ax_map.set_axis_off()
        self.title_map = self.ax_map.set_title("")
        self._build_shares_and_lines(max_iterations)
        self.types = self._build_types(grid)
        self.title_types = self.ax_types.set_title("")
        self.colorbar = self.figure.colorbar(self.types, ax=[self.ax_map, self.ax_types], shrink=0.7,
                                             extend="max", label=r"$J\,c_{ij}$: 1 = a fair share (1/J)")
        self.artists = [self.input, self.title_img, self.map, self.ink, self.title_map, *self.bars,
                        self.uniform, *self.lines, self.types, self.title_types]  # redrawn each frame

    def _build_shares_and_lines(self, max_iterations: int) -> None:
        classes = np.arange(self.num_classes)
        self.bars = self.ax_shares.bar(classes, np.zeros(self.num_classes), color=OTHER_COLOUR)
        self.uniform = self.ax_shares.axhline(1 / self.num_classes, color="black", ls=":", lw=1)
        self.ax_shares.set(xticks=classes, xlabel="digit class j",
                           ylabel="share of the votes (weighted by ||u_i||)",
                           title="Where the votes go (dotted: uniform 1/J)")
        self.lines = [self.ax_lines.plot([], [], ms=4)[0] for _ in range(self.num_classes)]
        self.ax_lines.set(xlim=(0.7, max_iterations + 0.3), ylim=(0, 1), xticks=range(1, max_iterations + 1),
                          xlabel="routing iterations r", ylabel="capsule length ||v_j||",
                          title="Capsule lengths after 1..r iterations")
        handles = [Line2D([], [], ms=4, **CLASS_LINES[role]) for role in ("true", "predicted", "other")]
        self.ax_lines.legend(handles, ["true label", "predicted, if not the label", "other classes"],
                             fontsize=9, loc="center right")

    def _build_types(self, grid: int):
        r"""The mosaic of per-type maps, T tiles of G x G in rows of 8, each labelled "type t"."""
        tiles = type_tiles(np.ones((self.num_types, grid, grid)), self.columns)
        image = self.ax_types.imshow(np.ma.masked_invalid(tiles), cmap=COUPLING_CMAP, norm=coupling_norm(),
                                     interpolation="nearest",
                                     extent=(-0.5, tiles.shape[1] - 0.5, tiles.shape[0] - 0.5, -0.5))
        for t in range(self.num_types):
            row, column = divmod(t, self.columns)
            self.ax_types.text(column * (grid + 2) + (grid - 1) / 2, row * (grid + 2) - 0.65,
                               f"type {t}", ha="center", va="bottom", fontsize=10)
        self.ax_types.set(xlim=(-0.5, tiles.shape[1] - 0.5), ylim=(tiles.shape[0] - 0.5, -1.6))
        self.ax_types.set_xticks([]), self.ax_types.set_yticks([])
        self.ax_types.spines[:].set_visible(False)
        return image

    def show_image(self, image: torch.Tensor, share_top: float) -> None:
        r"""Parts that change only with the image (H, W): the digit and the share axis.

        The caller's renderer must then redraw the background.
        """
        picture = image.cpu().numpy()
        self.input.set_data(picture)
        self.backdrop.set_data(picture)
        ink = np.zeros((*picture.shape, 4))  # black strokes, half transparent, over the map
        ink[..., 3] = 0.45 * (picture > 0.5)
        self.ink.set_data(ink)
        self.ax_shares.set_ylim(0, share_top)

    def update(self, trace: RoutingTrace, u: torch.Tensor, true_label: int) -> None:
        r"""Redraw for the routing ``trace`` (r iterations) of an image with primary capsules ``u``."""
        iterations, prediction = trace.lengths.shape[0], trace.prediction
        verdict = "correct" if prediction == true_label else "WRONG"
        self.title_img.set_text(f"label {true_label}, predicted {prediction} ({verdict})\n"
                                f"after r = {iterations} iteration(s)")
        J = self.num_classes
        self.map.set_data((J * coupling_map(trace.couplings, u, prediction, self.num_types)).cpu().numpy())
        self.title_map.set_text(f"$J\\,c$ toward class {prediction}, all types\n(each weighted by ||u_i||)")
        roles = class_roles(J, true_label, prediction)
        paint_bars(self.bars, trace.shares[-1].tolist(), roles)
        steps = np.arange(1, iterations + 1)
        for k, (line, role) in enumerate(zip(self.lines, roles)):
            line.set_data(steps, trace.lengths[:, k].cpu().numpy())
            line.set(**CLASS_LINES[role])
        grid = (J * couplings_on_grid(trace.couplings, prediction, self.num_types)).cpu().numpy()
        self.types.set_data(np.ma.masked_invalid(type_tiles(grid, self.columns)))
        self.title_types.set_text(f"$J\\,c$ toward class {prediction}, one {grid.shape[1]}x"
                                  f"{grid.shape[2]} map per capsule type")
