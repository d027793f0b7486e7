r"""The interactive explorers of lessons 03 and 07 (ipywidgets, imported inside the classes).

* :class:`PerturbationExplorer` - 16 sliders add -0.25 ... +0.25 to the dimensions of the
  winning digit capsule; the decoder's reconstruction and the capsule lengths follow (Section 5.1
  and Figure 4 of the paper).
* :class:`RoutingExplorer` - re-run dynamic routing (Procedure 1) with r = 1..7 iterations and
  watch the coupling coefficients, the vote shares and the capsule lengths.

Each explorer keeps ONE figure (:mod:`capsedu.explore.panels`) and one ``ipywidgets.Image``: a
move updates the figure's artists in place and swaps the PNG, so nothing flickers and no figure
piles up. What does not depend on a control is computed once per image (the digit capsules for
the perturbation explorer; :math:`\mathbf u` and :math:`\hat{\mathbf u}_{j|i}` for the routing
explorer). Every attribute is set in ``__init__``; the model's train/eval mode is left as found.
Explorers expose their controls and update methods, so tests (and curious learners) can drive
them without a browser; ``snapshot()`` returns what the widget shows, for static copies.

Shape legend:
    N      images in the dataset
    I      primary capsules
    J      digit capsules
    D_out  digit capsule dimension (16)
    H      height
    W      width
"""

from __future__ import annotations

from typing import Any

import torch

from capsedu._validate import require_int
from capsedu.explore.figures import grid_extent
from capsedu.explore.frames import Control, FrameExplorer, compress_png, sweep
from capsedu.explore.panels import PerturbationFigure, RoutingFigure
from capsedu.explore.probes import (
    Encoded,
    RoutingTrace,
    encode_image,
    perturbed_reconstructions,
    require_image,
    routing_trace,
)
from capsedu.explore.render import PngView
from capsedu.nets.capsnet import CapsNet, require_capsnet

__all__ = ["PerturbationExplorer", "RoutingExplorer", "perturbation_explorer", "routing_explorer"]


def require_dataset(dataset: object) -> Any:
    r"""Require ``.images`` (N, 1, H, W) and ``.labels`` (N,) tensors with N >= 1."""
    images, labels = getattr(dataset, "images", None), getattr(dataset, "labels", None)
    if not isinstance(images, torch.Tensor) or not isinstance(labels, torch.Tensor):
        raise TypeError("dataset must have .images (N, 1, H, W) and .labels (N,) tensors, like "
                        f"capsedu.load_mnist(...); got {type(dataset).__name__}")
    if images.dim() != 4 or len(images) == 0 or len(images) != len(labels):
        raise ValueError(f"dataset.images must be (N, 1, H, W) with N >= 1 and one label each, got "
                         f"{tuple(images.shape)} and {tuple(labels.shape)}")
    return dataset


class _Explorer(PngView):
    r"""Shared parts: the model and data, the image-index box, and the view (:class:`PngView`)."""

    def __init__(self, model: CapsNet, dataset: Any, index: int, panel: Any) -> None:
        import ipywidgets as widgets

        super().__init__(panel)
        self.model, self.dataset = require_capsnet(model), require_dataset(dataset)
        last = len(dataset.labels) - 1
        self.index = widgets.BoundedIntText(value=min(max(index, 0), last), min=0, max=last,
                                            description="image", layout=widgets.Layout(width="180px"))

    def image(self) -> torch.Tensor:
        return require_image(self.dataset.images[self.index.value])[0, 0]  # (H, W)

    def true_label(self) -> int:
        return int(self.dataset.labels[self.index.value])


