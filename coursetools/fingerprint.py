r"""What produced a lesson's stored outputs: the code it runs, the weights, studies and data it reads.

A lesson's *fingerprint* is a dict of content digests (the first 16 hex digits of SHA-256). Code
is hashed as what executes - its syntax tree, so that a comment, a docstring or a reflowed line
changes nothing, and a changed expression changes the digest:

* ``lesson`` - its code cells (markdown does not change outputs; comments neither), and the
  IPython magics and shell escapes among them;
* ``modules`` - every ``capsedu`` module that the code really uses (a module whose source the
  code prints - ``inspect.getsource``, ``help``, ``__doc__`` - counts with its whole text): the modules it imports, the
  modules behind the public names it takes from ``capsedu`` (``capsedu.squash`` is
  :mod:`capsedu.nets.squash`: importing ``capsedu`` itself loads nothing, PEP 562), the network
  module of each shipped network it loads, and, from each of them, the modules they import
  (function bodies included) with the package ``__init__`` files that importing them runs - but
  for the import edges of :data:`NOT_OUTPUT_AFFECTING`, each documented with why. The
  top-level ``capsedu/__init__.py`` counts with only the public names the lesson uses;
* ``weights`` - the metrics JSON of every shipped network the code or those modules (other than
  :mod:`capsedu.zoo.shipped`, which defines them) load with ``pretrained(...)`` /
  ``pretrained_metrics(...)`` (the JSON records the checkpoint's SHA-256); a name that is not a
  string literal counts as every shipped network;
* ``studies`` - the recorded experiment results the code prints with ``study(...)``
  (``capsedu/zoo/studies/NAME.json``);
* ``data`` - what ``load_mnist`` reads for each split: the content digest of the official IDX
  files (compression does not matter) or of the offline subset and which part of it.

:mod:`coursetools.execute` stores it in the executed notebook's metadata; the test suite
recomputes it and names the lessons whose outputs no longer come from today's code. The data
part is compared with :data:`CANONICAL_DATA` - the complete official MNIST that the committed
outputs are made with - so the check gives the same answer on every machine.

Shape legend: none (no tensor shapes of its own).
"""

from __future__ import annotations

import ast
import gzip
import hashlib
import json
import os
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

import nbformat

from capsedu.data import mnist

ROOT = Path(__file__).resolve().parents[1]  # the repository
PACKAGE = ROOT / "capsedu"

# Import edges the module closure does not follow, {importer: modules it imports}: the import runs
# only where it cannot change a lesson's outputs. The package imports what it needs, plainly; this
# list, not the package's import style, says what the fingerprint ignores.
NOT_OUTPUT_AFFECTING: dict[str, frozenset[str]] = {
    # shipped.py imports the recipes (and through them every network module: EM routing, ...)
    # only to word the error for a network that is not there; what pretrained() returns comes
    # from the checkpoint's kind, whose module _network_modules adds
    "capsedu.zoo.shipped": frozenset({"capsedu.zoo.recipes"}),
}

CALLS_THAT_LOAD_WEIGHTS = {"pretrained", "pretrained_metrics"}
CALLS_THAT_LOAD_STUDIES = {"study"}
DEFAULT_WEIGHTS = "capsnet"
# The data the committed outputs are made with: the complete MNIST, the official 60,000 training
# and 10,000 test images (the same content wherever they come from: a torchvision download,
# CAPSEDU_DATA at ../shared/data/mnist-full on the course machines), what a learner with a network has.
CANONICAL_DATA = {
    "test": "MNIST files 18489308deedfe2f",
    "train": "MNIST files c5097fdd51cfdbe7",
}


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def code_of(notebook: nbformat.NotebookNode) -> str:
    r"""The notebook's code cells, in order, as one string."""
    return "\n\n# %%\n".join(c.source for c in notebook.cells if c.cell_type == "code")


@lru_cache(maxsize=64)
def _lesson_code(path: str, mtime_ns: int) -> str:
    r"""A lesson's code, read once per version of its file (lessons are megabytes of outputs)."""
    return code_of(nbformat.read(path, as_version=4))


def parseable(code: str) -> str:
    r"""``code`` with IPython's line magics and shell escapes (``%matplotlib inline``, ``!ls``)
    commented out, so that :mod:`ast` can read the rest (:func:`magics` lists them)."""
    return "\n".join(f"# {line}" if line.lstrip().startswith(("%", "!")) else line
                     for line in code.splitlines())


def magics(code: str) -> list[str]:
    r"""The line magics and shell escapes of ``code``, in order: they run too."""
    return [line.strip() for line in code.splitlines() if line.lstrip().startswith(("%", "!"))]


