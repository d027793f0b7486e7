"""One vocabulary across the package: every subpackage's docstring lists its modules, ``check_*``
names only the learner's checks, every module has a Shape legend (or says it has no shapes) that
uses the letters of CONTRIBUTING.md's table with the table's meanings, and every inline shape
comment (``# (B, I, J, D)``) uses letters of the table that its module's legend lists."""

import ast
import re
import tokenize
from pathlib import Path

import pytest
from torch import nn

from capsedu.nets.registry import COURSE_NETWORKS, network_class

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "capsedu"
CHECKS = PACKAGE / "course" / "checks"
SOURCES = [PACKAGE, ROOT / "coursetools", ROOT / "benchmarks"]

SYMBOL = r"[A-Za-z](?:_[A-Za-z0-9]+)?"
ENTRY = re.compile(rf"^({SYMBOL}(?:,\s*{SYMBOL})*)\s+(\S.*)$")
EMBEDDED = re.compile(rf",\s+({SYMBOL})\s+(?:=\s*[\d,]+\s+)?[a-z]")  # "I inputs, J outputs", ", J = 10 classes"
HEADER = re.compile(r"^Shape legend(?: \([^)]*\))?:(.*)$")


def python_files(folder: Path) -> list[Path]:
    return sorted(path for path in folder.rglob("*.py") if "weights" not in path.parts)


def subpackages() -> list[Path]:
    return sorted(init.parent for init in PACKAGE.rglob("__init__.py") if init.parent != PACKAGE)


def members(package: Path) -> set[str]:
    r"""The modules (``name.py``) and subpackages of ``package``, without ``__init__``."""
    modules = {path.stem for path in package.glob("*.py") if path.stem != "__init__"}
    return modules | {path.parent.name for path in package.glob("*/__init__.py")}


def listed(docstring: str) -> set[str]:
    r"""The names a docstring lists, one a line: ``* ``name`` - ...`` or a table row ``name``."""
    return set(re.findall(r"^\s*(?:\* )?``(\w+)``", docstring, re.MULTILINE))


