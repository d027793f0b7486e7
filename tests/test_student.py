"""Student copies: solutions stubbed at their indentation, no outputs, valid Python, every lesson."""

import nbformat
import pytest
from conftest import REPO
from IPython.core.inputtransformer2 import TransformerManager

from coursetools.handouts import BEGIN, END, STUB, main, strip_solutions, write_student_copies

pytestmark = pytest.mark.lessons

LESSON_FILES = sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def test_strip_keeps_the_code_around_a_block_and_its_indentation():
    source = f"def f(x):\n    y = 1\n    {BEGIN}\n    return x + y\n    {END}\n\nprint(f)"
    assert strip_solutions(source) == (f"def f(x):\n    y = 1\n    # YOUR CODE HERE\n    {STUB}\n"
                                       "\nprint(f)")
    assert strip_solutions("a = 1\nb = 2") == "a = 1\nb = 2"


@pytest.mark.parametrize("bad", [f"{BEGIN}\nx = 1", f"x = 1\n{END}", f"{BEGIN}\n{BEGIN}\n{END}"])
def test_unbalanced_markers_are_refused(bad):
    with pytest.raises(ValueError, match="SOLUTION"):
        strip_solutions(bad)


def test_every_lesson_becomes_a_handout_without_answers(tmp_path):
    written = write_student_copies(LESSON_FILES, tmp_path)
    assert [p.name for p in written] == [p.name for p in LESSON_FILES]
    for original, handout_path in zip(LESSON_FILES, written):
        source = nbformat.read(original, as_version=4)
        handout = nbformat.read(handout_path, as_version=4)
        blocks = sum(c.source.count(BEGIN) for c in source.cells if c.cell_type == "code")
        code = [c for c in handout.cells if c.cell_type == "code"]
        assert blocks >= 2 and sum(c.source.count(STUB) for c in code) == blocks
        assert not any(BEGIN in c.source or END in c.source for c in code)
        assert all(c.outputs == [] and c.execution_count is None for c in code)
        assert "widgets" not in handout.metadata and "capsedu" not in handout.metadata
        stubs = [c for c in code if STUB in c.source]
        assert all(not c.metadata.get("jupyter", {}).get("source_hidden") for c in stubs)
        assert all("hide-input" not in c.metadata.get("tags", []) for c in stubs)
        for cell in code:
            # still valid Python once IPython has turned magics (%matplotlib) into calls
            compile(TransformerManager().transform_cell(cell.source), handout_path.name, "exec")
        assert [c.source for c in handout.cells if c.cell_type == "markdown"] == \
            [c.source for c in source.cells if c.cell_type == "markdown"]


def test_command_line_and_bad_input(tmp_path, capsys):
    main([str(LESSON_FILES[1]), "--out", str(tmp_path)])
    assert (tmp_path / LESSON_FILES[1].name).is_file()
    assert "wrote 1 student notebook" in capsys.readouterr().out
    with pytest.raises(FileNotFoundError, match="not a notebook"):
        write_student_copies([tmp_path / "missing.ipynb"], tmp_path)
    with pytest.raises(ValueError, match="sources is empty"):
        write_student_copies([], tmp_path)
