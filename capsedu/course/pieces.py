r"""The learner's own pieces, read from their lessons 01-05, for the CapsNet they assemble in lesson 06.

d2l saves the functions marked ``#@save`` into its package and nbdev exports the cells marked
``#| export``; here the lesson notebooks themselves are the source. :func:`collect_pieces` finds
each lesson's notebook beside lesson 06 (the workspace, the handouts and the hub keep the
lessons in one folder; nbgrader gives each lesson a folder of its own, ``../NN_name/``), reads
the code cell that defines the piece's function - the last such cell, as "Run all" leaves it -
and runs only that definition, after the import lines and the constants (``M_POS = 0.9``)
of its lesson. No other cell of the lesson
runs and no kernel's memory is read: what counts is what the learner's notebook says. Each piece
is checked again with its lesson's check; one that is missing or does not pass is replaced by
``capsedu``'s own, and one printed line per piece says which is in use.

Inside the learner's routing the name ``squash`` is the learner's own squash when it passes.

Shape legend:
    B      batch size
    I      primary capsules
    J      digit capsules (classes)
    D_in   primary capsule dimension
    D      digit capsule dimension
"""

from __future__ import annotations

import ast
import dataclasses
import json
import re
from collections.abc import Callable
from functools import partial
from pathlib import Path

import torch

from capsedu.course.checks._kit import CheckFailed, CheckResult
from capsedu.course.checks.decoder import check_decoder, check_mask, check_reconstruction_loss
from capsedu.course.checks.margin import check_margin_loss
from capsedu.course.checks.primary import check_to_capsules, reference_to_capsules
from capsedu.course.checks.routing import check_routing
from capsedu.course.checks.squash import check_squash
from capsedu.nets.capsnet import decoder_network, mask_capsules
from capsedu.nets.losses import margin_loss, reconstruction_loss
from capsedu.nets.routing import dynamic_routing
from capsedu.nets.squash import squash
from capsedu.training.checkpoint import load_checkpoint
from capsedu.zoo.shipped import pretrained

LESSON_NAME = re.compile(r"\d\d_[a-z0-9_]+")  # 01_squash: a lesson's own name, no copy's suffix


@dataclasses.dataclass(frozen=True)
class PieceSpec:
    r"""Where one piece is written (lesson, function), how it is checked and what replaces it."""

    name: str  # the attribute of Pieces
    lesson: str  # "01"
    function: str  # the learner's function, e.g. "my_squash"
    check: Callable[..., CheckResult]
    reference: Callable
    label: str  # what the printed line calls the reference


SPECS = (
    PieceSpec("squash", "01", "my_squash", check_squash, squash, "capsedu.squash"),
    PieceSpec("to_capsules", "02", "my_to_capsules", check_to_capsules, reference_to_capsules,
              "capsedu's to_capsules"),
    PieceSpec("routing", "03", "my_routing_vectorised", check_routing,
              partial(dynamic_routing, detach_inner=False), "capsedu.dynamic_routing"),
    PieceSpec("margin_loss", "04", "my_margin_loss", check_margin_loss, margin_loss, "capsedu.margin_loss"),
    PieceSpec("mask", "05", "my_mask", check_mask, mask_capsules, "capsedu.mask_capsules"),
    PieceSpec("decoder", "05", "build_decoder", check_decoder, decoder_network, "capsedu's decoder_network"),
    PieceSpec("sse_loss", "05", "my_sse_loss", check_reconstruction_loss, reconstruction_loss,
              "capsedu.reconstruction_loss"),
)


