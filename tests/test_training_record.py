"""The training record (notebooks/training_record.md) is what its records generate, and the lessons'
link to it works wherever the lessons go (the book, the learner's workspace, handouts, the hub)."""

from __future__ import annotations

import json
import re
import shutil

import pytest
import yaml
from conftest import REPO

from coursetools import training_record

pytestmark = pytest.mark.tools  # the repository's tools (coursetools), not the package


def test_the_committed_page_is_what_the_records_generate():
    committed = training_record.PAGE.read_text()
    assert committed == training_record.page(), (
        "notebooks/training_record.md is stale: run `python -m coursetools.training_record`")
    assert training_record.main(["--check"]) == 0


def test_check_fails_on_a_stale_page(tmp_path, monkeypatch, capsys):
    stale = tmp_path / "training_record.md"
    stale.write_text(training_record.PAGE.read_text().replace("99.", "98.", 1))
    monkeypatch.setattr(training_record, "PAGE", stale)
    monkeypatch.setattr(training_record, "ROOT", tmp_path)
    assert training_record.main(["--check"]) == 1
    assert "stale" in capsys.readouterr().out


def test_every_number_comes_from_the_records(tmp_path):
    r"""Change a record: the page changes with it (nothing on it is typed by hand)."""
    weights, studies = tmp_path / "weights", tmp_path / "studies"
    shutil.copytree(training_record.WEIGHTS_DIR, weights, ignore=shutil.ignore_patterns("*.pt"))
    shutil.copytree(training_record.STUDIES_DIR, studies)
    record = json.loads((weights / "em.json").read_text())
    record["test_accuracy"], record["recipe"]["batch_size"] = 0.1234, 24
    (weights / "em.json").write_text(json.dumps(record))
    text = training_record.page(weights, studies)
    assert "12.34 ±" in text and "10 × 24" in text and "EM's batch 24" in text


def test_the_page_is_in_the_book_and_names_every_shipped_network():
    text = training_record.PAGE.read_text()
    assert text.startswith(f"# {training_record.TITLE}\n")
    shipped = sorted(p.stem for p in training_record.WEIGHTS_DIR.glob("*.pt"))
    assert sorted(training_record.NETWORKS) == shipped
    assert all(f"## `{name}`" in text for name in shipped)
    assert "/work/" not in text, "no machine's paths on the page"
    toc = yaml.safe_load((REPO / "book" / "_toc.yml").read_text())
    files = {part["caption"]: [c["file"] for c in part["chapters"]] for part in toc["parts"]}
    assert "notebooks/training_record" in files["Teaching and reference"]


def test_the_lessons_links_to_it_resolve():
    linked = [p.name for p in sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))
              if re.search(r"\]\(training_record\.md\)", p.read_text())]
    assert all((REPO / "notebooks" / "training_record.md").is_file() for _ in linked)


@pytest.mark.lessons  # it delivers every lesson, as tests/test_workspace.py does
def test_learners_get_the_page_beside_their_lessons(tmp_path):
    from coursetools import handouts, workspace

    root = tmp_path / "ws"
    workspace.update(root)
    workspace.update(root)  # again: the read-only copies are replaced, not refused
    for folder in (root, root / "worked"):
        assert (folder / "training_record.md").read_text() == training_record.PAGE.read_text()
        assert (folder / "statistics.md").read_text() == (REPO / "notebooks" / "statistics.md").read_text()
    copied = handouts.copy_pages(tmp_path / "handout")
    assert [p.name for p in copied] == ["training_record.md", "statistics.md"]
