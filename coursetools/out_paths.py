r"""Where the course's tools may write their records: never into an installed package.

``python -m coursetools.train_zoo`` writes shipped networks and the scripts of ``benchmarks/``
write studies into the repository's ``capsedu/zoo/``. Run against an installed capsedu instead
(a wheel in ``site-packages``), their defaults would point into that installation; every such
path is refused before any work starts. (No shapes in this module.)

Shape legend: none (no tensor shapes of its own).
"""

from __future__ import annotations

import os
from pathlib import Path

INSTALLED = {"site-packages", "dist-packages"}  # folders that hold installed packages


def outside_installed_packages(path: str | os.PathLike, argument: str) -> Path:
    r"""``path`` resolved, or ``ValueError`` naming ``argument`` when it lies inside an installed
    package's folder: the records belong to the repository, not to an installation."""
    resolved = Path(path).resolve()
    inside = INSTALLED & set(resolved.parts)
    if inside:
        raise ValueError(f"{argument} must be outside installed packages (the repository's "
                         f"capsedu/zoo/, or any folder of yours), got {path} - inside "
                         f"{' or '.join(sorted(inside))}")
    return resolved