class PerturbationExplorer(_Explorer):
    r"""Controls: ``index``, ``sliders`` (one per capsule dimension), ``reset_button``; view: ``view``."""

    def __init__(self, model: CapsNet, dataset: Any, index: int = 0, step: float = 0.05,
                 limit: float = 0.25) -> None:
        import ipywidgets as widgets

        cfg = require_capsnet(model).config
        super().__init__(model, dataset, index, PerturbationFigure(cfg.num_classes, cfg.image_size))
        self.sliders = [widgets.FloatSlider(value=0.0, min=-limit, max=limit, step=step,
                                            description=f"dim {d}", continuous_update=True,
                                            readout_format="+.2f", layout=widgets.Layout(width="300px"))
                        for d in range(cfg.digit_dim)]
        self.reset_button = widgets.Button(description="reset", icon="undo")
        self.encoded: Encoded | None = None  # the chosen image's capsules, set by select_image
        self.reconstruction: torch.Tensor | None = None  # (H, W) what the view shows now
        self.lengths: torch.Tensor | None = None  # (J,) the perturbed capsule lengths
        self._hold = False  # True while reset() moves all sliders: one redraw, not sixteen
        self.select_image()
        self.index.observe(lambda _: self.select_image(), names="value")
        for slider in self.sliders:
            slider.observe(lambda _: self.update(), names="value")
        self.reset_button.on_click(lambda _: self.reset())
        columns = [widgets.VBox(self.sliders[k::2]) for k in range(2)]
        self.widget = widgets.VBox([widgets.HBox([self.index, self.reset_button]),
                                    self.view, widgets.HBox(columns)])

    def offsets(self) -> torch.Tensor:
        r"""The sliders' values as one row of offsets (1, D_out)."""
        return torch.tensor([[s.value for s in self.sliders]], dtype=torch.float32)

    def select_image(self) -> None:
        r"""Encode the chosen image once, zero the sliders and redraw."""
        self.encoded = encode_image(self.model, self.dataset.images[self.index.value])
        self.reset()

    def update(self) -> None:
        r"""Decode the winning capsule plus the sliders' offsets and redraw in place."""
        if self._hold:
            return
        encoded, offsets = self.encoded, self.offsets()
        images, lengths = perturbed_reconstructions(self.model, encoded.capsules, encoded.prediction,
                                                    offsets.to(encoded.capsules))
        self.reconstruction, self.lengths = images[0, 0], lengths[0]  # (H, W), (J,)
        self.panel.update(self.image(), self.reconstruction, self.lengths, encoded.lengths,
                          encoded.prediction, self.true_label(), int((offsets != 0).sum()))
        self.redraw()

    def reset(self, values: list[float] | None = None) -> None:
        r"""All sliders back to 0, or to ``values`` (one redraw, not one per slider)."""
        self._hold = True
        try:
            for slider, value in zip(self.sliders, values or [0.0] * len(self.sliders)):
                slider.value = value
        finally:
            self._hold = False
        self.update()

    def frames(self, offsets: int = 11, colours: int = 64, dpi: int = 64) -> FrameExplorer:
        r"""The static form (no kernel needed): one dimension at a time, moved by ``offsets`` evenly
        spaced offsets from -limit to +limit - the paper's Figure 4 - for the chosen image, drawn
        at ``dpi`` (smaller than the live view's: 16 x ``offsets`` frames travel with the page)."""
        require_int("offsets", offsets, minimum=2)
        require_int("dpi", dpi, minimum=10)
        limit = self.sliders[0].max
        values = [-limit + 2 * limit * k / (offsets - 1) for k in range(offsets)]
        before, live_dpi = [slider.value for slider in self.sliders], self.figure.dpi
        self.figure.set_dpi(dpi)
        self.renderer.invalidate()
        rows = []  # D_out rows of `offsets` frames
        try:
            for slider in self.sliders:
                self.reset()
                row = []
                for value in values:
                    slider.value = value
                    row.append(compress_png(self.view.value, colours, method="fastoctree"))
                rows.append(row)
        finally:
            self.figure.set_dpi(live_dpi)
            self.renderer.invalidate()
            self.reset(before)
        note = (f"Image {self.index.value} only, one dimension at a time ({len(values)} offsets each); "
                "typing another image or moving several dimensions needs the live explorer.")
        # it opens at the largest offset: at 0 every dimension draws the same picture, so a reader
        # who moved "dimension" first would see nothing change
        alt = (f"Test image {self.index.value} and the decoder's reconstruction with one dimension of the "
               "predicted class capsule moved, beside the ten capsule lengths (black ticks: before)")
        return FrameExplorer(rows, Control("offset", tuple(f"{v:+.2f}" for v in values), offsets - 1),
                             Control("dimension", tuple(str(d) for d in range(len(self.sliders)))), note, alt)


