r"""The two interactive explorers of lesson 07 (ipywidgets, imported inside the functions).

* :func:`perturbation_explorer` - 16 sliders add -0.25 ... +0.25 to the dimensions of the
  winning digit capsule; the decoder's reconstruction and the capsule lengths follow (Section 5.1
  and Figure 4 of the paper).
* :func:`routing_explorer` - re-run dynamic routing (Procedure 1) with r = 1..7 iterations and
  watch the coupling coefficients and capsule lengths settle.

Each explorer keeps ONE matplotlib figure and one ``ipywidgets.Image``: a move updates the
figure's artists in place and swaps the PNG, so nothing flickers and no figure piles up. What does
not depend on a slider is computed once per image (digit capsules for the perturbation explorer,
:math:`\hat{\mathbf u}_{j|i}` for the routing explorer). Explorers return an object exposing their
controls and update methods, so tests (and curious learners) can drive them without a browser.

Shape legend:
    N      images in the dataset
    I      primary capsules, J digit capsules, D_out digit capsule dimension (16)
    R      routing iterations shown
"""

from __future__ import annotations

from typing import Any

import torch

from capsedu.explore.figures import (
    PerturbationFigure,
    RoutingFigure,
    coupling_scales,
    perturbation_grid,
)
from capsedu.explore.probes import (
    Encoded,
    RoutingTrace,
    check_image,
    encode_image,
    perturbed_reconstructions,
    routing_trace,
)
from capsedu.explore.render import BlitRenderer
from capsedu.nets.capsnet import CapsNet

__all__ = ["PerturbationExplorer", "RoutingExplorer", "perturbation_explorer", "perturbation_grid",
           "routing_explorer"]


def _check_inputs(model: object, dataset: object) -> None:
    if not isinstance(model, CapsNet):
        raise TypeError(f"model must be a capsedu.CapsNet, got {type(model).__name__}")
    images, labels = getattr(dataset, "images", None), getattr(dataset, "labels", None)
    if not isinstance(images, torch.Tensor) or not isinstance(labels, torch.Tensor):
        raise TypeError("dataset must have .images (N, 1, H, W) and .labels (N,) tensors, like "
                        f"capsedu.load_mnist(...); got {type(dataset).__name__}")
    if images.dim() != 4 or len(images) == 0 or len(images) != len(labels):
        raise ValueError(f"dataset.images must be (N, 1, H, W) with N >= 1 and one label each, got "
                         f"{tuple(images.shape)} and {tuple(labels.shape)}")


class _Explorer:
    r"""Shared parts: the dataset, the index box, the PNG view and the one-redraw-per-change guard."""

    def __init__(self, model: CapsNet, dataset: Any, index: int) -> None:
        import ipywidgets as widgets

        _check_inputs(model, dataset)
        model.eval()
        self.model, self.dataset, self._hold = model, dataset, False
        last = len(dataset.labels) - 1
        self.index = widgets.BoundedIntText(value=min(max(index, 0), last), min=0, max=last,
                                            description="image", layout=widgets.Layout(width="180px"))
        self.view = widgets.Image(format="png")
        self.redraws = 0

    def image(self) -> torch.Tensor:
        return check_image(self.dataset.images[self.index.value])[0, 0]  # (H, W)

    def true_label(self) -> int:
        return int(self.dataset.labels[self.index.value])

    def redraw(self) -> None:
        r"""Re-render the (already updated) figure into the image widget; blits unless invalidated."""
        self.view.value = self.renderer.png()
        self.redraws += 1

    def snapshot(self) -> Any:
        r"""What the widget shows now, as an ``IPython.display.Image`` (for static copies)."""
        from IPython.display import Image

        return Image(data=self.view.value, format="png")

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.widget)