def _canonical(node: object) -> str:
    r"""A syntax tree as text: node types and field values, no positions; empty fields are left
    out, so that the fields newer Pythons add (empty by default) do not change it."""
    if isinstance(node, ast.AST):
        fields = [f"{name}={_canonical(value)}" for name, value in ast.iter_fields(node)
                  if value is not None and value != []]
        return f"{type(node).__name__}({','.join(fields)})"
    if isinstance(node, list):
        return f"[{','.join(_canonical(item) for item in node)}]"
    return repr(node)


def _without_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                and body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            node.body = body[1:] or [ast.Pass()]
    return tree


@lru_cache(maxsize=4096)
def parse(source: str) -> ast.Module:
    r""":func:`ast.parse`, remembered by text (a lesson's fingerprint reads the same modules many times)."""
    return ast.parse(source)


@lru_cache(maxsize=4096)
def code_digest(source: str, *, docstrings: bool = False) -> str:
    r"""The digest of what ``source`` executes: its syntax tree, without comments and (unless
    ``docstrings``) without docstrings."""
    tree = ast.parse(source)
    return digest(_canonical(tree if docstrings else _without_docstrings(tree)).encode())


Reader = Callable[[Path], str]


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _module_file(name: str) -> Path | None:
    r"""The source file of capsedu module ``name`` (a package's ``__init__.py``), or None."""
    if name != "capsedu" and not name.startswith("capsedu."):
        return None
    relative = Path(*name.split("."))
    for candidate in (ROOT / relative / "__init__.py", ROOT / relative.with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


def _imported_names(tree: ast.AST) -> set[str]:
    r"""Module names an AST imports (``from a import b`` also yields ``a.b``, which may be a module)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
            names |= {f"{node.module}.{alias.name}" for alias in node.names}
    return names


@lru_cache(maxsize=4096)
def _source_imports(source: str) -> frozenset[str]:
    return frozenset(_imported_names(parse(source)))


@lru_cache(maxsize=4096)
def _source_loads(source: str, calls: frozenset[str], every: tuple[str, ...]) -> frozenset[str]:
    return frozenset(weights_loaded([parse(source)], set(calls), list(every)))


def public_names(read: Reader = _read) -> dict[str, str]:
    r"""``capsedu``'s lazily loaded names and subpackages: ``{name: module}`` (from its ``_MODULES``
    table and ``_SUBPACKAGES``, read from the source)."""
    table: dict[str, str] = {}
    for node in parse(read(PACKAGE / "__init__.py")).body:
        target = node.targets[0].id if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name) else ""
        if target == "_MODULES":
            table.update({name: module for module, names in ast.literal_eval(node.value).items() for name in names})
        elif target == "_SUBPACKAGES":
            table.update({name: f"capsedu.{name}" for name in ast.literal_eval(node.value)})
    return table


def capsedu_names_used(tree: ast.AST) -> set[str]:
    r"""Names taken from the top-level ``capsedu``: ``capsedu.NAME`` (after ``import capsedu [as x]``)
    and ``from capsedu import NAME``; ``from capsedu import *`` takes them all."""
    aliases, used = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            aliases |= {alias.asname or "capsedu" for alias in node.names if alias.name == "capsedu"}
        elif isinstance(node, ast.ImportFrom) and node.module == "capsedu" and node.level == 0:
            used |= {alias.name for alias in node.names}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
            used.add(node.attr)
    return used


SHOWS_SOURCE = {"getsource", "getsourcelines", "getdoc", "help"}


def modules_shown(tree: ast.AST, table: dict[str, str]) -> set[str]:
    r"""capsedu modules whose text the code prints (``inspect.getsource(x)``, ``help(x)``,
    ``x.__doc__``): their comments and docstrings are part of its outputs."""
    bound: dict[str, str] = {}  # a name in the lesson -> the capsedu module it is or comes from
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            bound |= {(a.asname or a.name).split(".")[0]: a.name for a in node.names if a.name.startswith("capsedu")}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("capsedu") and node.level == 0:
            for a in node.names:
                full = f"{node.module}.{a.name}"
                bound[a.asname or a.name] = full if _module_file(full) else table.get(a.name, node.module)
    shown: set[str] = set()
    for node in ast.walk(tree):
        target = None
        if isinstance(node, ast.Call) and (getattr(node.func, "attr", None) or getattr(node.func, "id", None)) in SHOWS_SOURCE:
            target = node.args[0] if node.args else None
        elif isinstance(node, ast.Attribute) and node.attr == "__doc__":
            target = node.value
        chain = []
        while isinstance(target, ast.Attribute):
            chain.insert(0, target.attr)
            target = target.value
        if isinstance(target, ast.Name) and target.id in bound:
            module = bound[target.id]
            if module == "capsedu" and chain:
                module = table.get(chain[0], "capsedu")
            shown.add(module)
    return shown


def _with_parents(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


def _followed(importer: str, imported: str, ignored: dict[str, frozenset[str]]) -> bool:
    r"""Whether the closure follows ``importer``'s import of ``imported`` (a module, or a name in one)."""
    skipped = ignored.get(importer, ())
    return not any(imported == skip or imported.startswith(f"{skip}.") for skip in skipped)