def share_axis_top(trace: RoutingTrace) -> float:
    r"""The top of the vote-share axis that fits every r of ``trace``: a quarter above the largest
    share at any r. (The coupling maps keep the course's one colour scale,
    :func:`~capsedu.explore.figures.coupling_norm`.)"""
    return 1.25 * float(trace.shares.max())


class RoutingExplorer(_Explorer):
    r"""Controls: ``index`` and ``iterations`` (1..max_iterations); view: ``view``."""

    def __init__(self, model: CapsNet, dataset: Any, index: int = 0, max_iterations: int = 7) -> None:
        import ipywidgets as widgets

        cfg = require_capsnet(model).config
        panel = RoutingFigure(cfg.primary_types, cfg.primary_grid, cfg.num_classes, max_iterations,
                              grid_extent(model), cfg.image_size)
        super().__init__(model, dataset, index, panel)
        self.iterations = widgets.IntSlider(value=min(cfg.routing_iterations, max_iterations), min=1,
                                            max=max_iterations, description="iterations r",
                                            continuous_update=True)
        self.encoded: Encoded | None = None  # u and u_hat of the chosen image, set by select_image
        self.routes: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}  # r -> (lengths, c), this image
        self.trace: RoutingTrace | None = None  # what the view shows now
        self.select_image()
        self.index.observe(lambda _: self.select_image(), names="value")
        self.iterations.observe(lambda _: self.update(), names="value")
        self.widget = widgets.VBox([widgets.HBox([self.index, self.iterations]), self.view])

    def select_image(self) -> None:
        r"""Compute :math:`\mathbf u` and :math:`\hat{\mathbf u}` once for the chosen image, fix the
        share axis from its most-routed trace, then route and redraw."""
        self.encoded = encode_image(self.model, self.dataset.images[self.index.value])
        self.routes = {}
        most_routed = routing_trace(self.encoded.u_hat, self.iterations.max, self.encoded.u, self.routes)
        self.panel.show_image(self.image(), share_axis_top(most_routed))
        self.renderer.invalidate()  # the digit's outline and the share axis changed
        self.update()

    def update(self) -> None:
        r"""Route the cached ``u_hat`` with r = 1..``iterations`` and redraw in place."""
        self.trace = routing_trace(self.encoded.u_hat, self.iterations.value, self.encoded.u, self.routes)
        self.panel.update(self.trace, self.encoded.u, self.true_label())
        self.redraw()

    def frames(self, colours: int = 64) -> FrameExplorer:
        r"""The static form (no kernel needed): one frame per iteration count r, this image."""
        note = (f"Image {self.index.value} only; typing another image needs the live explorer.")
        alt = (f"Dynamic routing of test image {self.index.value}: the digit, the coupling coefficients "
               "J c_ij toward the predicted class over the primary capsule grid, each class's share "
               "of the votes, the class capsules' lengths after 1 to r iterations, and the couplings "
               "per primary capsule type")
        return sweep(self, "iterations", range(1, self.iterations.max + 1), note=note, colours=colours, alt=alt)


def perturbation_explorer(model: CapsNet, dataset: Any, index: int = 0) -> PerturbationExplorer:
    r"""Sliders on the 16 dimensions of the winning capsule, a reset button and an image index.

    Shows the input, the live reconstruction and the 10 capsule lengths. Display the returned
    object (last line of a cell) to get the widget.
    """
    return PerturbationExplorer(model, dataset, index)


def routing_explorer(model: CapsNet, dataset: Any, index: int = 0,
                     max_iterations: int = 7) -> RoutingExplorer:
    r"""A routing-iterations slider (1..7) and an image index: couplings, vote shares, lengths."""
    return RoutingExplorer(model, dataset, index, max_iterations)
