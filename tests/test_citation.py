"""The course is citable and versioned (issue 54): CITATION.cff, CHANGELOG.md and the site's front
page name the version ``capsedu/_version.py`` holds, and CITATION.cff has what the Citation File
Format 1.2.0 requires (validated in full with ``cffconvert --validate`` when it was written; this
test keeps the fields a release can break)."""

from __future__ import annotations

import datetime
import re
from pathlib import Path

import pytest
import yaml

from capsedu._version import __version__

pytestmark = pytest.mark.tools

REPO = Path(__file__).resolve().parents[1]
SPDX = {"MIT", "CC-BY-4.0", "CC-BY-SA-3.0"}  # the licences LICENSE and LICENSE-CONTENT.md give


def citation() -> dict:
    return yaml.safe_load((REPO / "CITATION.cff").read_text(encoding="utf-8"))


def test_citation_file_has_what_cff_1_2_requires_and_the_current_version():
    cff = citation()
    assert cff["cff-version"] == "1.2.0"
    assert {"cff-version", "message", "title", "authors"} <= set(cff)
    assert all("name" in a or "family-names" in a for a in cff["authors"]), cff["authors"]
    assert cff["version"] == __version__, "CITATION.cff names another version than capsedu/_version.py"
    released = datetime.date.fromisoformat(str(cff["date-released"]))
    assert set(cff["license"]) <= SPDX, cff["license"]
    for reference in cff.get("references", []):
        assert {"type", "title", "authors"} <= set(reference), reference
    changelog = (REPO / "CHANGELOG.md").read_text(encoding="utf-8")
    heading = re.search(rf"^## \[{re.escape(__version__)}\] - (\d{{4}}-\d\d-\d\d)$", changelog, re.M)
    assert heading, f"CHANGELOG.md has no section for version {__version__}"
    assert datetime.date.fromisoformat(heading.group(1)) == released, "the two release dates differ"


def test_the_front_page_names_the_version():
    assert "{{ version }}" in (REPO / "book" / "intro.md").read_text(encoding="utf-8")
