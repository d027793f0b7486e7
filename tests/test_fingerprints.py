"""Stored outputs come from today's code: every lesson's fingerprint matches (see make execute)."""

import ast

import nbformat
import pytest
from conftest import REPO

from coursetools import fingerprint
from coursetools.execute import lessons, stale

pytestmark = pytest.mark.lessons


def test_every_lesson_was_executed_by_todays_code():
    found = stale(lessons())
    report = "\n".join(f"  {path.stem}: {'; '.join(changes[:6])}" for path, changes in found.items())
    assert not found, ("these lessons' stored outputs no longer come from today's code - re-execute "
                       f"them with `make execute` (python -m coursetools.execute --stale):\n{report}")


def test_every_lesson_was_executed_in_the_learner_profile_with_the_canonical_data():
    for path in lessons():
        stored = fingerprint.stored_fingerprint(path) or {}
        assert stored.get("data") == fingerprint.CANONICAL_DATA, f"{path.stem}: {stored.get('data')}"
        execution = nbformat.read(path, as_version=4).metadata["capsedu"]["execution"]
        assert execution["profile"] == "learner" and execution["seconds"] > 0, (path.stem, execution)


def _notebook(tmp_path, code: str):
    path = tmp_path / "lesson.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# text"),
                                                   nbformat.v4.new_code_cell(code)]), path)
    return path


def test_the_module_closure_follows_imports_through_capsedu(tmp_path):
    closure = fingerprint.module_closure(ast.parse("from capsedu.nets.capsnet import CapsNet"))
    assert {"capsedu", "capsedu.nets", "capsedu.nets.capsnet", "capsedu.nets.routing",
            "capsedu.nets.routing_fast", "capsedu.nets.squash", "capsedu._validate"} <= set(closure)
    assert "capsedu.explore.widgets" not in closure  # importing capsedu does not import the widgets
    inside = fingerprint.module_closure(ast.parse("def f():\n    from capsedu.explore import widgets"))
    assert "capsedu.explore.widgets" in inside  # imports inside functions count too


def test_the_public_names_a_lesson_uses_bring_in_their_modules_and_no_other():
    closure = fingerprint.module_closure(ast.parse("import capsedu as cd\nv = cd.squash(s)"))
    assert "capsedu.nets.squash" in closure and "capsedu.nets.routing" not in closure
    taken = fingerprint.module_closure(ast.parse("from capsedu import dynamic_routing"))
    assert "capsedu.nets.routing" in taken and "capsedu.training.loop" not in taken
    assert "capsedu.zoo.shipped" in fingerprint.module_closure(ast.parse("from capsedu import *"))


def test_a_shipped_network_brings_in_the_module_of_its_kind(tmp_path):
    modules = fingerprint.lesson_fingerprint(_notebook(tmp_path, "import capsedu\nm = capsedu.pretrained('em')"))
    assert {"capsedu/nets/matrix_capsnet.py", "capsedu/nets/em_routing.py"} <= set(modules["modules"])
    assert modules["weights"].keys() == {"em"}  # the registry imports the class by name, on first use


def test_a_lesson_that_only_loads_a_network_does_not_depend_on_the_recipes(tmp_path):
    """shipped.py imports the recipes (and every network module) for an error message only: the
    fingerprint skips that edge (fingerprint.NOT_OUTPUT_AFFECTING), not a lesson's own imports."""
    (tmp_path / "loads").mkdir()
    (tmp_path / "trains").mkdir()
    loads = _notebook(tmp_path / "loads", "import capsedu\nmodel = capsedu.pretrained('capsnet')")
    recorded = fingerprint.lesson_fingerprint(loads)
    assert "capsedu/zoo/shipped.py" in recorded["modules"]
    assert not {"capsedu/zoo/recipes.py", "capsedu/nets/em_routing.py"} & set(recorded["modules"])
    for edit in (_reader("capsedu/zoo/recipes.py", "epochs=15", "epochs=16"),
                 _reader("capsedu/nets/em_routing.py", "1.0 / num_out", "0.5 / num_out")):
        assert not fingerprint.differences(recorded, fingerprint.lesson_fingerprint(loads, read=edit))
    trains = _notebook(tmp_path / "trains", "from capsedu.zoo.train import train_recipe")
    assert {"capsedu/zoo/recipes.py", "capsedu/nets/em_routing.py"} <= set(
        fingerprint.lesson_fingerprint(trains)["modules"])  # a lesson that trains a recipe does


def test_magics_are_part_of_the_code_but_do_not_stop_the_parse(tmp_path):
    plain = fingerprint.lesson_fingerprint(_notebook(tmp_path, "import capsedu.nets.squash"))
    magic = fingerprint.lesson_fingerprint(
        _notebook(tmp_path, "%matplotlib inline\n  !ls\nimport capsedu.nets.squash"))
    assert magic["modules"] == plain["modules"] and "capsedu/nets/squash.py" in magic["modules"]
    assert magic["lesson"] != plain["lesson"]  # adding a magic changes the lesson's code
    commented = fingerprint.lesson_fingerprint(
        _notebook(tmp_path, "# NBVAL_CHECK_OUTPUT\nimport capsedu.nets.squash  # the squash"))
    assert commented["lesson"] == plain["lesson"]  # a comment does not


