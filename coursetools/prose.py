r"""The prose guard: every measured number a lesson's text states is printed beside it or quoted.

A lesson's markdown may state a result only if one of the lesson's stored outputs prints it
(within the precision the prose gives: "98.8 %" is printed as 0.9876 or 98.76%), if the
lesson's own code sets it, or if it is quoted from a source named in the same clause (the paper,
a peer's README, a table or figure, a link). Numbers that move between runs - times and rates -
must be printed by code, so they are checked the same way. What counts as a measured number:
a decimal (``0.85``, ``1.407``), a percentage, a ratio (``3.7×``), or a number with a unit of
time, rate, memory or points. Counts and sizes (4,000 images, 16 dimensions), lesson, equation
and figure numbers are not checked; code spans, formulas and link targets are left out.

The style guard (:func:`long_sentences`, :func:`history_words`): a lesson teaches, it is not a
lab notebook - at most one sentence over 45 words, and no words of the course's production
history (which machine trained what, sessions, shipping rules); those live in the training record.

``python -m coursetools.prose [NN ...]`` lists the unsupported numbers of each lesson;
``--style`` lists its long sentences and history words instead.

Shape legend: none (no tensor shapes of its own).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
UNITS = r"(?:%|×|x\b|s\b|ms\b|µs\b|min\b|minutes?\b|seconds?\b|hours?\b|images/s|img/s|pairs/s|MiB\b|MB\b|GB\b|GiB\b|points?\b|pp\b)"
MEASURED = re.compile(rf"(?<![\w.,/×-])(\d{{1,3}}(?:,\d{{3}})+|\d+)(\.\d+)?(?=\s?{UNITS})(?!\s?×\s?\d)"
                      rf"|(?<![\w.,/×-])(\d+)(\.\d+)(?!\w|\.\d)")  # "0.5." ends a sentence; "1.2.3" is a version
ESTIMATE = re.compile(r"\babout \**\d+ minutes\b", re.IGNORECASE)  # a lesson's planned time, not a measurement
NUMBER = re.compile(r"(?<![\w.])-?\d{1,3}(?:,\d{3})+(?:\.\d+)?|(?<![\w.])-?\d+(?:\.\d+)?(?:e-?\d+)?")
SOURCES = re.compile(r"\bpaper|\bet al\b|\bTable \d|\bFigure \d|\bSection \d|\bAppendix|\bREADME|\barXiv|\]\(http|"
                     r"\breports?\b|\breported\b|\bquotes?\b|\bPuzzle|\bport\b|Keras|TensorFlow|"
                     r"\bgithub\b|\bhinton-problems|\bshinseung|\bXifengGuo|\byl-1993|\bMazzia|\bSabour|\bHinton",
                     re.IGNORECASE)
CLAUSES = re.compile(r"(?<=[.;:!?])\s+(?=[A-Z(*])|;\s|\s—\s|\s-\s|\bwhile\b|\bwhereas\b|\bagainst\b|\bbut\b|\bthan\b")


LONG = 45  # words in a sentence a learner reads in one breath
HISTORY = re.compile(r"\b(?:H100|H200|A100|lent|(?:one|this|a|the|later|next|each|that) session(?:'s)?|sessions|"
                     r"shipping rule|shipped because|rule fixed before|time budget|4,000-digit|what fitted)\b",
                     re.IGNORECASE)
BLOCKS = re.compile(r"\n\s*\n|\n(?=\s*(?:[-*+]|\d+\.)\s)|\n(?=\|)|\n(?=#)")
SENTENCES = re.compile(r"(?<=[.!?])\s+(?=[A-Z(*\"])")


def sentences(notebook: dict) -> list[tuple[int, str]]:
    r"""``(cell index, sentence)`` for every sentence of the markdown (paragraphs, list items,
    table rows and headings are separate; code, maths and link targets left out)."""
    found = []
    for index, cell in enumerate(notebook["cells"]):
        if cell["cell_type"] != "markdown":
            continue
        source = re.sub(r"```.*?```", " ", "".join(cell["source"]), flags=re.S)
        for block in BLOCKS.split(source):
            found += [(index, s.strip()) for s in SENTENCES.split(_prose(block)) if s.strip()]
    return found


def long_sentences(notebook: dict, limit: int = LONG) -> list[tuple[int, int, str]]:
    r"""``(cell index, words, sentence)`` for each sentence over ``limit`` words."""
    return [(i, len(s.split()), s) for i, s in sentences(notebook) if len(s.split()) > limit]


def history_words(notebook: dict) -> list[tuple[int, str, str]]:
    r"""``(cell index, word, sentence)`` for each word of the production history in the markdown."""
    return [(i, m.group(0), s) for i, s in sentences(notebook) for m in HISTORY.finditer(s)]


def _prose(markdown: str) -> str:
    text = re.sub(r"```.*?```", " ", markdown, flags=re.S)
    text = re.sub(r"\$\$.*?\$\$", " ", text, flags=re.S)
    text = re.sub(r"\$[^$\n]+\$", " ", text)
    text = re.sub(r"`[^`\n]+`", " ", text)
    text = re.sub(r"!\[[^\]]*\]\([^)]*\)", " ", text)
    text = re.sub(r"\]\((?!http)[^)]*\)", "]", text)
    text = re.sub(r"<[^>]+>", " ", text)
    return re.sub(r"\s+", " ", text)


def _value(text: str) -> float:
    return float(text.replace(",", ""))


def printed_numbers(notebook: dict) -> list[float]:
    r"""Every number the lesson's stored outputs print (text, not images) and its code sets."""
    found = []
    for cell in notebook["cells"]:
        if cell["cell_type"] != "code":
            continue
        texts = ["".join(cell["source"])]
        for output in cell.get("outputs", []):
            for text in (output.get("text"), output.get("data", {}).get("text/plain"),
                         output.get("data", {}).get("text/markdown")):
                texts.append("".join(text) if isinstance(text, list) else text or "")
        found += [_value(n) for text in texts for n in NUMBER.findall(text)]
    return found


