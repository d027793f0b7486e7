r"""Render a matplotlib figure to PNG quickly when only a few of its artists change.

:class:`BlitRenderer` draws the figure's static parts (axes, ticks, labels, legends, colour bars)
once, keeps that background as pixels, and for each later frame restores it and draws only the
artists that change - the standard matplotlib *blitting* technique, here on an off-screen Agg
canvas whose pixels are then encoded as PNG for an ``ipywidgets.Image``. This is what keeps the
lesson-07 explorers within their latency goals on a laptop CPU. :class:`PngView` is what every
explorer shares: its figure panel, the renderer and the ``ipywidgets.Image`` that shows it.

Shape legend: none (no tensor shapes of its own).
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

from matplotlib.artist import Artist
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from PIL import Image


def figure_png(figure: Figure) -> bytes:
    r"""Draw the whole ``figure`` with Agg and return it as PNG bytes."""
    canvas = figure.canvas if isinstance(figure.canvas, FigureCanvasAgg) else FigureCanvasAgg(figure)
    buffer = io.BytesIO()
    canvas.print_png(buffer)
    return buffer.getvalue()


class BlitRenderer:
    r"""PNG frames of ``figure`` where only ``artists`` change between frames.

    Legends and other static parts stay in the background, so keep them clear of the changing
    artists (e.g. a legend outside the axes). Call :meth:`invalidate` after changing anything
    else (axis limits, colour scale, layout): the next frame then redraws the background. The
    first full draw fixes the layout (a constrained layout is computed once, then frozen) so
    that the saved background stays valid.
    """

    def __init__(self, figure: Figure, artists: Sequence[Artist], compress_level: int = 1) -> None:
        if not isinstance(figure, Figure):
            raise TypeError(f"figure must be a matplotlib Figure, got {type(figure).__name__}")
        self.figure, self.artists, self.compress_level = figure, list(artists), compress_level
        self.canvas = FigureCanvasAgg(figure)
        axes = list(dict.fromkeys(a.axes for a in self.artists if a.axes is not None))
        self.overlays = [spine for ax in axes if ax.axison
                         for spine in ax.spines.values() if spine.get_visible()]  # drawn on top
        for artist in self.artists + self.overlays:
            artist.set_animated(True)  # left out of the background, drawn on every frame
        self.background = None
        self.full_draws = 0

    def invalidate(self) -> None:
        r"""Redraw the static background on the next frame."""
        self.background = None

    def png(self) -> bytes:
        r"""One frame: the background (redrawn only if invalid) plus every changing artist."""
        if self.background is None:
            self.canvas.draw()
            self.figure.set_layout_engine("none")  # keep the positions the background was drawn with
            self.background = self.canvas.copy_from_bbox(self.figure.bbox)
            self.full_draws += 1
        else:
            self.canvas.restore_region(self.background)
        renderer = self.canvas.get_renderer()
        for artist in self.artists:
            artist.draw(renderer)
        for overlay in self.overlays:
            overlay.draw(renderer)
        width, height = self.canvas.get_width_height()
        frame = Image.frombuffer("RGBA", (width, height), self.canvas.buffer_rgba(), "raw", "RGBA",
                                 0, 1)
        buffer = io.BytesIO()
        frame.convert("RGB").save(buffer, format="png", compress_level=self.compress_level)
        return buffer.getvalue()


class PngView:
    r"""An explorer's view: ``panel`` (with ``.figure`` and the changing ``.artists``) rendered by a
    :class:`BlitRenderer` into one ``ipywidgets.Image``. Subclasses build ``self.widget`` (their
    controls around ``self.view``), update the panel, then call :meth:`redraw`."""

    def __init__(self, panel: Any) -> None:
        import ipywidgets as widgets

        self.view = widgets.Image(format="png")
        self.panel, self.figure = panel, panel.figure
        self.renderer = BlitRenderer(panel.figure, panel.artists)
        self.redraws = 0

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
