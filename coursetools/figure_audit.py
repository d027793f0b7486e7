r"""Check a matplotlib figure against the course's colour rules (WCAG 2.1 1.4.1 and 1.4.3).

    problems(figure) -> list[str]      # [] when the figure keeps every rule

1. Colour maps are the course's (:data:`capsedu.explore.palette.ALLOWED_MAPS`: viridis and its
   kin, ColorBrewer's colour-blind-safe diverging maps, greys) - no jet, tab10 or coolwarm.
2. Lines, bars and points take their colours from Okabe-Ito, greys, or an allowed map.
3. Colour is never the only clue: two lines of one axes that differ in colour differ in line
   style or marker too; bars of different colours differ in hatch; scatter groups of different
   colours differ in marker; one scatter does not colour its points by category without a map.
4. Every text drawn has a contrast of at least 4.5:1 (3:1 from 18 pt, or 14 pt bold) with the
   median of the pixels it covers, measured on a rendering without the figure's texts.

As an IPython extension it checks every figure a kernel renders - shown inline or saved, as the
explorers' frames are - and appends the problems as JSON lines to the file named by
``CAPSEDU_FIGURE_AUDIT``. :func:`audited_kernels` prepares the kernels started afterwards (the
test suite, which fails the notebook cell that drew the figure, and ``coursetools.execute``, which
reports them); :func:`logged_problems` reads the log.

Shape legend: none (a rendered figure is a (height, width, 4) array of RGBA bytes)
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
from matplotlib import colormaps
from matplotlib.backend_bases import FigureCanvasBase
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.cm import ScalarMappable
from matplotlib.collections import PathCollection
from matplotlib.colors import to_rgb, to_rgba
from matplotlib.container import BarContainer, ErrorbarContainer
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.text import Text

from capsedu.explore.palette import ALLOWED_MAPS, OKABE_ITO

AUDIT_ENV = "CAPSEDU_FIGURE_AUDIT"
REPO = Path(__file__).resolve().parents[1]
TOLERANCE = 0.02  # RGB distance within which two colours are one
_MAP_SAMPLES = {name: colormaps[name](np.linspace(0, 1, 256))[:, :3] for name in sorted(ALLOWED_MAPS)}
_PALETTE = np.array([to_rgb(colour) for colour in OKABE_ITO])


def problems(figure: Figure) -> list[str]:
    r"""What in ``figure`` breaks the course's colour rules, one sentence each (see the module)."""
    found = []
    for ax in figure.axes:
        where = _name(ax)
        found += [f"{where}: {text}" for text in [*_map_problems(ax), *_colour_problems(ax),
                                                      *_colour_alone_problems(ax)]]
    found += _contrast_problems(figure)
    return list(dict.fromkeys(found))


def _name(ax) -> str:
    title = ax.get_title() or ax.get_ylabel() or ax.figure.get_suptitle() or "untitled axes"
    return f"axes {title!r}"


def _map_problems(ax) -> Iterator[str]:
    mappables = [a for a in ax.get_children() if isinstance(a, ScalarMappable)]
    for artist in mappables:
        if _maps_data(artist) and artist.get_cmap().name not in ALLOWED_MAPS:
            yield (f"colour map {artist.get_cmap().name!r} is not colour-blind safe; use one of "
                   "capsedu.explore.palette.ALLOWED_MAPS (viridis, cividis, RdBu, gray, ...)")


def _maps_data(artist) -> bool:
    r"""Whether the artist colours by values through its map (not an RGB image, not plain points)."""
    array = artist.get_array()
    if array is None or getattr(artist, "colors", None) is not None:  # contours in given colours
        return False
    return not (hasattr(artist, "get_extent") and np.ndim(array) == 3)


def _is_allowed_colour(rgb) -> bool:
    rgb = np.asarray(rgb[:3])
    if np.ptp(rgb) < TOLERANCE:  # a grey, black or white
        return True
    if np.abs(_PALETTE - rgb).max(axis=1).min() < TOLERANCE:
        return True
    return any(np.abs(samples - rgb).max(axis=1).min() < TOLERANCE for samples in _MAP_SAMPLES.values())


def _drawn_colours(ax) -> Iterator[tuple[str, tuple]]:
    for line in _data_lines(ax):
        yield f"line {line.get_label()!r}", to_rgba(line.get_color())
    for patch in _bars(ax):
        yield f"bar {patch.get_label()!r}", patch.get_facecolor()
    for collection in ax.collections:
        if isinstance(collection, PathCollection) and not _maps_data(collection):
            for colour in collection.get_facecolors():
                yield f"points {collection.get_label()!r}", tuple(colour)


