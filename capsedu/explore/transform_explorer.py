r"""Lesson 08's explorer: turn and shift one digit, watch a CapsNet and a CNN answer.

* :class:`TransformFigure` - transformed digit | the CapsNet's reconstruction | both networks'
  class scores side by side (capsule lengths and CNN probabilities), updated in place;
* :class:`TransformExplorer` (:func:`transform_explorer`) - an image index, a rotation slider
  (-90° ... +90°), two shift sliders (-8 ... +8 pixels) and a reset button;
* :func:`transform_strip` - the static version for the book: the digit at several angles with
  each network's prediction and the reconstruction, and the true class's scores against the angle.

Every transformation is :func:`capsedu.data.transforms.transform_images`; one move runs both
networks on one image (a few milliseconds) and redraws with :class:`~.render.BlitRenderer`.

Shape legend:
    A      angles;  J classes;  H, W image height and width (28)
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from matplotlib.figure import Figure

from capsedu.data.augment import LIMITS
from capsedu.data.transforms import transform_images
from capsedu.explore.figures import TRUE_COLOUR, WRONG_TEXT
from capsedu.explore.frames import FrameExplorer, sweep
from capsedu.explore.palette import BLUE, VERMILLION
from capsedu.explore.widgets import _Explorer
from capsedu.nets.capsnet import CapsNet, require_capsnet
from capsedu.nets.cnn import BaselineCNN, require_cnn
from capsedu.training.modes import eval_mode

# The course's two networks in every comparison: the CapsNet blue and plain (solid, circles),
# the CNN vermillion and marked (hatched bars; dashed, squares)
CAPSNET_COLOUR, CNN_COLOUR = BLUE, VERMILLION
CNN_HATCH = "//"


@torch.no_grad()
def both_networks(capsnet: CapsNet, cnn: BaselineCNN,
                  images: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    r"""Capsule lengths (N, J), CNN probabilities (N, J) and the CapsNet's reconstructions (N, H, W)
    of ``images`` (N, 1, H, W), both networks in eval mode (their modes are restored)."""
    with eval_mode(capsnet), eval_mode(cnn):
        out = capsnet(images)
        return out.lengths, cnn.probabilities(images), out.reconstruction[:, 0]


class TransformFigure:
    r"""Transformed digit | CapsNet reconstruction | capsule lengths and CNN probabilities."""

    def __init__(self, num_classes: int, image_size: int = 28) -> None:
        self.figure = Figure(figsize=(9.6, 3.2), dpi=80, layout="constrained")
        ax_in, ax_out, ax_bars = self.figure.subplots(1, 3, width_ratios=[1, 1, 1.8])
        blank = np.zeros((image_size, image_size))
        self.digit = ax_in.imshow(blank, cmap="gray", vmin=0, vmax=1)
        self.reconstruction = ax_out.imshow(blank, cmap="gray", vmin=0, vmax=1)
        for ax in (ax_in, ax_out):
            ax.set_xticks([]), ax.set_yticks([])
        # two lines reserved: the layout is frozen after the first frame (BlitRenderer)
        self.title_in = ax_in.set_title(" \n ")
        self.title_out = ax_out.set_title(" \n ")
        classes = np.arange(num_classes)
        zeros = np.zeros(num_classes)
        self.caps_bars = ax_bars.bar(classes - 0.2, zeros, 0.4, color=CAPSNET_COLOUR,
                                     label="CapsNet: capsule length")
        self.cnn_bars = ax_bars.bar(classes + 0.2, zeros, 0.4, color=CNN_COLOUR, hatch=CNN_HATCH,
                                    edgecolor="white", hatchcolor="black", label="CNN: softmax probability")
        self.marker = ax_bars.axvspan(-0.5, 0.5, color=TRUE_COLOUR, alpha=0.12, lw=0)
        ax_bars.set(xticks=classes, xlim=(-0.6, num_classes - 0.4), ylim=(0, 1.05),
                    xlabel="digit class (shaded: true class)", ylabel="score")
        ax_bars.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)
        self.title_bars = ax_bars.set_title("")
        self.artists = [self.digit, self.reconstruction, self.title_in, self.title_out,
                        *self.caps_bars, *self.cnn_bars, self.marker, self.title_bars]

    def update(self, image: torch.Tensor, lengths: torch.Tensor, probabilities: torch.Tensor,
               reconstruction: torch.Tensor, true_label: int, described: str) -> None:
        r"""Show one transformed ``image`` (H, W), the scores (J,) and the reconstruction (H, W)."""
        self.digit.set_data(image.cpu().numpy())
        self.reconstruction.set_data(reconstruction.cpu().numpy())
        self.title_in.set_text(f"label {true_label}\n{described}")
        caps, cnn = int(lengths.argmax()), int(probabilities.argmax())
        self.title_out.set_text(f"CapsNet\nredraws a {caps}")
        for bars, scores in ((self.caps_bars, lengths), (self.cnn_bars, probabilities)):
            for bar, height in zip(bars, scores.tolist()):
                bar.set_height(height)
        self.marker.set_x(true_label - 0.5)
        verdicts = [f"{name} says {k}" + (" ✓" if k == true_label else " ✗")
                    for name, k in (("CapsNet", caps), ("CNN", cnn))]
        self.title_bars.set_text("   ".join(verdicts))
        self.title_bars.set_color("black" if caps == cnn == true_label else WRONG_TEXT)


def describe(angle: float, dx: float, dy: float) -> str:
    r"""A short caption of a transformation: ``"+30°, shift (2, -1)"``."""
    parts = [f"{angle:+.0f}°"] + ([f"shift ({dx:+.0f}, {dy:+.0f})"] if dx or dy else [])
    return ", ".join(parts)


class TransformExplorer(_Explorer):
    r"""Controls: ``index``, ``angle``, ``dx``, ``dy``, ``reset_button``; view: ``view``."""

    def __init__(self, capsnet: CapsNet, cnn: BaselineCNN, dataset: Any, index: int = 0) -> None:
        import ipywidgets as widgets

        self.cnn = require_cnn(cnn)
        cfg = require_capsnet(capsnet, "capsnet").config
        super().__init__(capsnet, dataset, index, TransformFigure(cfg.num_classes, cfg.image_size))
        low, high = LIMITS["angle"]
        self.angle = widgets.IntSlider(value=0, min=int(low), max=int(high), step=5,
                                       description="angle °", continuous_update=True)
        low, high = LIMITS["shift"]
        self.dx, self.dy = (widgets.IntSlider(value=0, min=int(low), max=int(high), description=name,
                                              continuous_update=True) for name in ("shift x", "shift y"))
        self.reset_button = widgets.Button(description="reset", icon="undo")
        self.scores: tuple[torch.Tensor, torch.Tensor] | None = None  # (J,), (J,) shown now
        self._hold = False  # True while reset() moves the sliders: one redraw, not three
        for control in (self.index, self.angle, self.dx, self.dy):
            control.observe(lambda _: self.update(), names="value")
        self.reset_button.on_click(lambda _: self.reset())
        self.update()
        self.widget = widgets.VBox([widgets.HBox([self.index, self.reset_button]),
                                    widgets.HBox([self.angle, self.dx, self.dy]), self.view])

    def update(self) -> None:
        r"""Transform the chosen digit, run both networks on it and redraw in place."""
        if self._hold:
            return
        angle, dx, dy = float(self.angle.value), float(self.dx.value), float(self.dy.value)
        image = transform_images(self.image()[None, None], angle=angle, shift=(dx, dy))  # (1, 1, H, W)
        lengths, probabilities, recon = both_networks(self.model, self.cnn, image)
        self.scores = (lengths[0], probabilities[0])
        self.panel.update(image[0, 0], lengths[0], probabilities[0], recon[0], self.true_label(),
                          describe(angle, dx, dy))
        self.redraw()

    def reset(self) -> None:
        r"""Angle and shifts back to 0 (one redraw)."""
        self._hold = True
        try:
            self.angle.value, self.dx.value, self.dy.value = 0, 0, 0
        finally:
            self._hold = False
        self.update()


    def frames(self, angle_step: int = 15, shift_step: int = 4, colours: int = 64) -> FrameExplorer:
        r"""The static form (no kernel needed): this digit at every ``angle_step`` degrees, for
        horizontal shifts every ``shift_step`` pixels (no vertical shift)."""
        angles = range(self.angle.min, self.angle.max + 1, angle_step)
        shifts = range(-(self.dx.max // shift_step) * shift_step, self.dx.max + 1, shift_step)
        note = (f"Image {self.index.value}, every {angle_step}° and every {shift_step} pixels "
                "sideways; other angles, vertical shifts and other images need the live explorer.")
        alt = (f"Test image {self.index.value} turned and shifted: the transformed digit, the CapsNet's "
               "reconstruction of it, and each class's CapsNet capsule length beside the CNN's "
               "probability, each network's answer in the titles")
        return sweep(self, "angle", angles, outer="dx", outer_values=shifts, note=note,
                     colours=colours, label=lambda v: f"{v:+d}", alt=alt)


def transform_explorer(capsnet: CapsNet, cnn: BaselineCNN, dataset: Any,
                       index: int = 0) -> TransformExplorer:
    r"""Rotation and shift sliders on one test digit: both networks' scores and the reconstruction."""
    return TransformExplorer(capsnet, cnn, dataset, index)


