r"""Exercise checks for the lessons, one module per lesson topic.

Each check runs the learner's function against ``capsedu``'s reference, prints one clear message -
a pass, or a *specific* hint about what is probably wrong, also when the function is still the
handout's unfinished stub - and returns a :class:`CheckResult` (truthy when passed). In grading
mode (``CAPSEDU_GRADING=1``) a failed check raises :class:`CheckFailed` as well, so that an
autograder such as nbgrader counts it. Only the checks here are named ``check_*``; a guard that
raises on a bad argument elsewhere in the package is a ``require_*``.

* ``_kit`` - the vocabulary the checks share (hints, stubs, grading mode, and
  :func:`yours_or_reference`: after a Build-it check, the learner's function or ``capsedu``'s)
* ``_probe`` - a tiny seeded CapsNet to probe the learner's code with
* ``start`` - lesson 00: a capsule's length and pose angle
* ``squash`` - lesson 01: the squashing non-linearity
* ``primary`` - lesson 02: primary capsules
* ``routing`` - lesson 03: dynamic routing
* ``margin`` - lesson 04: the margin loss
* ``decoder`` - lesson 05: masking, the decoder, the reconstruction loss
* ``training`` - lesson 06: one training step
* ``exploring`` - lesson 07: what a capsule dimension draws, couplings on the grid
* ``robustness`` - lesson 08: linear probes of rotation, a drawing's orientation
* ``multimnist`` - lesson 09: both-labels accuracy, one digit's reconstruction
* ``backprop`` - lesson 10: backward passes by hand in NumPy
* ``em`` - lesson 11: the M-step, the E-step in log space, the port's bug
* ``efficient`` - lesson 12: the class layer without attention
* ``pressure`` - lesson 13: FGSM by hand, dead and always-on capsules
"""

from capsedu.course.checks._kit import CheckFailed, CheckResult, grading, yours_or_reference

__all__ = ["CheckFailed", "CheckResult", "grading", "yours_or_reference"]
