r"""Data for the lessons: IDX files found, checked and read (:mod:`.files`); MNIST from files, a
download or the offline subset (:mod:`.mnist`) and the shipped networks' three splits
(:mod:`.splits`); Fashion-MNIST (:mod:`.fashion_mnist`); transformed test digits
(:mod:`.transforms`) and overlapping digit pairs (:mod:`.multimnist`)."""
