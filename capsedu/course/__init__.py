r"""What the lessons call besides the package's pieces:

* ``checks`` - the exercise checks, one module per lesson (a subpackage)

The course's build tools - executing lessons, handouts, the nbgrader course, fingerprints - are
not part of the installed package: they work on the repository's notebooks and live in the
repository's ``coursetools/`` (``make execute``, ``make student``, ``make grading``).
"""
