r"""Data for the lessons: MNIST from files, a download or the offline subset (:mod:`.mnist`),
transformed test digits (:mod:`.transforms`) and overlapping digit pairs (:mod:`.multimnist`)."""
