r"""The computation graph of one DigitCaps layer with its routing iterations unrolled (lesson 10).

:func:`routing_graph` draws Procedure 1 for ``r`` iterations as the graph autograd builds:

.. math::

    c^{(t)} = \operatorname{softmax}_j b^{(t)},\quad
    \mathbf s^{(t)}_j = \sum_i c^{(t)}_{ij}\hat{\mathbf u}_{j|i},\quad
    \mathbf v^{(t)} = \operatorname{squash}(\mathbf s^{(t)}),\quad
    b^{(t+1)} = b^{(t)} + \hat{\mathbf u}\cdot\mathbf v^{(t)}

The votes :math:`\hat{\mathbf u}` feed every :math:`\mathbf s^{(t)}` and every agreement
:math:`\hat{\mathbf u}\cdot\mathbf v^{(t)}`: ``2r - 1`` uses, so the backward pass *adds*
``2r - 1`` gradient contributions into :math:`\partial\hat{\mathbf u}`. The edges the gradient
follows with ``detach_inner=True`` (only the last iteration's sum, its couplings held fixed)
are drawn solid in vermillion; the extra ones ``detach_inner=False`` follows are drawn dashed in
blue; the edge no gradient follows, dotted in grey.

The boxes name their shapes.

Shape legend:
    B      batch size
    I      input capsules
    J      output capsules
    D      their capsule dimension
"""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from capsedu._validate import require_int
from capsedu.explore.palette import BLUE, VERMILLION

# Each kind of edge has its colour (palette.py) and its line style
DETACHED, FULL, FORWARD_ONLY = VERMILLION, BLUE, "0.45"
EDGE_STYLES = {DETACHED: "-", FULL: "--", FORWARD_ONLY: ":"}
ROWS = {"b": 3.0, "c": 2.0, "s": 1.0, "v": 0.0}
VOTES_Y = -1.6


def _box(ax, x: float, y: float, text: str, colour: str = "white") -> None:
    ax.text(x, y, text, ha="center", va="center", fontsize=11, zorder=3,
            bbox={"boxstyle": "round,pad=0.35", "facecolor": colour, "edgecolor": "0.3"})


def _arrow(ax, start: tuple[float, float], end: tuple[float, float], colour: str,
           bend: float = 0.0) -> None:
    ax.annotate("", xy=end, xytext=start, zorder=2,
                arrowprops={"arrowstyle": "-|>", "color": colour, "lw": 1.8,
                            "linestyle": EDGE_STYLES[colour], "shrinkA": 14, "shrinkB": 14,
                            "connectionstyle": f"arc3,rad={bend}"})


def _iteration(ax, t: int, x: float, last: bool) -> None:
    r"""Boxes and edges of iteration ``t`` at column ``x``; colour says which gradient uses an edge."""
    inner = FULL if not last else DETACHED
    _box(ax, x, ROWS["b"], rf"$b^{{({t})}}$")
    _box(ax, x, ROWS["c"], rf"$c^{{({t})}}$")
    _box(ax, x, ROWS["s"], rf"$\mathbf{{s}}^{{({t})}}$")
    _box(ax, x, ROWS["v"], rf"$\mathbf{{v}}^{{({t})}}$")
    _arrow(ax, (x, ROWS["b"]), (x, ROWS["c"]), FULL if t > 1 else FORWARD_ONLY)
    _arrow(ax, (x, ROWS["c"]), (x, ROWS["s"]), FULL)
    _arrow(ax, (x, ROWS["s"]), (x, ROWS["v"]), inner)
    _arrow(ax, (x - 0.45, VOTES_Y + 0.05), (x - 0.05, ROWS["s"]), inner, bend=-0.25)
    if not last:  # the agreement feeds the next iteration's logits
        agree = x + 0.5
        _box(ax, agree, 1.6, r"agreement" + "\n" + r"$\hat{\mathbf{u}}\cdot\mathbf{v}^{(" + str(t) + ")}$", colour="0.93")
        _arrow(ax, (x, ROWS["v"]), (agree, 1.6), FULL)
        _arrow(ax, (agree, VOTES_Y + 0.05), (agree, 1.6), FULL)
        _arrow(ax, (agree, 1.6), (x + 1, ROWS["b"]), FULL)
        _arrow(ax, (x, ROWS["b"]), (x + 1, ROWS["b"]), FULL)


def routing_graph(routing_iterations: int = 3) -> Figure:
    r"""Procedure 1 with ``routing_iterations`` iterations unrolled, from the votes to the loss."""
    require_int("routing_iterations", routing_iterations, minimum=1, maximum=5)
    r = routing_iterations
    fig = Figure(figsize=(3.2 + 1.9 * r, 5.2), layout="constrained")
    ax = fig.add_subplot()
    ax.add_patch(Rectangle((0.35, VOTES_Y - 0.3), r + 0.1, 0.55, facecolor="#fde0dd", edgecolor="0.3", zorder=3))
    ax.text(r / 2 + 0.4, VOTES_Y - 0.02, r"votes $\hat{\mathbf{u}}$ (B, I, J, D):"
            + f" {2 * r - 1} uses, so {2 * r - 1} gradient contributions add up", ha="center",
            va="center", fontsize=11, zorder=4)
    for t in range(1, r + 1):
        _iteration(ax, t, float(t), last=t == r)
    _box(ax, r + 0.9, ROWS["v"], r"$\|\mathbf{v}\|$" + "\n(B, J)")
    _box(ax, r + 0.9, ROWS["s"] + 0.2, "margin\nloss")
    _arrow(ax, (r, ROWS["v"]), (r + 0.9, ROWS["v"]), DETACHED)
    _arrow(ax, (r + 0.9, ROWS["v"]), (r + 0.9, ROWS["s"] + 0.2), DETACHED)
    ax.plot([], [], color=DETACHED, lw=1.8, label="gradient path with detach_inner=True (and False)")
    ax.plot([], [], color=FULL, lw=1.8, ls=EDGE_STYLES[FULL], label="extra gradient paths with detach_inner=False")
    ax.plot([], [], color=FORWARD_ONLY, lw=1.8, ls=EDGE_STYLES[FORWARD_ONLY], label=r"forward only ($b^{(1)} = 0$ is a constant)")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.02), ncol=1, frameon=False, fontsize=9)
    ax.set(xlim=(0.2, r + 1.5), ylim=(VOTES_Y - 0.6, ROWS["b"] + 0.5),
           title=f"Procedure 1 unrolled, r = {r}: the graph backpropagation walks backwards")
    ax.axis("off")
    return fig
