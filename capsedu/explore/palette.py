r"""The course's colours: readable with any colour vision, and never the only clue.

* :data:`OKABE_ITO` - the eight colours of Okabe & Ito (2008), distinct for the three common
  colour-vision deficiencies; categories (lines, bars, points) take their colours from it, in
  this order (the darkest first: blue, vermillion and bluish green stand out on white);
* named entries :data:`BLUE`, :data:`VERMILLION`, ... for figures that give a colour a meaning;
* :data:`SEQUENTIAL_MAPS`, :data:`DIVERGING_MAPS`, :data:`GREY_MAPS` - the colour maps the
  figures may use: perceptually uniform ones (viridis, cividis, ...) for magnitudes,
  ColorBrewer's colour-blind-safe red-blue and purple-orange for signed values around a centre,
  greys for images;
* :data:`TEXT_VERMILLION`, :data:`TEXT_GREEN`, :data:`MUTED_TEXT` - darker shades for text;
* :data:`LINE_STYLES` and :data:`HATCHES` - the second clue beside a colour: a line style or
  marker for each line, a hatch for each group of bars (WCAG 1.4.1: colour is not the only
  visual means of conveying information);
* :data:`COURSE_STYLE` - matplotlib settings a lesson applies with ``plt.style.use``: the
  Okabe-Ito cycle (so ``"C0"``, ``"C1"``, ... are its colours), viridis as the default map.

Text in figures keeps a contrast of at least 4.5:1 with what it sits on (WCAG 1.4.3); the
course's tests check every figure a lesson draws (``coursetools.figure_audit``).

Shape legend: none (colours are RGB hex strings or matplotlib colour-map names)
"""

from __future__ import annotations

from cycler import cycler

BLACK = "#000000"
ORANGE = "#E69F00"
SKY_BLUE = "#56B4E9"
BLUISH_GREEN = "#009E73"
YELLOW = "#F0E442"
BLUE = "#0072B2"
VERMILLION = "#D55E00"
REDDISH_PURPLE = "#CC79A7"

# The order of the colour cycle: the colours with the most contrast against white first.
OKABE_ITO = (BLUE, VERMILLION, BLUISH_GREEN, REDDISH_PURPLE, ORANGE, SKY_BLUE, BLACK, YELLOW)

SEQUENTIAL_MAPS = ("viridis", "cividis", "magma", "inferno", "plasma", "Blues")
DIVERGING_MAPS = ("RdBu", "PuOr")
GREY_MAPS = ("gray", "Greys", "binary")
ALLOWED_MAPS = frozenset(name + suffix for name in SEQUENTIAL_MAPS + DIVERGING_MAPS + GREY_MAPS
                         for suffix in ("", "_r"))

# A category's colour for text (labels, titles), darkened where Okabe-Ito's own has less than
# 4.5:1 contrast on white: blue keeps its colour (5.2:1); vermillion (3.9:1) and bluish green
# (3.4:1) get darker shades (5.5:1, 5.3:1). Secondary text is MUTED_TEXT (5.7:1), never lighter.
TEXT_VERMILLION = "#B34700"
TEXT_GREEN = "#007A5A"
MUTED_TEXT = "0.4"

LINE_STYLES = ("-", "--", ":", "-.")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
HATCHES = ("", "//", "..", "xx", "\\\\", "oo")

COURSE_STYLE = {
    "axes.prop_cycle": cycler(color=OKABE_ITO),
    "image.cmap": "viridis",
}
