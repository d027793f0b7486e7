r"""Looking inside trained networks, one module per kind of look:

* ``palette`` - the course's colours: Okabe-Ito, colour-blind-safe maps, the second clues
* ``probes`` - perturbations, routing traces, vote shares, coupling maps, as tensors
* ``figures`` - static figures: image rows, reconstructions, Figure 4, the routing strip
* ``panels`` - the explorers' figures, updated in place
* ``render`` - fast PNG frames by blitting
* ``widgets`` - the routing and perturbation explorers (ipywidgets)
* ``frames`` - the explorers' static forms, frames computed in advance for the book
* ``equivariance`` - one digit turned or shifted in steps: capsule pose and CNN feature paths
* ``transform_explorer`` - the transform explorer: a CapsNet and a CNN on a turned digit
* ``pairs`` - Figure 5, the class-pair accuracy matrix and the pair explorer (MultiMNIST)
* ``graph`` - Procedure 1 unrolled as a computation graph, with ``detach_inner``'s paths
* ``em`` - EM routing iteration by iteration: the trace, the 2-D toy, the EM explorer
* ``critique`` - the scaling critique measured: coupling spread, dead and always-on capsules
* ``attacks`` - adversarial examples (FGSM, PGD, Auto-PGD, Square) and accuracy under attack
* ``adaptive`` - attacks adapted to capsules: the true routing gradient, the vote attack's network, logits views

Shape legend: none (no tensor shapes of its own).
"""
