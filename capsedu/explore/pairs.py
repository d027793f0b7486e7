r"""Lesson 09's figures and explorer: two overlapping digits, pulled apart by the decoder.

* :func:`reconstruct` - the decoder's image of one chosen class per image (all other digit
  capsules masked), the paper's way of separating the digits;
* :func:`colour_pair` - the input in grey with two reconstructions in two colours on top;
* :func:`pair_figure` - the paper's Figure 5 for a few test pairs: input, each digit's
  reconstruction, both in colour, and the reconstruction of a class that is *not* in the image;
* :func:`pair_accuracy_matrix` / :func:`pair_matrix_figure` - the share of test pairs fully right
  for each pair of classes, to see which digits are hardest to tell apart;
* :class:`PairExplorer` (:func:`pair_explorer`) - pick a test pair and the two capsules to
  reconstruct; the capsule lengths and both reconstructions follow.

Shape legend:
    B      batch size (images)
    J      classes (10)
    D      digit-capsule dimension (16)
    S      canvas side (36)
"""

from __future__ import annotations

import numpy as np
import torch
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure

from capsedu.data.multimnist import MultiMNIST
from capsedu.explore.figures import WRONG_TEXT
from capsedu.explore.frames import FrameExplorer, sweep
from capsedu.explore.palette import SKY_BLUE, VERMILLION
from capsedu.explore.render import PngView
from capsedu.nets.capsnet import CapsNet, require_capsnet
from capsedu.nets.multi_digit import pair_hits
from capsedu.training.modes import eval_mode
from capsedu.training.uncertainty import with_error

# Okabe-Ito's vermillion and sky blue (palette.py), distinct with the common colour-vision
# deficiencies; over the dim grey input they show as orange and light blue
FIRST_RGB, SECOND_RGB = np.array(to_rgb(VERMILLION)), np.array(to_rgb(SKY_BLUE))


