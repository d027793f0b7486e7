r"""Grading mode, turned on by the first (locked) cell of an nbgrader release: failed checks stop.

In the course's own lessons a check that fails prints its hint and the lesson goes on. In a
graded release (``coursetools/grading.py``) the first cell calls :func:`turn_on`: from then on a
failed check raises :class:`~capsedu.course.checks._kit.CheckFailed` (so Validate and the
autograder count it), and IPython shows that error as the hint alone - not the frames of the
course's checks, which would push the hint below a screen of code the learner never wrote (in
JupyterLab, in Validate's dialog and in the feedback report).

The lessons never import this module, so turning grading mode on or off changes none of their
outputs.

Shape legend: none (no tensors).
"""

from __future__ import annotations

import os

from capsedu.course.checks._kit import FAILED, GRADING_ENV, CheckFailed


def short_traceback(shell, etype, value, tb, tb_offset=None) -> list[str]:
    r"""IPython's custom-exception handler for :class:`CheckFailed`: shows one line, the hint, as the
    cell's error (the kernel reports the cell as failed, as for any error)."""
    stb = [f"\x1b[0;31m{etype.__name__}\x1b[0m: {FAILED} {value}"]
    shell._showtraceback(etype, value, stb)  # what IPython's own showtraceback ends with
    return stb


def turn_on() -> None:
    r"""Failed checks raise from now on (``CAPSEDU_GRADING=1``), shown as their hint in IPython."""
    os.environ[GRADING_ENV] = "1"
    from IPython import get_ipython

    shell = get_ipython()
    if shell is not None:  # a plain Python process (an autograder's script) keeps Python's traceback
        shell.set_custom_exc((CheckFailed,), short_traceback)
