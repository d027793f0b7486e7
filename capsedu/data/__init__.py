r"""Data for the lessons, one module per source or transformation:

* ``files`` - a split's IDX files found, checked by their content's SHA-256 and read; downloads
* ``mnist`` - MNIST from files, a download or the offline subset; batches, subsets, shifts
* ``splits`` - the shipped networks' three splits: train, validation, test
* ``fashion_mnist`` - Fashion-MNIST, in MNIST's format and splits
* ``augment`` - batched affine transformations, the training warps and the table of their ranges
* ``transforms`` - transformed test digits: rotated, scaled, sheared, shifted, affNIST-like
* ``multimnist`` - MultiMNIST: two digits of different classes shifted and overlaid

Shape legend: none (no tensor shapes of its own).
"""
