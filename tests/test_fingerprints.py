"""Stored outputs come from today's code: every lesson's fingerprint matches (see make execute)."""

import ast

import nbformat

from capsedu.course import fingerprint
from capsedu.course.execute import lessons, stale


def test_every_lesson_was_executed_by_todays_code():
    found = stale(lessons())
    report = "\n".join(f"  {path.stem}: {'; '.join(changes[:6])}" for path, changes in found.items())
    assert not found, ("these lessons' stored outputs no longer come from today's code - re-execute "
                       f"them with `make execute` (python -m capsedu.course.execute --stale):\n{report}")


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


def test_magics_are_part_of_the_code_but_do_not_stop_the_parse(tmp_path):
    plain = fingerprint.lesson_fingerprint(_notebook(tmp_path, "import capsedu.nets.squash"))
    magic = fingerprint.lesson_fingerprint(
        _notebook(tmp_path, "%matplotlib inline\n  !ls\nimport capsedu.nets.squash"))
    assert magic["modules"] == plain["modules"] and "capsedu/nets/squash.py" in magic["modules"]
    assert magic["lesson"] != plain["lesson"]  # adding a magic changes the lesson's code


def test_weights_are_found_by_name_and_unknown_names_count_as_all():
    def names(code):
        return fingerprint.weights_loaded([ast.parse(code)])

    assert names("import capsedu\nm = capsedu.pretrained()") == {"capsnet"}
    assert names("from capsedu import pretrained_metrics\npretrained_metrics('capsnet')") == {"capsnet"}
    assert names("m = capsedu.pretrained(which)") == set(fingerprint.available_weights())
    assert names("x = 1") == set()


def test_a_change_anywhere_it_depends_on_is_named(tmp_path, monkeypatch):
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
    real_digest = fingerprint.digest
    monkeypatch.setattr(fingerprint, "digest",
                        lambda data: real_digest(data + b"#" if b"def squash(" in data else data))
    assert fingerprint.differences(recorded, fingerprint.lesson_fingerprint(path)) == [
        "module capsedu/nets/squash.py changed"]


def test_data_identity_is_the_content_not_the_compression(tmp_path, shared_data):
    import gzip

    plain = tmp_path / "mnist"
    plain.mkdir()
    for gz in (shared_data / "mnist").glob("t10k-*.gz"):
        (plain / gz.name.removesuffix(".gz")).write_bytes(gzip.decompress(gz.read_bytes()))
    assert fingerprint.data_identity(shared_data) == fingerprint.CANONICAL_DATA
    assert fingerprint.data_identity(tmp_path) == fingerprint.CANONICAL_DATA
    (plain / "t10k-labels-idx1-ubyte").write_bytes((plain / "t10k-labels-idx1-ubyte").read_bytes()[:-1] + b"\x00")
    assert fingerprint.data_identity(tmp_path)["test"] != fingerprint.CANONICAL_DATA["test"]
