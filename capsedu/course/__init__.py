r"""The course's own tooling: exercise checks (:mod:`.checks`), student handouts
(:mod:`.handouts`), and executing lessons with a fingerprint of what produced their outputs."""
