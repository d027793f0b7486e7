r"""Data for the lessons: MNIST from files, a download or the offline subset (:mod:`.mnist`)."""
