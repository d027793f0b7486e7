r"""Training any network, one module per concern:

* ``objectives`` - what a network is trained for, as data (margin, two digits, spread, ...)
* ``loop`` - ``fit`` and ``evaluate``, for any module with an objective
* ``schedule`` - the optimiser ``fit`` trains with and its learning-rate schedule
* ``step`` - ``train_step``: one optimisation step on one batch, as ``fit`` takes on each
* ``prediction`` - what a trained network says: ``predict`` and ``pair_accuracy``
* ``uncertainty`` - binomial standard errors of accuracies, and when a gap is a tie
* ``paired`` - two networks on the same images: the paired gap, McNemar's exact test, clusters
* ``checkpoint`` - atomic checkpoints of any registered network, older versions read
* ``seeding`` - ``set_seed`` and deterministic algorithms
* ``modes`` - ``eval_mode``: a network's train/eval mode left as it was found
* ``profile`` - the learner and fast run profiles, the switches read from the environment
* ``hardware`` - the machine: the device to train on, glibc's reuse of large allocations
* ``distributed`` - training on several devices: torchrun and DistributedDataParallel

Shape legend: none (no tensor shapes of its own).
"""