def transform_strip(capsnet: CapsNet, cnn: BaselineCNN, image: torch.Tensor, label: int,
                    angles: list[float]) -> Figure:
    r"""One digit rotated by each of ``angles``: the digit with both predictions, the CapsNet's
    reconstruction, and the true class's capsule length and CNN probability against the angle."""
    require_capsnet(capsnet, "capsnet"), require_cnn(cnn)
    images = torch.cat([transform_images(image.reshape(1, 1, *image.shape[-2:]), angle=float(a))
                        for a in angles])  # (A, 1, H, W)
    lengths, probabilities, recon = both_networks(capsnet, cnn, images)  # (A, J), (A, J), (A, H, W)
    images, lengths, probabilities, recon = (t.numpy() for t in (images, lengths, probabilities, recon))
    figure = Figure(figsize=(1.15 * len(angles) + 0.4, 5.6), layout="constrained")
    rows = figure.subfigures(2, 1, height_ratios=[2.3, 1.5])
    axes = rows[0].subplots(2, len(angles), squeeze=False)
    for k, angle in enumerate(angles):
        caps, net = int(lengths[k].argmax()), int(probabilities[k].argmax())
        axes[0, k].imshow(images[k, 0], cmap="gray", vmin=0, vmax=1)
        axes[0, k].set_title(f"{angle:+.0f}°\nCaps {caps}  CNN {net}", fontsize=8,
                             color="black" if caps == net == label else WRONG_TEXT)
        axes[1, k].imshow(recon[k], cmap="gray", vmin=0, vmax=1)
        for ax in axes[:, k]:
            ax.set_xticks([]), ax.set_yticks([])
    axes[0, 0].set_ylabel("input", fontsize=8)
    axes[1, 0].set_ylabel("CapsNet\nredraws", fontsize=8)
    ax = rows[1].subplots()
    ax.plot(angles, lengths[:, label], "o-", color=CAPSNET_COLOUR, label=f"CapsNet: length of capsule {label}")
    ax.plot(angles, probabilities[:, label], "s--", color=CNN_COLOUR, label=f"CNN: probability of {label}")
    ax.set(xlabel="rotation (degrees, anticlockwise)", ylabel="score of the true class", ylim=(0, 1.05))
    ax.legend(fontsize=8, loc="lower center")
    rows[0].suptitle(f"A {label} turned (dark vermillion titles: a network is wrong)", fontsize=10)
    return figure