def module_closure(tree: ast.AST, read: Reader = _read, extra: set[str] = frozenset(),
                   ignored: dict[str, frozenset[str]] = NOT_OUTPUT_AFFECTING) -> dict[str, Path]:
    r"""Every capsedu module that executing ``tree`` runs, as ``{dotted name: file}``: what it
    imports, the modules behind the ``capsedu`` names it uses, ``extra`` modules, and theirs - but
    for the ``ignored`` import edges (``{importer: imported modules}``)."""
    table = public_names(read)
    used = capsedu_names_used(tree)
    wanted = set(table.values()) if "*" in used else {table[name] for name in used if name in table}
    found: dict[str, Path] = {}
    pending = [n for name in _imported_names(tree) | wanted | set(extra) for n in _with_parents(name)]
    while pending:
        name = pending.pop()
        path = _module_file(name)
        if name in found or path is None:
            continue
        found[name] = path
        pending += [n for sub in _source_imports(read(path)) if _followed(name, sub, ignored)
                    for n in _with_parents(sub)]
    return found


def available_weights() -> list[str]:
    from capsedu.zoo.shipped import available

    return available()


def _strings_in(node: ast.AST | None) -> set[str]:
    return {n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)} if node else set()


def _loop_values(tree: ast.AST, variable: str) -> set[str] | None:
    r"""The strings a loop variable can take when every loop binding it runs over a literal (or a
    name assigned a literal, or its ``.items()``/``.values()``/``.keys()``): all the strings in
    it - a superset. None when a binding is anything else."""
    assigned = {t.id: node.value for node in ast.walk(tree) if isinstance(node, ast.Assign)
                for t in node.targets if isinstance(t, ast.Name)}
    found: set[str] = set()
    loops = [n for n in ast.walk(tree) if isinstance(n, (ast.For, ast.comprehension))
             and variable in {t.id for t in ast.walk(n.target) if isinstance(t, ast.Name)}]
    for loop in loops:
        source = loop.iter
        if isinstance(source, ast.Call) and isinstance(source.func, ast.Attribute) and \
                source.func.attr in ("items", "values", "keys"):
            source = source.func.value
        if isinstance(source, ast.Call) and getattr(source.func, "id", "") == "zip":
            source = ast.Tuple(elts=list(source.args))
        source = assigned.get(source.id) if isinstance(source, ast.Name) else source
        if not isinstance(source, (ast.Tuple, ast.List, ast.Dict, ast.Set)):
            return None
        found |= _strings_in(source)
    return found if loops else None


def weights_loaded(trees: list[ast.AST], calls: set[str] = CALLS_THAT_LOAD_WEIGHTS,
                   every: list[str] | None = None) -> set[str]:
    r"""Names that calls of ``calls`` (default: ``pretrained``/``pretrained_metrics``) load.

    A loop variable over literals counts as the known names among their strings; any other name
    that is not a string literal counts as ``every`` name (default: every shipped network).
    """
    every = available_weights() if every is None else every
    names: set[str] = set()
    for tree in trees:
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if func not in calls:
                continue
            given = node.args[0] if node.args else next(
                (k.value for k in node.keywords if k.arg == "name"), None)
            if given is None:
                names.add(DEFAULT_WEIGHTS)
            elif isinstance(given, ast.Constant) and isinstance(given.value, str):
                names.add(given.value)
            else:
                values = _loop_values(tree, given.id) if isinstance(given, ast.Name) else None
                names |= set(every) if values is None else values & set(every)
    return names


def _idx_digest(paths: tuple[Path, Path]) -> str:
    hasher = hashlib.sha256()
    for path in paths:
        hasher.update(gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes())
    return hasher.hexdigest()[:16]


def data_identity(root: str | os.PathLike | None = None) -> dict[str, str]:
    r"""What ``load_mnist(split, root)`` reads for each split, as a short description and digest.

    A split without files counts as the offline subset (a torchvision download writes files
    into the root, so executing a lesson first and asking afterwards sees them).
    """
    folder = mnist.data_root(root)
    found = {split: mnist._find_files(folder, split) for split in ("train", "test")}
    offline = digest(mnist.OFFLINE_FILE.read_bytes())  # the offline subset, as capsedu.data.mnist reads it
    identity = {}
    for split, files in found.items():
        if files is not None:
            identity[split] = f"MNIST files {_idx_digest(files)}"
        else:
            part = "all" if split == "train" and found["test"] is not None else split
            identity[split] = f"offline subset ({part}) {offline}"
    return identity