class PerturbationExplorer(_Explorer):
    r"""Controls: ``index``, ``sliders`` (one per capsule dimension), ``reset_button``; view: ``view``."""

    def __init__(self, model: CapsNet, dataset: Any, index: int = 0, step: float = 0.05,
                 limit: float = 0.25) -> None:
        import ipywidgets as widgets

        super().__init__(model, dataset, index)
        cfg = model.config
        self.sliders = [widgets.FloatSlider(value=0.0, min=-limit, max=limit, step=step,
                                            description=f"dim {d}", continuous_update=True,
                                            readout_format="+.2f", layout=widgets.Layout(width="300px"))
                        for d in range(cfg.digit_dim)]
        self.reset_button = widgets.Button(description="reset", icon="undo")
        self.panel = PerturbationFigure(cfg.num_classes, cfg.image_size)
        self.figure = self.panel.figure
        self.renderer = BlitRenderer(self.figure, self.panel.artists)
        self.encoded: Encoded | None = None
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
        zeros = torch.zeros(1, self.model.config.digit_dim)
        self.original_reconstruction, _ = self._decode(zeros)  # (H, W)
        self.reset()

    def _decode(self, offsets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        encoded = self.encoded
        offsets = offsets.to(encoded.capsules)
        images, lengths = perturbed_reconstructions(self.model, encoded.capsules, encoded.prediction,
                                                    offsets)
        return images[0, 0], lengths[0]  # (H, W), (J,)

    def update(self) -> None:
        r"""Decode the winning capsule plus the sliders' offsets and redraw in place."""
        if self._hold:
            return
        offsets = self.offsets()
        self.reconstruction, self.lengths = self._decode(offsets)
        moved = int((offsets != 0).sum())
        self.panel.update(self.image(), self.reconstruction, self.lengths, self.encoded.lengths,
                          self.encoded.prediction, self.true_label(), moved)
        self.redraw()

    def reset(self) -> None:
        r"""All sliders back to 0 (one redraw, not one per slider)."""
        self._hold = True
        try:
            for slider in self.sliders:
                slider.value = 0.0
        finally:
            self._hold = False
        self.update()


class RoutingExplorer(_Explorer):
    r"""Controls: ``index`` and ``iterations`` (1..max_iterations); view: ``view``."""

    def __init__(self, model: CapsNet, dataset: Any, index: int = 0, max_iterations: int = 7) -> None:
        import ipywidgets as widgets

        super().__init__(model, dataset, index)
        cfg = model.config
        self.iterations = widgets.IntSlider(value=min(cfg.routing_iterations, max_iterations), min=1,
                                            max=max_iterations, description="iterations r",
                                            continuous_update=True)
        self.panel = RoutingFigure(cfg.primary_types, cfg.num_classes, max_iterations, cfg.image_size)
        self.figure = self.panel.figure
        self.renderer = BlitRenderer(self.figure, self.panel.artists)
        self.select_image()
        self.index.observe(lambda _: self.select_image(), names="value")
        self.iterations.observe(lambda _: self.update(), names="value")
        self.widget = widgets.VBox([widgets.HBox([self.index, self.iterations]), self.view])

    def select_image(self) -> None:
        r"""Compute :math:`\hat{\mathbf u}_{j|i}` once for the chosen image, then route and redraw."""
        self.u_hat = encode_image(self.model, self.dataset.images[self.index.value]).u_hat  # (I, J, D_out)
        self.routes: dict = {}  # r -> (lengths, couplings) of this image, each routed once
        most_routed = routing_trace(self.u_hat, self.iterations.max, self.routes)
        cfg = self.model.config
        self.scale, self.bar_top = coupling_scales(most_routed, cfg.primary_types, cfg.num_classes)
        self.renderer.invalidate()  # the colour bar and the bar chart's y range changed
        self.update()

    def update(self) -> None:
        r"""Route the cached ``u_hat`` with r = 1..``iterations`` and redraw in place."""
        self.trace: RoutingTrace = routing_trace(self.u_hat, self.iterations.value, self.routes)
        self.panel.update(self.image(), self.trace, self.true_label(), self.scale, self.bar_top)
        self.redraw()


def perturbation_explorer(model: CapsNet, dataset: Any, index: int = 0) -> PerturbationExplorer:
    r"""Sliders on the 16 dimensions of the winning capsule, a reset button and an image index.

    Shows the input, the live reconstruction and the 10 capsule lengths. Display the returned
    object (last line of a cell) to get the widget.
    """
    return PerturbationExplorer(model, dataset, index)


def routing_explorer(model: CapsNet, dataset: Any, index: int = 0,
                     max_iterations: int = 7) -> RoutingExplorer:
    r"""A routing-iterations slider (1..7) and an image index: couplings, lengths, prediction."""
    return RoutingExplorer(model, dataset, index, max_iterations)
