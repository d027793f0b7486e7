"""Tests for capsedu.course.pieces: lesson 06 reads the learner's pieces from their notebooks
01-05 - the defining cell, with its lesson's imports and constants, nothing else - checks each
again and stands capsedu's in for a missing or failing one."""

import shutil
from pathlib import Path

import nbformat
import pytest

from capsedu.course.pieces import SPECS, Pieces, collect_pieces, find_lesson, read_function

pytestmark = pytest.mark.unit
NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
STUB = '    raise NotImplementedError("write your solution here, then run the check below")\n'


def notebook(path: Path, *cells: str) -> Path:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in cells])
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


def test_the_solved_lessons_give_every_piece(capsys):
    pieces = collect_pieces(NOTEBOOKS)
    assert pieces.sources == {spec.name: "yours" for spec in SPECS}
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(SPECS) and all("uses your" in line for line in lines), lines
    # inside the learner's routing, `squash` is the learner's squash
    assert pieces.routing.__globals__["squash"].__qualname__.startswith("squash_along")


def test_an_unfinished_piece_is_replaced_and_said_so(tmp_path, capsys):
    shutil.copy(NOTEBOOKS / "01_squash.ipynb", tmp_path / "01_squash.ipynb")
    nb = nbformat.read(tmp_path / "01_squash.ipynb", as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code" and cell.source.startswith("def my_squash("):
            cell.source = cell.source.split("    ### BEGIN SOLUTION")[0] + STUB
    nbformat.write(nb, tmp_path / "01_squash.ipynb")
    pieces = collect_pieces(tmp_path)
    out = capsys.readouterr().out
    assert "squash:       uses capsedu.squash: your my_squash in 01_squash.ipynb is still the stub\n" in out
    assert "routing:      uses capsedu.dynamic_routing: no lesson 03 notebook found beside this one" in out
    assert pieces.sources["squash"] == "capsedu" and pieces.squash is Pieces.reference().squash
    assert pieces.routing(*_votes()) is not None  # capsedu's routing, with gradients through every iteration


def test_a_failing_piece_says_what_its_check_says(tmp_path, capsys):
    notebook(tmp_path / "01_squash.ipynb", "import torch", "def my_squash(s, eps=1e-8):\n    return 0.5 * s")
    collect_pieces(tmp_path)
    line = capsys.readouterr().out.splitlines()[0]
    assert line.startswith("squash:       uses capsedu.squash: your my_squash in 01_squash.ipynb does not pass "
                           "its check yet ("), line
    assert len(line) > 110, line  # the check's own hint follows


def _votes():
    import torch
    return torch.randn(2, 6, 3, 4), 3


def test_nbgraders_folder_per_lesson_is_found(tmp_path):
    lesson_06 = tmp_path / "06_training"
    lesson_06.mkdir()
    shutil.copy(NOTEBOOKS / "05_decoder.ipynb", (tmp_path / "05_decoder").mkdir() or tmp_path / "05_decoder")
    assert find_lesson(lesson_06, "05") == tmp_path / "05_decoder" / "05_decoder.ipynb"
    assert collect_pieces(lesson_06, quiet=True).sources["mask"] == "yours"


def test_copies_beside_the_lesson_are_not_the_learners(tmp_path):
    notebook(tmp_path / "01_squash.updated.ipynb", "def my_squash(s, eps=1e-8):\n    return s")
    notebook(tmp_path / "01_squash-Copy1.ipynb", "def my_squash(s, eps=1e-8):\n    return s")
    notebook(tmp_path / "worked" / "01_squash.worked.ipynb", "def my_squash(s, eps=1e-8):\n    return s")
    assert find_lesson(tmp_path, "01") is None


def test_only_imports_constants_and_the_definition_run(tmp_path):
    path = notebook(tmp_path / "04_margin_loss.ipynb",
                    "%matplotlib inline\nimport torch\nM_POS, M_NEG = 0.9, 0.1\nLAMBDA: float = 0.5",
                    "raise SystemExit('a cell that must not run')",
                    "model = torch.nn.Linear(2, 2)  # not a constant: not run",
                    "def my_margin_loss(lengths, targets):\n    return 0 * lengths.sum()",
                    "def half(x):\n    return LAMBDA * x\n\n\ndef my_margin_loss(lengths, targets):\n"
                    "    return torch.tensor(half(M_POS + M_NEG))",
                    "M_POS = 100.0  # explored after the definition: not the piece's")
    fn = read_function(path, "my_margin_loss")
    assert float(fn(None, None)) == pytest.approx(0.5)  # the last definition, its helper and constants
    assert "model" not in fn.__globals__
    assert read_function(path, "absent") is None


def test_a_folder_that_is_not_one_is_refused(tmp_path):
    with pytest.raises(ValueError, match="folder must be the folder of your lesson notebooks"):
        collect_pieces(tmp_path / "missing")


def test_your_network_or_the_shipped_one_says_which(tmp_path, capsys):
    import torch

    import capsedu
    from capsedu.course.checks.assembly import _ReferenceCapsNet, as_capsnet
    from capsedu.course.pieces import your_network_or_shipped

    config = capsedu.CapsNetConfig.cpu()
    mine = _ReferenceCapsNet(config, Pieces.reference()).eval()
    path = capsedu.save_checkpoint(tmp_path / "my_capsnet.pt", as_capsnet(mine, config),
                                   metadata={"test_accuracy": 0.5})
    images = torch.rand(3, 1, 28, 28)
    loaded = your_network_or_shipped(True, path)
    assert "uses your network from lesson 06" in capsys.readouterr().out
    with torch.no_grad():
        assert torch.allclose(loaded(images).capsules, mine(images).capsules, atol=1e-6)
    shipped = your_network_or_shipped(False, path)
    assert "uses the shipped capsnet (set use_yours = True" in capsys.readouterr().out
    assert not torch.equal(shipped.conv1.weight, loaded.conv1.weight)
    your_network_or_shipped(True, tmp_path / "absent.pt")
    assert "is not there yet" in capsys.readouterr().out
    with pytest.raises(TypeError, match="use_yours must be True or False"):
        your_network_or_shipped("yes", path)
