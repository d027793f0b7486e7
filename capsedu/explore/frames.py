r"""Explorers that move without a kernel: every picture computed in advance, chosen in the browser.

A live explorer (:mod:`capsedu.explore.widgets` and friends) recomputes its picture in Python each
time a slider moves, so on a static page (the course's Jupyter Book site, a notebook viewer) its
sliders are pictures of sliders. :class:`FrameExplorer` instead holds one PNG frame per slider
position, each in an ``ipywidgets.Image`` inside an ``ipywidgets.Stack``; the slider's index is
tied to the stack's ``selected_index`` by ``ipywidgets.jslink``, a link that runs in the browser.
The saved widget state carries the frames and the links, so the ipywidgets HTML manager of a
static page moves them exactly as JupyterLab does - no kernel, no server.

With two controls the frames form a grid: an outer stack (one child per outer position, chosen by
the outer control) of inner stacks (one frame per inner position, all tied to the inner control).
Identical frames share one ``Image`` (e.g. the zero offset of every dimension).

* :func:`compress_png` - a frame re-encoded with a palette of ``colours`` colours (a few KB).
* :func:`sweep` - frames of a live explorer, one per value of one or two of its controls.

Shape legend: none (the frames are ``rows`` lists - one per outer position, 1 for a single
control - of ``per_row`` frames, one per inner position).
"""

from __future__ import annotations

import functools
import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from PIL import Image

__all__ = ["CSS_CLASS", "Control", "FrameExplorer", "compress_png", "frame_alt", "sweep"]
CSS_CLASS = "capsedu-frames"


QUANTIZERS = {"mediancut": Image.Quantize.MEDIANCUT, "fastoctree": Image.Quantize.FASTOCTREE}


def compress_png(png: bytes | memoryview, colours: int = 96, method: str = "mediancut") -> bytes:
    r"""``png`` re-encoded with at most ``colours`` palette colours and full compression.

    ``method`` picks the palette: ``"mediancut"`` keeps faint tints apart (the coupling maps'
    near-white reds and blues), ``"fastoctree"`` gives smaller files where grey levels dominate
    (reconstructions)."""
    png = bytes(png) if isinstance(png, memoryview | bytearray) else png
    if not isinstance(png, bytes) or not png.startswith(b"\x89PNG"):
        raise TypeError("png must be the bytes of a PNG image")
    if not 2 <= colours <= 256:
        raise ValueError(f"colours must be in 2..256, got {colours}")
    if method not in QUANTIZERS:
        raise ValueError(f"method must be one of {sorted(QUANTIZERS)}, got {method!r}")
    image = Image.open(io.BytesIO(png)).convert("RGB")
    buffer = io.BytesIO()
    image.quantize(colors=colours, method=QUANTIZERS[method]).save(buffer, format="png", optimize=True)
    return buffer.getvalue()


@dataclass(frozen=True)
class Control:
    r"""One slider of a :class:`FrameExplorer`: its description and one label per position."""

    description: str
    labels: tuple[str, ...]
    start: int = 0  # the position shown first

    def __post_init__(self) -> None:
        if not self.labels:
            raise ValueError(f"control {self.description!r} needs at least one position (labels)")
        if not 0 <= self.start < len(self.labels):
            raise ValueError(f"start must be in 0..{len(self.labels) - 1}, got {self.start}")


class FrameExplorer:
    r"""Pictures ``frames[o][k]`` chosen by ``outer`` (position o) and ``inner`` (position k).

    ``frames`` is a list of ``rows`` lists of ``per_row`` PNG frames each; ``outer`` may be None
    when there is one row.
    ``note`` is shown under the sliders (say what the frames cover). ``alt`` says what every frame
    shows, for a reader who cannot see it: each frame's text alternative is ``alt`` and the slider
    positions that choose it (the image's ``tooltip``, its ``title`` in the browser; the book's
    page script makes it the ``alt`` too). Display the object (last line of a cell) to get the
    widget; ``widget`` is the ``VBox``, ``sliders`` its controls."""

    def __init__(self, frames: Sequence[Sequence[bytes]], inner: Control,
                 outer: Control | None = None, note: str = "", alt: str = "") -> None:
        import ipywidgets as widgets

        rows = len(outer.labels) if outer is not None else 1
        if len(frames) != rows or any(len(row) != len(inner.labels) for row in frames):
            raise ValueError(f"frames must be {rows} row(s) of {len(inner.labels)} PNG frames (one per "
                             f"position of each control), got {[len(row) for row in frames]}")
        shared: dict[bytes, Any] = {}  # identical frames share one Image model
        layout = widgets.Layout()  # and all frames one Layout model (each is saved with the page)
        images = [[shared.get(png) or shared.setdefault(png, _frame_image(
                       png, layout, frame_alt(alt, inner, k, outer, o)))
                    for k, png in enumerate(row)] for o, row in enumerate(frames)]  # rows x per_row
        self.frame_count, self.unique_frames = rows * len(inner.labels), len(shared)
        self.page_bytes = sum(len(png) for png in shared)
        self.inner_stacks = [widgets.Stack(row, selected_index=inner.start) for row in images]
        self.sliders = [_slider(inner)]
        self.links = [widgets.jslink((self.sliders[0], "index"), (stack, "selected_index"))
                      for stack in self.inner_stacks]  # run in the browser, kernel or not
        view = self.inner_stacks[0]
        if outer is not None:
            view = widgets.Stack(self.inner_stacks, selected_index=outer.start)
            self.sliders.insert(0, _slider(outer))
            self.links.append(widgets.jslink((self.sliders[0], "index"), (view, "selected_index")))
        self.view = view
        caption = [widgets.HTML(f"<small>{note}</small>")] if note else []
        self.widget = widgets.VBox([widgets.HBox(self.sliders), *caption, view])
        self.widget.add_class(CSS_CLASS)  # how the book's test finds the frame explorers

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.widget)