def test_weights_are_found_by_name_and_unknown_names_count_as_all():
    def names(code):
        return fingerprint.weights_loaded([ast.parse(code)])

    assert names("import capsedu\nm = capsedu.pretrained()") == {"capsnet"}
    assert names("from capsedu import pretrained_metrics\npretrained_metrics('capsnet')") == {"capsnet"}
    assert names("m = capsedu.pretrained(which)") == set(fingerprint.available_weights())
    assert names("for k in ('capsnet', 'cnn', 'x'):\n    capsedu.pretrained(k)") == {"capsnet", "cnn"}
    assert names("nets = {'a': 'em'}\nfor n, k in nets.items():\n    capsedu.pretrained(k)") == {"em"}
    assert names("for k in ('em',):\n    pass\nfor k in keys:\n    capsedu.pretrained(k)") == set(
        fingerprint.available_weights())  # one binding is not a literal: it could be any network
    assert names("x = 1") == set()


def test_a_change_anywhere_it_depends_on_is_named(tmp_path):
    path = _notebook(tmp_path, "import capsedu\nmodel = capsedu.pretrained()")
    recorded = fingerprint.lesson_fingerprint(path)
    assert fingerprint.differences(recorded, fingerprint.lesson_fingerprint(path)) == []
    assert fingerprint.differences(None, recorded)[0].startswith("no fingerprint stored")
    changed = {**recorded, "modules": {**recorded["modules"], "capsedu/nets/squash.py": "0" * 16},
               "weights": {"capsnet": "0" * 16}, "data": {**recorded["data"], "test": "other"},
               "lesson": "0" * 16}
    assert fingerprint.differences(changed, recorded) == [
        "its code cells", "module capsedu/nets/squash.py changed", "weight capsnet changed",
        "data test changed"]
    edited = _reader("capsedu/nets/squash.py", "    return scale * s", "    return s * scale")
    assert fingerprint.differences(recorded, fingerprint.lesson_fingerprint(path, read=edited)) == [
        "module capsedu/nets/squash.py changed"]


def _reader(relative: str, old: str, new: str):
    r"""A source reader that sees ``relative`` (a repository path) with ``old`` replaced by ``new``."""
    target = REPO / relative
    text = target.read_text()
    assert old in text, f"{relative} no longer contains {old!r}: pick another edit"
    return lambda path: text.replace(old, new, 1) if path == target else path.read_text()


def _stale_after(read) -> list[str]:
    return sorted(path.stem[:2] for path in lessons()
                  if fingerprint.lesson_fingerprint(path) != fingerprint.lesson_fingerprint(path, read=read))


def test_a_docstring_or_comment_edit_stales_no_lesson():
    source = (REPO / "capsedu/nets/routing.py").read_text()
    docstring = source.split('"""')[1].splitlines()[0]
    read = _reader("capsedu/nets/routing.py", docstring, docstring + " (reworded)")
    assert _stale_after(read) == []
    comment = next(line for line in source.splitlines() if "  # " in line)
    assert _stale_after(_reader("capsedu/nets/routing.py", comment, comment + " and more")) == []


def test_a_comment_in_a_module_whose_source_a_lesson_prints_stales_that_lesson():
    read = _reader("capsedu/nets/numpy_classifier.py", "    r\"\"\"", "    r\"\"\"Reworded. ")
    assert _stale_after(read) == ["10"]  # lesson 10 prints inspect.getsource(ncl.backward)
    tree = ast.parse("import capsedu\nfrom capsedu.nets import squash as sq\nhelp(sq)\nprint(capsedu.fit.__doc__)")
    assert fingerprint.modules_shown(tree, fingerprint.public_names()) == {"capsedu.nets.squash",
                                                                           "capsedu.training.loop"}


def test_a_code_edit_in_em_routing_stales_the_lessons_that_route_by_em_and_no_other():
    read = _reader("capsedu/nets/em_routing.py", "1.0 / num_out", "0.5 / num_out")
    assert _stale_after(read) == ["11", "12", "13"]


def test_a_code_edit_in_squash_stales_every_lesson_that_squashes():
    read = _reader("capsedu/nets/squash.py", "    return scale * s", "    return s * scale")
    assert _stale_after(read) == [f"{n:02d}" for n in range(14)]  # every lesson runs Eq. 1 somewhere


def test_data_identity_is_the_content_not_the_compression(tmp_path, full_data):
    import gzip

    plain = tmp_path / "mnist"
    plain.mkdir()
    for path in full_data.glob("*-idx?-ubyte*"):
        data = path.read_bytes()
        (plain / path.name.removesuffix(".gz")).write_bytes(gzip.decompress(data) if path.suffix == ".gz" else data)
    assert fingerprint.data_identity(full_data) == fingerprint.CANONICAL_DATA
    assert fingerprint.data_identity(tmp_path) == fingerprint.CANONICAL_DATA
    (plain / "t10k-labels-idx1-ubyte").write_bytes((plain / "t10k-labels-idx1-ubyte").read_bytes()[:-1] + b"\x00")
    assert fingerprint.data_identity(tmp_path)["test"] != fingerprint.CANONICAL_DATA["test"]
