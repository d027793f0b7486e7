r"""What the lessons call besides the package's pieces:

* ``checks`` - the exercise checks, one module per lesson (a subpackage)
* ``grading_mode`` - grading mode for nbgrader releases (failed checks raise, shown as their hint)
* ``pieces`` - the learner's own pieces, read from their notebooks 01-05 and checked, for the
  CapsNet they assemble in lesson 06
* ``self_check`` - each lesson's closing multiple-choice questions (``self_checks/NN.json``),
  shown as plain HTML that works in JupyterLab and on the website without a kernel

The course's build tools - executing lessons, handouts, the nbgrader course, fingerprints - are
not part of the installed package: they work on the repository's notebooks and live in the
repository's ``coursetools/`` (``make execute``, ``make student``, ``make grading``).

Shape legend: none (no tensor shapes of its own).
"""