@functools.cache
def _frame_image_class() -> type:
    r"""``ipywidgets.Image`` with an empty ``description``: ipywidgets 8 draws a tooltip (the
    ``<img>``'s title) only for a model with a description - its views read the description's
    length first, and for a plain ``Image``, which has none, the view fails to render."""
    import ipywidgets as widgets
    from traitlets import Unicode

    class FrameImage(widgets.Image):
        description = Unicode("").tag(sync=True)

    return FrameImage


def _frame_image(png: bytes, layout: Any, text: str) -> Any:
    r"""One frame: its PNG, the shared ``layout``, and ``text`` as its tooltip."""
    return _frame_image_class()(value=png, format="png", layout=layout, tooltip=text)


def frame_alt(alt: str, inner: Control, k: int, outer: Control | None = None, o: int = 0) -> str:
    r"""The text alternative of frame ``(o, k)``: ``alt`` and the slider positions that show it."""
    where = [f"{c.description} {c.labels[i]}" for c, i in ((outer, o), (inner, k)) if c is not None]
    return f"{alt.rstrip('. ') or 'Explorer'}; {', '.join(where)}."


def _slider(control: Control) -> Any:
    r"""A selection slider over ``control``'s labels; its ``index`` drives the frames."""
    import ipywidgets as widgets

    return widgets.SelectionSlider(options=list(control.labels), index=control.start,
                                   description=control.description, continuous_update=True,
                                   style={"description_width": "initial"},
                                   layout=widgets.Layout(width="360px"))


def _grab(explorer: Any, colours: int) -> bytes:
    return compress_png(explorer.view.value, colours)


def sweep(explorer: Any, control: str, values: Sequence[Any], outer: str | None = None,
          outer_values: Sequence[Any] = (), note: str = "", colours: int = 96,
          label: Callable[[Any], str] = str, alt: str = "") -> FrameExplorer:
    r"""Frames of a live ``explorer``, one per value of its control ``control`` (an attribute
    holding an ipywidgets control, e.g. ``"iterations"``), and per value of ``outer`` if given.

    Each value is set on the live control (the explorer redraws itself) and its picture kept;
    the controls are set back to where they were, so the live explorer opens as before."""
    names = [control] + ([outer] if outer is not None else [])
    controls = [getattr(explorer, name, None) for name in names]
    for name, widget in zip(names, controls):
        if not hasattr(widget, "value"):
            raise ValueError(f"explorer {type(explorer).__name__} has no control {name!r}")
    if not values or (outer is not None and not outer_values):
        raise ValueError("values (and outer_values when outer is given) must not be empty")
    before = [widget.value for widget in controls]
    rows = []
    try:
        for outer_value in (outer_values if outer is not None else [None]):
            if outer is not None:
                controls[1].value = outer_value
            row = []
            for value in values:
                controls[0].value = value
                row.append(_grab(explorer, colours))
            rows.append(row)
    finally:
        for widget, value in zip(reversed(controls), reversed(before)):
            widget.value = value
    inner = Control(controls[0].description, tuple(label(v) for v in values), _start(values, before[0]))
    outer_control = (Control(controls[1].description, tuple(label(v) for v in outer_values),
                             _start(outer_values, before[1])) if outer is not None else None)
    return FrameExplorer(rows, inner, outer_control, note, alt)


def _start(values: Sequence[Any], current: Any) -> int:
    r"""The position of ``current`` among ``values`` (the live control's value), else 0."""
    values = list(values)
    return values.index(current) if current in values else 0