@torch.no_grad()
def reconstruct(model: CapsNet, images: torch.Tensor, classes: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Capsule lengths (B, J) of ``images`` (B, 1, S, S) and their reconstructions (B, S, S) from
    the capsule of ``classes`` (B,) alone, in eval mode (the mode is restored)."""
    require_capsnet(model)
    with eval_mode(model):
        v, _ = model.class_caps(model.encode(images))  # (B, J, D)
        return v.norm(dim=-1), model.decode(v, classes)[:, 0]  # (B, J), (B, S, S)


def colour_pair(image: torch.Tensor, first: torch.Tensor, second: torch.Tensor) -> np.ndarray:
    r"""RGB (S, S, 3): ``image`` (S, S) in dim grey, ``first`` in orange and ``second`` in blue."""
    grey = 0.35 * image.numpy()[..., None]
    rgb = grey + first.numpy()[..., None] * FIRST_RGB + second.numpy()[..., None] * SECOND_RGB
    return np.clip(rgb, 0.0, 1.0)


def _absent_class(lengths: torch.Tensor, labels: torch.Tensor) -> int:
    r"""The longest capsule whose class is not one of ``labels`` (the likeliest confusion)."""
    order = lengths.argsort(descending=True).tolist()
    return next(k for k in order if k not in labels.tolist())


def pair_figure(model: CapsNet, pairs: MultiMNIST, indices: list[int]) -> Figure:
    r"""Figure 5 of the paper for the test pairs at ``indices``: one row per pair. The last column
    decodes the longest capsule whose class is not in the image: where the prediction is right,
    a class in neither (the paper's columns marked (*)); where it is wrong, the wrongly predicted
    class (the paper's (P))."""
    images, targets = pairs.batch(torch.tensor(indices))
    lengths, _ = reconstruct(model, images, targets.labels[:, 0])
    absent = torch.tensor([_absent_class(lengths[b], targets.labels[b]) for b in range(len(indices))])
    recon = [reconstruct(model, images, classes)[1] for classes in
             (targets.labels[:, 0], targets.labels[:, 1], absent)]  # 3 x (B, S, S)
    figure = Figure(figsize=(8.2, 1.75 * len(indices) + 0.5), layout="constrained")
    axes = figure.subplots(len(indices), 5, squeeze=False)
    for b in range(len(indices)):
        first, second = targets.labels[b].tolist()
        predicted = sorted(lengths[b].topk(2).indices.tolist())
        right = predicted == sorted([first, second])
        panels = [(images[b, 0].numpy(), f"input L:({first},{second})\nR:({predicted[0]},{predicted[1]})"
                   + (" ✓" if right else " ✗")),
                  (recon[0][b].numpy(), f"capsule {first}"),
                  (recon[1][b].numpy(), f"capsule {second}"),
                  (colour_pair(images[b, 0], recon[0][b], recon[1][b]), f"{first} orange, {second} blue"),
                  (recon[2][b].numpy(), f"capsule {int(absent[b])} "
                   + ("(*)\nnot there" if right else "(P)\npredicted, not there"))]
        for ax, (picture, title) in zip(axes[b], panels):
            ax.imshow(picture, cmap="gray", vmin=0, vmax=1)
            ax.set_title(title, fontsize=8, color="black" if right or ax is not axes[b, 0] else WRONG_TEXT)
            ax.set_xticks([]), ax.set_yticks([])
    figure.suptitle("L: labels, R: the two longest capsules; each reconstruction masks all "
                    "capsules but one", fontsize=9)
    return figure


@torch.no_grad()
def pair_accuracy_matrix(model: torch.nn.Module, pairs: MultiMNIST,
                         batch_size: int = 500) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Share of pairs fully right (J, J) per unordered class pair (symmetric; NaN where no pair
    was drawn), and how many pairs each cell holds (J, J)."""
    right = torch.zeros(10, 10)
    count = torch.zeros(10, 10)
    with eval_mode(model):
        for images, targets in pairs.batches(batch_size):
            hit = (pair_hits(model.class_scores(images), targets.labels) == 2).float()  # (B,)
            a, b = targets.labels[:, 0], targets.labels[:, 1]
            for rows, cols in ((a, b), (b, a)):
                right.index_put_((rows, cols), hit, accumulate=True)
                count.index_put_((rows, cols), torch.ones_like(hit), accumulate=True)
    return right / count, count


def pair_matrix_figure(matrices: dict[str, torch.Tensor], counts: dict[str, torch.Tensor] | None = None) -> Figure:
    r"""One heat map per network of :func:`pair_accuracy_matrix`'s shares, on one colour scale;
    with each network's ``counts`` (pairs per cell) the lowest cell's share carries its standard
    error."""
    figure = Figure(figsize=(4.4 * len(matrices) + 0.8, 4.2), layout="constrained")
    axes = figure.subplots(1, len(matrices), squeeze=False)[0]
    low = min(float(np.nanmin(m.numpy())) for m in matrices.values())
    for ax, (name, matrix) in zip(axes, matrices.items()):
        shown = ax.imshow(matrix.numpy(), cmap="viridis", vmin=low, vmax=1.0)
        lowest = np.unravel_index(np.nanargmin(matrix.numpy()), matrix.shape)
        share = float(matrix[lowest])
        shown_share = f"{share:.0%}" if counts is None else with_error(share, int(counts[name][lowest]), digits=0)
        ax.set(title=f"{name}: lowest cell {lowest[0]} & {lowest[1]} ({shown_share})",
               xlabel="digit", ylabel="digit", xticks=range(10), yticks=range(10))
    figure.colorbar(shown, ax=list(axes), label="share of test pairs with both digits right")
    if counts is not None:
        figure.suptitle("each cell is a small sample: cells closer than two standard errors tie")
    return figure


class PairFigure:
    r"""Input | reconstruction of class A | of class B | both in colour | capsule lengths."""

    def __init__(self, side: int) -> None:
        self.figure = Figure(figsize=(10.5, 2.7), dpi=80, layout="constrained")
        axes = self.figure.subplots(1, 5, width_ratios=[1, 1, 1, 1, 1.7])
        blank = np.zeros((side, side))
        self.pictures = [ax.imshow(blank, cmap="gray", vmin=0, vmax=1) for ax in axes[:3]]
        self.pictures.append(axes[3].imshow(np.zeros((side, side, 3))))
        self.titles = [ax.set_title("", fontsize=9) for ax in axes[:4]]
        for ax in axes[:4]:
            ax.set_xticks([]), ax.set_yticks([])
        self.bars = axes[4].bar(np.arange(10), np.zeros(10), color="0.65")
        axes[4].axhline(0.5, color="0.3", lw=0.8, ls=":")
        axes[4].set(xticks=range(10), ylim=(0, 1.05), xlabel="class", ylabel="capsule length")
        self.titles.append(axes[4].set_title("", fontsize=9))
        self.artists = [*self.pictures, *self.titles, *self.bars]

    def update(self, image: torch.Tensor, labels: list[int], lengths: torch.Tensor,
               shown: tuple[int, int], recon: tuple[torch.Tensor, torch.Tensor]) -> None:
        self.pictures[0].set_data(image.numpy())
        self.pictures[1].set_data(recon[0].numpy())
        self.pictures[2].set_data(recon[1].numpy())
        self.pictures[3].set_data(colour_pair(image, *recon))
        predicted = sorted(lengths.topk(2).indices.tolist())
        self.titles[0].set_text(f"labels {labels[0]} & {labels[1]}")
        self.titles[1].set_text(f"capsule {shown[0]} (orange)")
        self.titles[2].set_text(f"capsule {shown[1]} (blue)")
        self.titles[3].set_text("both, over the input")
        verdict = "✓" if predicted == sorted(labels) else "✗"
        self.titles[4].set_text(f"two longest: {predicted[0]} & {predicted[1]} {verdict}")
        for k, (bar, height) in enumerate(zip(self.bars, lengths.tolist())):
            bar.set_height(height)
            bar.set_color(FIRST_RGB if k == shown[0] else SECOND_RGB if k == shown[1] else (0.65,) * 3)


class PairExplorer(PngView):
    r"""Controls: ``index`` (a test pair), ``first`` and ``second`` (the classes whose capsules are
    reconstructed, set to the pair's labels whenever a pair is chosen); view: ``view``. The
    pair's capsules are computed once per pair."""

    def __init__(self, model: CapsNet, pairs: MultiMNIST, index: int = 0) -> None:
        import ipywidgets as widgets

        self.model = require_capsnet(model)
        if not isinstance(pairs, MultiMNIST):
            raise TypeError(f"pairs must be a capsedu MultiMNIST set, got {type(pairs).__name__}")
        super().__init__(PairFigure(pairs.canvas))
        self.pairs = pairs
        last = len(pairs) - 1
        self.index = widgets.BoundedIntText(value=min(max(index, 0), last), min=0, max=last,
                                            description="pair", layout=widgets.Layout(width="180px"))
        self.first, self.second = (widgets.IntSlider(value=0, min=0, max=9, description=name)
                                   for name in ("orange", "blue"))
        self.capsules: torch.Tensor | None = None  # (1, J, D) of the chosen pair
        self.shown: tuple[int, int] = (0, 0)
        self._hold = False  # True while select_pair moves both sliders: one redraw, not three
        self.index.observe(lambda _: self.select_pair(), names="value")
        for control in (self.first, self.second):
            control.observe(lambda _: self.update(), names="value")
        self.select_pair()
        self.widget = widgets.VBox([widgets.HBox([self.index, self.first, self.second]), self.view])

    def select_pair(self) -> None:
        r"""Encode the chosen pair once, then redraw."""
        self.image, self.targets = self.pairs.batch(torch.tensor([self.index.value]))
        with torch.no_grad(), eval_mode(self.model):
            self.capsules = self.model.class_caps(self.model.encode(self.image))[0]  # (1, J, D)
        self._hold = True
        try:
            self.first.value, self.second.value = self.targets.labels[0].tolist()
        finally:
            self._hold = False
        self.update()

    def update(self) -> None:
        r"""Decode the two chosen capsules of the encoded pair and redraw in place."""
        if self._hold:
            return
        labels = self.targets.labels[0].tolist()
        self.shown = (self.first.value, self.second.value)
        with torch.no_grad(), eval_mode(self.model):
            recon = self.model.decode(self.capsules.expand(2, -1, -1), torch.tensor(self.shown))
        self.panel.update(self.image[0, 0], labels, self.capsules[0].norm(dim=-1), self.shown,
                          (recon[0, 0], recon[1, 0]))
        self.redraw()

    def frames(self, colours: int = 64) -> FrameExplorer:
        r"""The static form (no kernel needed): this pair, every class for each colour."""
        note = f"Pair {self.index.value} only; choosing another pair needs the live explorer."
        alt = (f"Pair {self.index.value} of overlapping digits: the input, the reconstructions from the "
               "two chosen class capsules alone and both in colour, and the ten capsule lengths")
        return sweep(self, "second", range(10), outer="first", outer_values=range(10), note=note,
                     colours=colours, alt=alt)


def pair_explorer(model: CapsNet, pairs: MultiMNIST, index: int = 0) -> PairExplorer:
    r"""Pick a test pair and the two capsules to reconstruct (default: its two labels)."""
    return PairExplorer(model, pairs, index)