@pytest.mark.parametrize("package", subpackages(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_every_subpackage_docstring_lists_its_modules(package):
    docstring = ast.get_docstring(ast.parse((package / "__init__.py").read_text()))
    assert docstring, f"{package} has no docstring"
    names = listed(docstring)
    assert names == members(package), (
        f"{package.relative_to(ROOT)}/__init__.py's docstring lists {sorted(names)}; its modules are "
        f"{sorted(members(package))} (one ``name`` - what it holds line each)")


def test_check_names_only_the_learners_checks():
    r"""A guard that raises on a bad argument is ``require_*``; ``check_*`` is the learner's check."""
    found = []
    for folder in SOURCES:
        for path in python_files(folder):
            if CHECKS in path.parents:
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                        node.name.lstrip("_").startswith("check"):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}")
    assert not found, f"raising guards are named require_*, not check_*: {found}"


@pytest.mark.parametrize("path", [p for p in python_files(CHECKS) if not p.stem.startswith("_")],
                         ids=lambda p: p.stem)
def test_every_lessons_check_module_names_its_checks_check(path):
    names = [node.name for node in ast.parse(path.read_text()).body if isinstance(node, ast.FunctionDef)]
    assert any(name.startswith("check_") for name in names), f"{path.name} has no check_* function"


def shape_letters() -> dict[str, list[str]]:
    r"""CONTRIBUTING.md's "Shape letters" table: letter -> the words one of which a legend's line
    giving that letter's meaning contains."""
    text = (ROOT / "CONTRIBUTING.md").read_text()
    section = text.split("\n## Shape letters", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([A-Za-z])` \| [^|]+ \| ([^|]+) \|$", section, re.MULTILINE)
    return {letter: [word.strip().lower() for word in words.split(",")] for letter, words in rows}


def split_entries(line: str) -> list[str]:
    r"""``line`` split at the semicolons outside brackets."""
    pieces, depth, current = [], 0, ""
    for char in line:
        depth += (char in "([") - (char in ")]")
        if char == ";" and depth == 0:
            pieces.append(current)
            current = ""
        else:
            current += char
    return [piece.strip() for piece in [*pieces, current] if piece.strip()]


def legend(docstring: str) -> list[tuple[list[str], str]] | None:
    r"""The (letters, meaning) entries of a docstring's Shape legend, or None if it has none.

    A legend is the header line, ``Shape legend:`` (or ``Shape legend (a note):``), then indented
    lines ``LETTER  meaning`` (several letters of one meaning as ``C, H, W``; several entries on
    a line separated by ``;``) up to a blank line; a deeper-indented line continues the meaning.
    ``Shape legend: none ...`` says that a module has no shapes of its own."""
    lines = docstring.splitlines()
    start = next((k for k, line in enumerate(lines) if HEADER.match(line)), None)
    if start is None:
        return None
    rest = HEADER.match(lines[start]).group(1).strip()
    if rest.startswith("none"):
        return []
    raw = [rest] if rest else []
    indent = None
    for line in lines[start + 1:]:
        if not line.strip():
            break
        depth = len(line) - len(line.lstrip())
        assert depth > 0, f"a legend's lines are indented, got {line!r}"
        indent = depth if indent is None else indent
        if depth > indent and raw:
            raw[-1] += " " + line.strip()
        else:
            raw.append(line.strip())
    entries = []
    for line in raw:
        for piece in split_entries(line):
            match = ENTRY.match(piece)
            assert match, f"a legend entry is 'LETTER  meaning', got {piece!r}"
            letters = [letter.strip() for letter in match.group(1).split(",")]
            entries.append((letters, match.group(2)))
    return entries


def legends() -> list[tuple[str, list[tuple[list[str], str]]]]:
    found = []
    for folder in SOURCES:
        for path in python_files(folder):
            docstring = ast.get_docstring(ast.parse(path.read_text()), clean=False)
            if docstring and "Shape legend" in docstring:
                found.append((str(path.relative_to(ROOT)), docstring))
    return found


def test_the_table_of_shape_letters_is_read():
    table = shape_letters()
    assert {"B", "N", "I", "J", "D", "M", "K", "L", "r"} <= set(table) and all(table.values())
    assert "R" not in table  # EM's assignments: a tensor, not a shape letter


@pytest.mark.parametrize("path, docstring", legends(), ids=[path for path, _ in legends()])
def test_every_shape_legend_uses_the_table_letters_and_meanings(path, docstring):
    table = shape_letters()
    entries = legend(docstring)
    assert entries is not None, f"{path}: 'Shape legend' is not a legend header line"
    for letters, meaning in entries:
        embedded = EMBEDDED.search(meaning)
        assert not embedded, (f"{path}: {embedded.group(1)} is inside {letters}'s meaning "
                              f"{meaning!r}: one entry per line, or entries separated by ';'")
        for symbol in letters:
            letter = symbol.split("_")[0]
            assert letter in table, (f"{path}: {symbol} is not a shape letter of CONTRIBUTING.md "
                                     f"(its table: {sorted(table)})")
            assert any(word in meaning.lower() for word in table[letter]), (
                f"{path}: {symbol} ({meaning!r}) must mean what CONTRIBUTING.md's table says, "
                f"a line naming one of {table[letter]}")


def test_the_legend_parser_reads_every_form():
    docstring = ("Title.\n\nShape legend (note):\n    B      batch size;  N  images (of a split;\n"
                 "           or pairs)\n    C, H, W  channels, height, width\n\nMore text.\n")
    assert legend(docstring) == [(["B"], "batch size"), (["N"], "images (of a split; or pairs)"),
                                 (["C", "H", "W"], "channels, height, width")]
    assert legend("Title.\n\nShape legend: none (shapes are the caller's).\n") == []
    with pytest.raises(AssertionError, match="LETTER  meaning"):
        legend("Shape legend:\n    batch size B\n")


@pytest.mark.parametrize("kind", sorted(kind for kind in COURSE_NETWORKS if kind != "cnn"))
def test_every_capsule_network_calls_its_class_capsule_layer_class_caps(kind):
    cls = network_class(kind)
    model = cls(cls.config_class())
    assert isinstance(model.class_caps, nn.Module)
    assert any(layer is model.class_caps for layer in model.modules())
    assert not hasattr(model, "digits") and not hasattr(model, "classes")


def every_module() -> list[Path]:
    return [path for folder in SOURCES for path in python_files(folder)]


@pytest.mark.parametrize("path", every_module(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_module_has_a_shape_legend_or_says_it_has_none(path):
    docstring = ast.get_docstring(ast.parse(path.read_text()), clean=False)
    assert docstring and legend(docstring) is not None, (
        f"{path.relative_to(ROOT)}: its docstring has no 'Shape legend:' block (or "
        "'Shape legend: none (...)' for a module without tensor shapes)")


SYMBOL_ONLY = re.compile(rf"^{SYMBOL}$")


def comment_shapes(source: str) -> list[tuple[int, str, list[str]]]:
    r"""The shapes that ``source``'s comments give, as (line, comment, symbols): a bracket of
    comma-separated sizes - letters of the table, numbers, their products - with at least one
    capital letter (``(B, I, J, D_out)``, ``(N,)``, ``(2B, J, D)``); prose in brackets is not one."""
    found = []
    lines = iter(source.splitlines(keepends=True))
    for token in tokenize.generate_tokens(lambda: next(lines, "")):
        if token.type != tokenize.COMMENT:
            continue
        for inner in re.findall(r"\(([^()]*)\)", token.string):
            parts = [part.strip() for part in inner.split(",")]
            sizes = [part for part in parts if part]
            if len(parts) < 2 or not sizes or not all(re.fullmatch(r"[A-Za-z0-9_*+\-/ .]+", p) for p in sizes):
                continue
            symbols = [p for p in sizes if SYMBOL_ONLY.match(p)]
            plain = sum(1 for p in sizes if SYMBOL_ONLY.match(p) or p.isdigit())
            if any(p[0].isupper() for p in symbols) and plain >= len(sizes) / 2:
                found.append((token.start[0], token.string.strip(), symbols))
    return found


def test_the_comment_shape_reader_tells_shapes_from_prose():
    source = ("x = 1  # (B, I, J, D_out) votes\ny = 2  # (N,)\nz = 3  # (v, c), batch-independent\n"
              "w = 4  # (2B, J, D): each image twice\nq = 5  # see (Sabour et al., 2017)\n")
    assert [(line, symbols) for line, _, symbols in comment_shapes(source)] == [
        (1, ["B", "I", "J", "D_out"]), (2, ["N"]), (4, ["J", "D"])]


@pytest.mark.parametrize("path", every_module(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_inline_shape_comment_uses_its_modules_legend(path):
    source = path.read_text()
    entries = legend(ast.get_docstring(ast.parse(source), clean=False) or "") or []
    listed = {symbol.split("_")[0] for letters, _ in entries for symbol in letters}
    table = shape_letters()
    wrong = [f"line {line}: {symbol} in {comment!r}" + (" is not a shape letter of CONTRIBUTING.md"
                                                        if symbol.split("_")[0] not in table
                                                        else " is not in the module's Shape legend")
             for line, comment, symbols in comment_shapes(source) for symbol in symbols
             if symbol.split("_")[0] not in table or symbol.split("_")[0] not in listed]
    assert not wrong, f"{path.relative_to(ROOT)}: " + "; ".join(wrong)
