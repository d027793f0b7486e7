r"""Exercise checks for the lessons, one module per lesson topic.

Each check runs the learner's function against ``capsedu``'s reference, prints one clear message -
a pass, or a *specific* hint about what is probably wrong, also when the function is still the
handout's unfinished stub - and returns a :class:`CheckResult` (truthy when passed). In grading
mode (``CAPSEDU_GRADING=1``) a failed check raises :class:`CheckFailed` as well, so that an
autograder such as nbgrader counts it. Only the checks here are named ``check_*``; a guard that
raises on a bad argument elsewhere in the package is a ``require_*``.

* ``_kit`` - the vocabulary the checks share (hints, stubs, the learner's tensor, grading mode, and
  :func:`yours_or_reference`: after a Build-it check, the learner's function or ``capsedu``'s)
* ``_probe`` - a tiny seeded CapsNet to probe the learner's code with
* ``_assembly_stages`` - the stages lesson 06's assembly check compares, one hint per stage
* ``start`` - lesson 00: agreement of parts (the spread of their predictions, a threshold)
* ``squash`` - lesson 01: the squashing non-linearity, the input length for a length, votes needed
* ``primary`` - lesson 02: the capsule reshape (type-major), the grid size, length and turn
* ``routing`` - lesson 03: Procedure 1 (loop and vectorised), and Procedure 1 with one named mistake
* ``routing_exercises`` - lesson 03's exercises: the predictions, the wrong axis, |Δb| per iteration
* ``margin`` - lesson 04: the margin loss (Eq. 4), a peer's capsule loss, the pull on a length
* ``decoder`` - lesson 05: masking, the decoder, the SSE reconstruction loss
* ``decoder_exercises`` - lesson 05's exercises: redrawing from a chosen capsule, the closest input
* ``assembly`` - lesson 06: the learner's CapsNet from their pieces, against the shipped one
  with the same weights, stage by stage
* ``training`` - lesson 06: one training step, margin violations, uniform couplings
* ``exploring`` - lesson 07: the Fig. 4 probe (perturb one dimension, decode), a shift that a
  stroke-weight change cannot fake
* ``robustness`` - lesson 08: turning digits (affine_grid), one probe of rotation per class on
  its own capsule, a drawing's orientation
* ``multimnist`` - lesson 09: a pair by hand, the two-digit loss, each reconstruction's own share
* ``backprop`` - lesson 10: squash and routing backward passes in NumPy, black-box routing tests
* ``em`` - lesson 11: the M-step, the E-step in log space, the port's bug
* ``em_schedule`` - lesson 11's Exercise 1: EM routing with a schedule of inverse temperatures
* ``efficient`` - lesson 12: self-attention routing, the class layer with uniform couplings
* ``pressure`` - lesson 13: FGSM by hand, FGSM on the capsules' margin loss

Shape legend: none (no tensor shapes of its own).
"""

from capsedu.course.checks._kit import CheckFailed, CheckResult, grading, yours_or_reference

__all__ = ["CheckFailed", "CheckResult", "grading", "yours_or_reference"]