def _network_modules(weights: set[str], read: Reader) -> set[str]:
    r"""The module of each shipped network's kind: the registry imports it by name, on first use."""
    from capsedu.nets.registry import COURSE_NETWORKS
    from capsedu.zoo.shipped import shipped_paths

    kinds = {json.loads(read(shipped_paths(name)[1])).get("kind") for name in weights}
    return {COURSE_NETWORKS[kind].partition(":")[0] for kind in kinds if kind in COURSE_NETWORKS}


def _module_digest(name: str, path: Path, used: set[str], read: Reader, shown: set[str]) -> str:
    r"""A module's code digest - its whole text when the lesson prints its source; the top-level
    package's counts only the public names used."""
    if name in shown:
        return digest(read(path).encode())
    if name != "capsedu":
        return code_digest(read(path))
    tree = _without_docstrings(ast.parse(read(path)))
    tree.body = [node for node in tree.body if not (isinstance(node, ast.Assign) and any(
        isinstance(t, ast.Name) and t.id in ("_MODULES", "_SUBPACKAGES") for t in node.targets))]
    table = public_names(read)
    entries = sorted((item, table[item]) for item in (set(table) if "*" in used else used) if item in table)
    return digest((_canonical(tree) + repr(entries)).encode())


def lesson_fingerprint(notebook_path: str | os.PathLike, data: dict[str, str] | None = None, *,
                       read: Reader = _read) -> dict[str, Any]:
    r"""The fingerprint of the lesson ``notebook_path`` (an ``.ipynb``), with ``data`` as its data
    part (default: :data:`CANONICAL_DATA`, what committed outputs must come from). ``read`` gives
    the source of a file (the tests pass edited sources)."""
    from capsedu.zoo.shipped import STUDIES_DIR, shipped_paths

    raw = _lesson_code(str(notebook_path), os.stat(notebook_path).st_mtime_ns)
    code = parseable(raw)
    tree = ast.parse(code)

    def loaded(modules: dict[str, Path], calls: set[str], every: list[str] | None = None) -> set[str]:
        every = tuple(available_weights() if every is None else every)
        callers = [p for name, p in modules.items() if name != "capsedu.zoo.shipped"]  # not the definitions
        return weights_loaded([tree], calls, list(every)).union(
            *(_source_loads(read(p), frozenset(calls), every) for p in callers))

    weights = loaded(module_closure(tree, read), CALLS_THAT_LOAD_WEIGHTS)
    modules = module_closure(tree, read, extra=_network_modules(weights, read))
    studies = loaded(modules, CALLS_THAT_LOAD_STUDIES, sorted(p.stem for p in STUDIES_DIR.glob("*.json")))
    used = capsedu_names_used(tree)
    shown = modules_shown(tree, public_names(read))
    return {
        "lesson": digest(f"{code_digest(code, docstrings=True)} {magics(raw)!r}".encode()),
        "modules": {str(path.relative_to(ROOT)): _module_digest(name, path, used, read, shown)
                    for name, path in sorted(modules.items())},
        "weights": {name: digest(read(shipped_paths(name)[1]).encode()) for name in sorted(weights)},
        "studies": {name: digest(read(STUDIES_DIR / f"{name}.json").encode())
                    for name in sorted(studies) if (STUDIES_DIR / f"{name}.json").is_file()},
        "data": dict(CANONICAL_DATA if data is None else data),
    }


def differences(recorded: dict[str, Any] | None, current: dict[str, Any]) -> list[str]:
    r"""What changed between a stored fingerprint and the current one, in words (empty: same)."""
    if not recorded:
        return ["no fingerprint stored: the lesson was not executed with `make execute`"]
    changes = []
    if recorded.get("lesson") != current["lesson"]:
        changes.append("its code cells")
    for part in ("modules", "weights", "studies", "data"):
        old, new = recorded.get(part, {}), current[part]
        for key in sorted(set(old) | set(new)):
            if old.get(key) != new.get(key):
                verb = "added" if key not in old else "removed" if key not in new else "changed"
                singular = {"modules": "module", "weights": "weight", "studies": "study"}.get(part, part)
                changes.append(f"{singular} {key} {verb}")
    return changes


def stored_fingerprint(notebook_path: str | os.PathLike) -> dict[str, Any] | None:
    metadata = json.loads(Path(notebook_path).read_text(encoding="utf-8")).get("metadata", {})
    return metadata.get("capsedu", {}).get("fingerprint")
