"""The code is lint-clean under the rules pinned in pyproject.toml ([tool.ruff.lint])."""

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.tools

REPO = Path(__file__).resolve().parents[1]
CHECKED = ["capsedu", "coursetools", "tests", "benchmarks", "book/_ext", "notebooks", "classroom"]


def test_ruff_finds_nothing():
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", *CHECKED],
                            cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, f"ruff check {' '.join(CHECKED)}:\n{result.stdout}{result.stderr}"