def _colour_problems(ax) -> Iterator[str]:
    for what, rgba in _drawn_colours(ax):
        if rgba[3] > 0 and not _is_allowed_colour(rgba):
            hex_colour = "#{:02x}{:02x}{:02x}".format(*(round(255 * c) for c in rgba[:3]))
            yield (f"{what} is drawn in {hex_colour}, outside the Okabe-Ito palette "
                   "(capsedu.explore.palette.OKABE_ITO), greys and the allowed maps")


def _data_lines(ax) -> list[Line2D]:
    r"""The visible lines of two points or more, but error bars' caps (their series' line tells
    the series apart; the caps take its colour)."""
    caps = {id(cap) for container in ax.containers if isinstance(container, ErrorbarContainer)
            for cap in container.lines[1]}
    return [line for line in ax.lines
            if line.get_visible() and len(line.get_xdata()) >= 2 and id(line) not in caps]


def _bars(ax) -> list:
    return [patch for container in ax.containers if isinstance(container, BarContainer)
            for patch in container.patches if patch.get_visible()]


def _same_colour(first, second) -> bool:
    return np.abs(np.asarray(first[:3]) - np.asarray(second[:3])).max() < TOLERANCE


def _colour_alone_problems(ax) -> Iterator[str]:
    lines = [(line, to_rgba(line.get_color()), (line.get_linestyle(), str(line.get_marker())))
             for line in _data_lines(ax)]
    yield from _pairs_told_apart_by_colour(lines, "lines", "a line style or marker")
    bars = [(bar, bar.get_facecolor(), bar.get_hatch() or "") for bar in _bars(ax)]
    yield from _pairs_told_apart_by_colour(bars, "bars", "a hatch")
    groups = []
    for collection in ax.collections:
        if not isinstance(collection, PathCollection) or _maps_data(collection):
            continue
        colours = np.unique(np.round(collection.get_facecolors()[:, :3], 2), axis=0)
        if len(colours) > 1:
            yield (f"points {collection.get_label()!r} take {len(colours)} colours in one scatter: "
                   "draw each group apart, with its own marker")
        elif len(colours) == 1:
            shape = collection.get_paths()[0].vertices.round(3).tobytes() if collection.get_paths() else b""
            groups.append((collection, tuple(colours[0]) + (1.0,), shape))
    yield from _pairs_told_apart_by_colour(groups, "point groups", "a marker")


def _pairs_told_apart_by_colour(items, kind: str, cue: str) -> Iterator[str]:
    r"""``items``: (artist, rgba, other cue); a problem for the first pair told apart only by colour
    (one per kind and axes is enough to name the fix)."""
    for index, (first, first_colour, first_cue) in enumerate(items):
        for second, second_colour, second_cue in items[index + 1:]:
            if first_cue == second_cue and not _same_colour(first_colour, second_colour):
                yield (f"{kind} {first.get_label()!r} and {second.get_label()!r} differ only in "
                       f"colour: give them {cue} too")
                return


def _contrast_problems(figure: Figure) -> list[str]:
    texts, background = _texts_and_background(figure)
    found = []
    for text, box in texts:
        ratio = _contrast(text, box, background)
        size, bold = text.get_fontsize(), str(text.get_fontweight()) in ("bold", "heavy", "700", "800")
        needed = 3.0 if size >= 18 or (size >= 14 and bold) else 4.5
        if ratio is not None and ratio < needed:
            found.append(f"text {text.get_text()[:40]!r} has contrast {ratio:.1f}:1 with what it "
                         f"sits on (needs {needed}:1): use a darker colour or a plain background")
    return found


def _texts_and_background(figure: Figure):
    r"""The texts a rendering draws, their pixel boxes, and the RGBA rendering without them."""
    original_canvas, original_draw, drawn = figure.canvas, Text.draw, []

    def recording_draw(text, renderer):
        if text.get_visible() and text.get_text().strip():
            drawn.append(text)
        return original_draw(text, renderer)

    canvas = FigureCanvasAgg(figure)
    try:
        Text.draw = recording_draw
        canvas.draw()
        Text.draw = original_draw
        renderer = canvas.get_renderer()
        texts = [(text, text.get_window_extent(renderer)) for text in dict.fromkeys(drawn)]
        for text, _ in texts:
            text.set_visible(False)
        engine = figure.get_layout_engine()
        figure.set_layout_engine("none")  # the axes stay where the texts left them
        canvas.draw()
        figure.set_layout_engine(engine)
        background = np.asarray(canvas.buffer_rgba()).copy()  # (height, width, 4)
    finally:
        Text.draw = original_draw
        for text in drawn:
            text.set_visible(True)
        figure.set_canvas(original_canvas)
    return texts, background


