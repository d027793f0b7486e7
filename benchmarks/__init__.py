r"""The course's benchmarks and studies: scripts that print (and record) figures.

Run each from the repository root as a module, ``python -m benchmarks.NAME --help``; shared
measurement helpers live in :mod:`benchmarks.measure`. Recorded studies go to
``capsedu/zoo/studies/``; benchmarks/README.md, the engineering record, quotes what they printed.

Shape legend: none (no tensor shapes of its own).
"""
