r"""The package's version, the one place it is written (``pyproject.toml`` reads it from here).

Shape legend: none (no tensor shapes of its own).
"""

__version__ = "0.4.0"
