r"""Every figure a lesson draws under nbval keeps the course's colour rules (coursetools.figure_audit).

The kernels nbval starts load ``coursetools.figure_audit`` as an IPython extension
(:func:`~coursetools.figure_audit.audited_kernels`: this test process's IPython folder, named by
``IPYTHONDIR``); the extension appends each rendered figure's problems to this process's log.
After each notebook cell this plugin reads what the cell added and fails the cell with it.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from coursetools.figure_audit import AUDIT_ENV, audited_kernels, logged_problems


class FigureAudit:
    r"""A pytest plugin: the figure log of this process, read around each notebook cell."""

    def __init__(self) -> None:
        os.environ.update(audited_kernels(Path(tempfile.mkdtemp(prefix="capsedu-figure-audit-"))))
        self.log = Path(os.environ[AUDIT_ENV])

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item):
        start = self.log.stat().st_size
        result = yield
        found = logged_problems(self.log, start) if item.path.suffix == ".ipynb" else []
        if found:
            pytest.fail("a figure breaks the course's colour rules (capsedu.explore.palette):\n  "
                        + "\n  ".join(found), pytrace=False)
        return result