def _supported(value: float, decimals: int, printed: list[float]) -> bool:
    tolerance = 0.5 * 10 ** -decimals + 1e-9
    return any(abs(w - value) <= tolerance or abs(100 * w - value) <= tolerance for w in printed)


def alt_text(cell: dict) -> str:
    r"""A figure cell's text alternative (myst-nb's ``mystnb.image.alt`` cell metadata), or ''."""
    return cell.get("metadata", {}).get("mystnb", {}).get("image", {}).get("alt", "")


def _read_texts(notebook: dict) -> list[tuple[int, str]]:
    r"""``(cell index, text)`` of what a reader reads: the markdown, and the figures' alt texts."""
    return [(index, "".join(cell["source"]) if cell["cell_type"] == "markdown" else alt_text(cell))
            for index, cell in enumerate(notebook["cells"])
            if cell["cell_type"] == "markdown" or alt_text(cell)]


def unsupported(notebook: dict) -> list[tuple[int, str, str]]:
    r"""``(cell index, number, clause)`` for each measured number of the markdown or of a figure's
    alt text that no output prints, no code sets and no source in its clause accounts for."""
    printed = printed_numbers(notebook)
    problems = []
    for index, text in _read_texts(notebook):
        for clause in CLAUSES.split(ESTIMATE.sub(" ", _prose(text))):
            if not clause or SOURCES.search(clause):
                continue
            for match in MEASURED.finditer(clause):
                whole, fraction = (match.group(1), match.group(2)) if match.group(1) else match.group(3, 4)
                fraction = fraction or ""
                if not _supported(_value(whole + fraction), max(len(fraction) - 1, 0), printed):
                    problems.append((index, whole + fraction, clause.strip()))
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("lessons", nargs="*", help="lesson numbers (default: all)")
    parser.add_argument("--style", action="store_true", help="list long sentences and history words")
    args = parser.parse_args(argv)
    paths = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    if args.lessons:
        paths = [p for p in paths if p.stem[:2] in args.lessons]
    if args.style:
        return _style(paths)
    total = 0
    for path in paths:
        problems = unsupported(json.loads(path.read_text()))
        total += len(problems)
        for index, number, clause in problems:
            print(f"{path.stem} cell {index}: {number}  <-  {clause[:160]}")
    print(f"{total} unsupported number(s)")
    return 1 if total else 0


def _style(paths: list[Path]) -> int:
    failing = 0
    for path in paths:
        notebook = json.loads(path.read_text())
        long, words = long_sentences(notebook), history_words(notebook)
        for index, count, sentence in long:
            print(f"{path.stem} cell {index}: {count} words  <-  {sentence[:160]}")
        for index, word, sentence in words:
            print(f"{path.stem} cell {index}: history word {word!r}  <-  {sentence[:160]}")
        print(f"{path.stem}: {len(long)} sentence(s) over {LONG} words, {len(words)} history word(s)")
        failing += len(long) > 1 or bool(words)
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
