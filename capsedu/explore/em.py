r"""Lesson 11's figures and explorer: EM routing as clustering, iteration by iteration.

* :func:`em_trace` - every iteration of :func:`capsedu.nets.em_routing.em_routing` for one
  image: the assignments R each M-step used, and the Gaussians (mu, sigma^2) and activations it
  produced;
* :func:`toy_votes` - a 2-D toy: three parents, two of which a group of children agrees on;
* :func:`digit_votes` - the class layer's votes of a trained :class:`MatrixCapsNet` for one image;
* :func:`class_layer_trace` - the class layer's routing of one image, iteration by iteration, with
  the layer's own :math:`\beta_u`, :math:`\beta_a` and λ (so that its iteration r is what the
  network computes with r iterations);
* :class:`EMPanel` / :func:`em_figure` - one panel per parent: its votes (projected to 2-D for
  16-D poses) coloured by R, the Gaussian's 2-sigma ellipse, the activation;
* :class:`EMExplorer` (:func:`em_explorer`) - an iteration slider over such a figure.

Shape legend:
    I      input (child) capsules
    J      output (parent) capsules
    M      pose entries (2 in the toy, 16 in a network)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import torch
from matplotlib.figure import Figure
from matplotlib.patches import Ellipse

from capsedu._validate import require_unit_interval
from capsedu.explore.frames import FrameExplorer, sweep
from capsedu.explore.palette import VERMILLION
from capsedu.explore.render import PngView
from capsedu.nets.em_routing import e_step, em_routing, inverse_temperatures, m_step
from capsedu.nets.matrix_capsnet import MatrixCapsNet
from capsedu.training.modes import eval_mode


class EMStep(NamedTuple):
    r"""One iteration of EM routing for one image."""

    R: torch.Tensor  # (I, J) the assignments this iteration's M-step used
    mu: torch.Tensor  # (J, M)
    sigma_sq: torch.Tensor  # (J, M)
    a: torch.Tensor  # (J,) output activations


@torch.no_grad()
def em_trace(votes: torch.Tensor, activations: torch.Tensor, beta_u: torch.Tensor,
             beta_a: torch.Tensor, routing_iterations: int,
             inverse_temperature: float | Sequence[float], eps: float = 1e-8) -> list[EMStep]:
    r"""The states of ``routing_iterations`` EM iterations on one image's ``votes`` (I, J, M) and
    ``activations`` (I,); the last one is what :func:`em_routing` returns."""
    em_routing(votes[None], activations[None], beta_u, beta_a, routing_iterations,
               inverse_temperature, eps)  # validates every argument's type and shape
    require_unit_interval("activations", activations)  # and, at this entry, the values
    schedule = inverse_temperatures(inverse_temperature, routing_iterations)
    votes_inner = votes.transpose(0, 1)[None]  # (1, J, I, M): the routing's inner layout
    R = votes_inner.new_full(votes_inner.shape[:3], 1.0 / votes_inner.shape[1])  # (1, J, I)
    steps = []
    for t, inverse_temperature_t in enumerate(schedule):
        mu, sigma_sq, logit, deviation_sq = m_step(R, activations[None], votes_inner, beta_u, beta_a,
                                                   inverse_temperature_t, eps)
        steps.append(EMStep(R[0].T, mu[0], sigma_sq[0], torch.sigmoid(logit[0])))
        if t < routing_iterations - 1:
            R = e_step(deviation_sq, sigma_sq, logit)  # (1, J, I)
    return steps


def toy_votes(seed: int = 0, per_group: int = 8) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Votes (I, 3, 2) and activations (I,) of I = 3 * per_group children for three parents.

    Children 0 .. per_group-1 agree on a pose for parent 0 (tight votes around (2, 1)), the next
    group agrees on a pose for parent 1 (around (-1, -2)); every other vote is scattered
    uniformly over [-4, 4]^2, and no group agrees on parent 2. All activations are 1.
    """
    generator = torch.Generator().manual_seed(seed)
    num_in = 3 * per_group
    votes = 8 * torch.rand(num_in, 3, 2, generator=generator) - 4  # (I, 3, 2) scattered
    for group, centre in ((0, (2.0, 1.0)), (1, (-1.0, -2.0))):
        rows = slice(group * per_group, (group + 1) * per_group)
        votes[rows, group] = torch.tensor(centre) + 0.3 * torch.randn(per_group, 2, generator=generator)
    return votes, torch.ones(num_in)


