r"""The course's own tooling, for the repository (not installed with ``capsedu``).

* :mod:`.execute` - run lessons in the learner profile and record what produced their outputs
  (``make execute``);
* :mod:`.fingerprint` - what a lesson's outputs depend on (its code, the capsedu code it runs,
  the weights, studies and data it reads);
* :mod:`.handouts` - student handouts, solutions stubbed (``make student``);
* :mod:`.grading` - an nbgrader course from the lessons (``make grading``);
* :mod:`.class_report` - what the class got wrong, from nbgrader's autograded lessons
  (``make class-report``).

Shape legend: none (no tensor shapes of its own).
"""