@dataclasses.dataclass(frozen=True)
class Pieces:
    r"""The seven pieces of a CapsNet that lessons 01-05 write, each the learner's or ``capsedu``'s.

    ``squash(s)``: (..., D) -> (..., D); ``to_capsules(features, num_types, caps_dim)``:
    (B, T*D_in, H, W) -> (B, I, D_in); ``routing(u_hat, routing_iterations)``: (B, I, J, D) -> v (B, J, D), c (B, I, J);
    ``margin_loss(lengths, targets)``: (B, J), multi-hot (B, J) -> (); ``mask(capsules, labels)``:
    (B, J, D) -> (B, J*D); ``decoder(in_features, hidden, pixels)`` builds an ``nn.Module``
    (B, in_features) -> (B, pixels); ``sse_loss(recon, images)`` -> ().
    ``sources`` says, per piece, ``"yours"`` or ``"capsedu"``.
    """

    squash: Callable
    to_capsules: Callable
    routing: Callable
    margin_loss: Callable
    mask: Callable
    decoder: Callable
    sse_loss: Callable
    sources: dict[str, str] = dataclasses.field(default_factory=dict)

    @classmethod
    def reference(cls) -> Pieces:
        r"""``capsedu``'s seven pieces (its routing with gradients through every iteration)."""
        return cls(**{spec.name: spec.reference for spec in SPECS},
                   sources={spec.name: "capsedu" for spec in SPECS})


def find_lesson(folder: Path, lesson: str) -> Path | None:
    r"""The notebook of ``lesson`` ("01") beside ``folder``'s lessons, or None.

    Looked for in ``folder`` (``01_squash.ipynb``), then in a folder of its own beside or below
    it (``../01_squash/01_squash.ipynb``, as nbgrader's assignments are). Copies such as
    ``01_squash.updated.ipynb``, ``01_squash.worked.ipynb`` or JupyterLab's duplicate
    ``01_squash-Copy1.ipynb`` are not the learner's lesson.
    """
    patterns = [(folder, f"{lesson}_*.ipynb"), (folder.parent, f"{lesson}_*/{lesson}_*.ipynb"),
                (folder, f"{lesson}_*/{lesson}_*.ipynb")]
    for root, pattern in patterns:
        found = [path for path in sorted(root.glob(pattern)) if LESSON_NAME.fullmatch(path.stem)]
        if found:
            return found[0]
    return None


def _parse(source: str) -> ast.Module | None:
    r"""A code cell's statements; IPython's ``%`` and ``!`` lines are blanked, a cell magic or a
    syntax error gives None."""
    if source.lstrip().startswith("%%"):
        return None
    lines = ["" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines()]
    try:
        return ast.parse("\n".join(lines))
    except SyntaxError:
        return None


def _is_constant(node: ast.stmt) -> bool:
    r"""True for ``M_POS, M_NEG = 0.9, 0.1`` or ``M_POS: float = 0.9``: an assignment of literals
    (numbers, strings, tuples)."""
    if not isinstance(node, ast.Assign | ast.AnnAssign) or node.value is None:
        return False
    try:
        ast.literal_eval(node.value)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return True


def read_function(notebook: Path, function: str, bindings: dict[str, object] | None = None) -> Callable | None:
    r"""``function`` as the last code cell of ``notebook`` that defines it says, or None.

    The functions that cell defines (``function`` and any helper beside it) run after the import lines and the assignments of literals (``M_POS = 0.9``)
    of the cells up to the defining one, each on its own (one that fails is skipped), with
    ``bindings`` set over them; nothing else of the notebook runs.
    """
    cells = json.loads(notebook.read_text(encoding="utf-8")).get("cells", [])
    setup: list[ast.stmt] = []  # imports and constants, cell by cell
    definition, imports = None, []
    for cell in cells:
        if cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        tree = _parse("".join(source) if isinstance(source, list) else source)
        nodes = tree.body if tree else []
        setup += [node for node in nodes if isinstance(node, ast.Import | ast.ImportFrom) or _is_constant(node)]
        if any(isinstance(node, ast.FunctionDef) and node.name == function for node in nodes):
            # the last defining cell wins: its functions (helpers too), after the setup up to it
            definition = [node for node in nodes if isinstance(node, ast.FunctionDef)]
            imports = list(setup)
    if definition is None:
        return None
    namespace: dict[str, object] = {"__name__": f"capsedu_learner_{notebook.stem}"}
    for node in imports:
        try:
            exec(compile(ast.Module([node], []), str(notebook), "exec"), namespace)  # noqa: S102
        except Exception:  # noqa: BLE001, S112 - an import the learner's machine lacks is skipped
            continue
    namespace.update(bindings or {})
    exec(compile(ast.Module(definition, []), str(notebook), "exec"), namespace)  # noqa: S102
    return namespace[function]  # type: ignore[return-value]