@torch.no_grad()
def digit_votes(model: MatrixCapsNet, image: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    r"""The class layer's votes (I, J, 16) and input activations (I,) for one image (1, 28, 28)."""
    if not isinstance(model, MatrixCapsNet):
        raise TypeError(f"model must be a MatrixCapsNet, got {type(model).__name__}")
    if not isinstance(image, torch.Tensor) or image.dim() != 3:
        raise ValueError(f"image must be one (C, H, W) tensor, got {getattr(image, 'shape', image)}")
    with eval_mode(model):
        votes, activations = model.class_votes(image[None])  # (1, I, J, 16), (1, I)
    return votes[0], activations[0]  # (I, J, 16), (I,)


@torch.no_grad()
def class_layer_trace(model: MatrixCapsNet, image: torch.Tensor,
                      routing_iterations: int) -> tuple[torch.Tensor, torch.Tensor, list[EMStep]]:
    r"""The votes (I, J, 16), input activations (I,) and ``routing_iterations`` EM steps of the
    class layer for one image, routed as the network routes it: with
    :meth:`~capsedu.nets.matrix_capsnet.RoutedCaps.routing_betas` (the offsets in the units
    routing uses) and the layer's λ."""
    votes, activations = digit_votes(model, image)
    beta_u, beta_a = (beta.detach() for beta in model.class_caps.routing_betas())
    return votes, activations, em_trace(votes, activations, beta_u, beta_a, routing_iterations,
                                        model.class_caps.inverse_temperatures[0])


def _projection(votes: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Centre (M,) and the top-two principal axes (2, M) of one parent's votes (I, M)."""
    centre = votes.mean(dim=0)
    if votes.shape[1] == 2:
        return torch.zeros(2, dtype=votes.dtype), torch.eye(2, dtype=votes.dtype)
    _, _, axes = torch.linalg.svd(votes - centre, full_matrices=False)  # (M, M) rows = axes
    return centre, axes[:2]


class EMPanel:
    r"""One axes per parent in ``parents``: votes coloured by R, the 2-sigma ellipse, a_j."""

    def __init__(self, votes: torch.Tensor, parents: Sequence[int], names: Sequence[str]) -> None:
        self.parents = list(parents)
        self.figure = Figure(figsize=(3.1 * len(self.parents) + 0.9, 3.4), dpi=80, layout="constrained")
        axes = self.figure.subplots(1, len(self.parents), squeeze=False)[0]
        self.frames = [_projection(votes[:, j].double()) for j in self.parents]
        self.points, self.ellipses, self.titles = [], [], []
        for ax, j, name, (centre, axes_2d) in zip(axes, self.parents, names, self.frames):
            xy = ((votes[:, j].double() - centre) @ axes_2d.T).numpy()  # (I, 2)
            self.points.append(ax.scatter(xy[:, 0], xy[:, 1], c=np.zeros(len(xy)), cmap="viridis",
                                          vmin=0, vmax=1, s=22, edgecolors="0.3", linewidths=0.3))
            self.ellipses.append(ax.add_patch(Ellipse((0, 0), 1, 1, fill=False, color=VERMILLION, lw=1.5)))
            self.titles.append(ax.set_title(name, fontsize=11))
            pad = 0.15 * np.ptp(xy, axis=0).max()
            ax.set(xlim=(xy[:, 0].min() - pad, xy[:, 0].max() + pad),
                   ylim=(xy[:, 1].min() - pad, xy[:, 1].max() + pad), aspect="equal")
            ax.set_xlabel("pose entry 1" if votes.shape[-1] == 2 else "principal axis 1", fontsize=10)
        axes[0].set_ylabel("pose entry 2" if votes.shape[-1] == 2 else "principal axis 2", fontsize=10)
        self.figure.colorbar(self.points[0], ax=list(axes), label="assignment R_ij (child → parent)",
                             shrink=0.85)
        self.names = list(names)
        self.artists = [*self.points, *self.ellipses, *self.titles]

    def update(self, step: EMStep, iteration: int) -> None:
        r"""Show ``step`` (the state of iteration ``iteration``, counted from 1)."""
        for k, (j, (centre, axes_2d)) in enumerate(zip(self.parents, self.frames)):
            self.points[k].set_array(step.R[:, j].numpy())
            mean = ((step.mu[j].double() - centre) @ axes_2d.T).numpy()
            cov = (axes_2d * step.sigma_sq[j].double()) @ axes_2d.T  # (2, 2) projected diag(sigma^2)
            values, vectors = np.linalg.eigh(cov.numpy())
            angle = np.degrees(np.arctan2(vectors[1, 1], vectors[0, 1]))
            self.ellipses[k].set(center=mean, width=4 * np.sqrt(values[1]),
                                 height=4 * np.sqrt(values[0]), angle=angle)
            self.titles[k].set_text(f"{self.names[k]}: a = {float(step.a[j]):.3f}\n"
                                    f"iteration {iteration}, Σᵢ Rᵢⱼ = {float(step.R[:, j].sum()):.1f}")


def em_figure(steps: list[EMStep], votes: torch.Tensor, iteration: int,
              parents: Sequence[int] | None = None, names: Sequence[str] | None = None) -> Figure:
    r"""A still of :class:`EMPanel` at ``iteration`` (1 .. len(steps))."""
    parents = list(range(votes.shape[1])) if parents is None else list(parents)
    panel = EMPanel(votes, parents, names or [f"parent {j}" for j in parents])
    if not 1 <= iteration <= len(steps):
        raise ValueError(f"iteration must be in 1..{len(steps)}, got {iteration}")
    panel.update(steps[iteration - 1], iteration)
    return panel.figure


class EMExplorer(PngView):
    r"""Controls: ``iteration`` (a slider over the trace's iterations); view: ``view``."""

    def __init__(self, steps: list[EMStep], votes: torch.Tensor, parents: Sequence[int],
                 names: Sequence[str], iteration: int = 1) -> None:
        import ipywidgets as widgets

        super().__init__(EMPanel(votes, parents, names))
        self.steps = steps
        self.iteration = widgets.IntSlider(value=min(max(iteration, 1), len(steps)), min=1,
                                           max=len(steps), description="iteration")
        self.iteration.observe(lambda _: self.update(), names="value")
        self.update()
        self.widget = widgets.VBox([self.iteration, self.view])

    def update(self) -> None:
        self.panel.update(self.steps[self.iteration.value - 1], self.iteration.value)
        self.redraw()

    def frames(self, colours: int = 64) -> FrameExplorer:
        r"""The static form (no kernel needed): one frame per iteration."""
        alt = ("EM routing, one scatter plot per parent capsule: each child's vote projected on two "
               "axes, coloured by its assignment R to that parent (dark 0, yellow 1), with the "
               "parent's 2-sigma ellipse and its activation in the title")
        return sweep(self, "iteration", range(1, len(self.steps) + 1), colours=colours, alt=alt)


def em_explorer(steps: list[EMStep], votes: torch.Tensor, parents: Sequence[int] | None = None,
                names: Sequence[str] | None = None, iteration: int = 1) -> EMExplorer:
    r"""Slide through the iterations of :func:`em_trace` ``steps`` over ``votes`` (I, J, M)."""
    parents = list(range(votes.shape[1])) if parents is None else list(parents)
    return EMExplorer(steps, votes, parents, names or [f"parent {j}" for j in parents], iteration)