def _contrast(text: Text, box, background: np.ndarray) -> float | None:
    height, width = background.shape[:2]
    x0, x1 = max(int(box.x0), 0), min(int(np.ceil(box.x1)), width)
    y0, y1 = max(int(height - box.y1), 0), min(int(np.ceil(height - box.y0)), height)
    if x1 <= x0 or y1 <= y0:
        return None
    pixels = background[y0:y1, x0:x1].reshape(-1, 4) / 255.0
    rgb = pixels[:, :3] * pixels[:, 3:] + (1 - pixels[:, 3:])  # over white
    behind = np.median(_luminance(rgb))
    patch = text.get_bbox_patch()
    if patch is not None:
        face = np.asarray(patch.get_facecolor())
        behind = _luminance(face[:3] * face[3] + _inverse_luminance(behind) * (1 - face[3]))
    colour = np.asarray(to_rgba(text.get_color(), text.get_alpha()))
    ink = _luminance(colour[:3] * colour[3] + _inverse_luminance(behind) * (1 - colour[3]))
    light, dark = max(ink, behind), min(ink, behind)
    return float((light + 0.05) / (dark + 0.05))


def _luminance(rgb) -> np.ndarray:
    r"""WCAG relative luminance of sRGB colours (..., 3) in [0, 1]."""
    rgb = np.asarray(rgb, dtype=float)
    linear = np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
    return linear @ np.array([0.2126, 0.7152, 0.0722])


def _inverse_luminance(luminance) -> np.ndarray:
    r"""The grey (3,) whose relative luminance is ``luminance``."""
    value = float(luminance)
    channel = value * 12.92 if value <= 0.0031308 else 1.055 * value ** (1 / 2.4) - 0.055
    return np.full(3, channel)


_LOCAL = threading.local()  # busy while this thread audits (the audit's own renderings are not audited)


def load_ipython_extension(ipython) -> None:
    r"""Audit every figure the kernel renders, when ``CAPSEDU_FIGURE_AUDIT`` names a log file."""
    if getattr(FigureCanvasBase.print_figure, "_capsedu_audit", False):
        return
    original = FigureCanvasBase.print_figure

    def print_figure(canvas, *args, **kwargs):
        log = os.environ.get(AUDIT_ENV)
        if log and not getattr(_LOCAL, "busy", False):
            _LOCAL.busy = True
            try:
                found = problems(canvas.figure)
            finally:
                _LOCAL.busy = False
            if found:
                with open(log, "a", encoding="utf-8") as stream:
                    stream.write(json.dumps({"problems": found}) + "\n")
        return original(canvas, *args, **kwargs)

    print_figure._capsedu_audit = True
    FigureCanvasBase.print_figure = print_figure


def audited_kernels(folder: Path, figure_formats: tuple[str, ...] = ("png",)) -> dict[str, str]:
    r"""The environment (``IPYTHONDIR`` and the log's path) under which IPython kernels load this
    extension: an IPython folder inside ``folder`` whose kernel configuration puts the repository
    on the path (kernels start in notebooks/, and coursetools is not installed) and loads it.
    ``figure_formats``: what each inline figure is stored as (``("png", "pdf")`` adds a vector
    copy beside the picture, as :mod:`coursetools.execute` stores them for the slides' figures)."""
    profile = Path(folder) / "ipython" / "profile_default"
    profile.mkdir(parents=True, exist_ok=True)
    (profile / "ipython_kernel_config.py").write_text(
        f"import sys\nsys.path.append({str(REPO)!r})\n"
        f"c.InteractiveShellApp.extensions = [{__name__!r}]\n"
        f"c.InlineBackend.figure_formats = {set(figure_formats)!r}\n", encoding="utf-8")
    log = Path(folder) / "figures.jsonl"
    log.touch()
    return {"IPYTHONDIR": str(profile.parent), AUDIT_ENV: str(log)}


def logged_problems(log: Path, start: int = 0) -> list[str]:
    r"""The problems the kernels logged in ``log`` after its first ``start`` bytes."""
    with Path(log).open(encoding="utf-8") as stream:
        stream.seek(start)
        return [problem for line in stream for problem in json.loads(line)["problems"]]