def squash_along(squash_last: Callable) -> Callable:
    r"""A squash over the last axis as ``squash(s, dim=-1)``, the way lesson 03's routing calls it."""
    def along(s: torch.Tensor, dim: int = -1) -> torch.Tensor:
        return squash_last(s.movedim(dim, -1)).movedim(-1, dim)  # (..., D) along ``dim``
    return along


def _verdict(spec: PieceSpec, fn: Callable) -> str:
    r"""'' when ``fn`` passes its lesson's check, else the check's message."""
    try:
        with torch.random.fork_rng(devices=[]):  # the learner's random state stays as it was
            result = spec.check(fn, quiet=True)
    except CheckFailed as failure:  # grading mode: a failed check raises even when quiet
        return str(failure)
    return "" if result else result.message.removeprefix("❌ not yet — ")


def _collect_one(spec: PieceSpec, folder: Path, bindings: dict[str, object]) -> tuple[Callable | None, str]:
    r"""The learner's passing function and the line to print, or None and why not."""
    notebook = find_lesson(folder, spec.lesson)
    if notebook is None:
        return None, f"no lesson {spec.lesson} notebook found beside this one"
    try:
        fn = read_function(notebook, spec.function, bindings)
    except Exception as error:  # noqa: BLE001 - the learner's definition may raise anything
        return None, f"your {spec.function} in {notebook.name} raised {type(error).__name__}: {error}"
    if fn is None:
        return None, f"{notebook.name} has no cell that defines {spec.function}"
    hint = _verdict(spec, fn)
    if hint.startswith("still the stub"):
        return None, f"your {spec.function} in {notebook.name} is still the stub"
    if hint:
        return None, f"your {spec.function} in {notebook.name} does not pass its check yet ({hint})"
    return fn, f"uses your {spec.function} from {notebook.name}"


def collect_pieces(folder: str | Path = ".", *, quiet: bool = False) -> Pieces:
    r"""The learner's pieces from their lesson notebooks in ``folder``, checked, or capsedu's.

    Prints one line per piece (unless ``quiet``): ``squash: uses your my_squash from
    01_squash.ipynb``, or which of ``capsedu``'s stands in and why.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise ValueError(f"folder must be the folder of your lesson notebooks, got {str(folder)!r}")
    chosen: dict[str, Callable] = {}
    sources: dict[str, str] = {}
    for spec in SPECS:
        bindings = {"squash": squash_along(chosen["squash"])} if sources.get("squash") == "yours" else {}
        fn, line = _collect_one(spec, folder, bindings)
        sources[spec.name] = "capsedu" if fn is None else "yours"
        chosen[spec.name] = spec.reference if fn is None else fn
        if fn is None:
            line = f"uses {spec.label}: {line}"
        if not quiet:
            print(f"{spec.name + ':':13} {line}")
    return Pieces(**chosen, sources=sources)


def your_network_or_shipped(use_yours: bool, path: str | Path = "checkpoints/my_capsnet.pt") -> torch.nn.Module:
    r"""The network the learner trained in lesson 06 (saved at ``path``) when ``use_yours``, else the
    shipped ``capsnet``; prints one line saying which is in use (and why, when yours is asked for
    but not there)."""
    if not isinstance(use_yours, bool):
        raise TypeError(f"use_yours must be True or False, got {use_yours!r}")
    path = Path(path)
    if use_yours and path.is_file():
        model, info = load_checkpoint(path)
        accuracy = info["metadata"].get("test_accuracy")
        told = f", test accuracy {accuracy:.2%} when it was saved" if accuracy is not None else ""
        print(f"→ uses your network from lesson 06 ({path}{told})")
        return model
    why = f": {path} is not there yet (lesson 06 saves it after training your MyCapsNet)" if use_yours else \
        " (set use_yours = True for the network you trained in lesson 06)"
    print(f"→ uses the shipped capsnet{why}")
    return pretrained("capsnet")
