r"""What the lessons call besides the package's pieces: the exercise checks (:mod:`.checks`).

The course's build tools - executing lessons, handouts, the nbgrader course, fingerprints - are
not part of the installed package: they work on the repository's notebooks and live in the
repository's ``coursetools/`` (``make execute``, ``make student``, ``make grading``).
"""
