r"""The networks and their pieces, one module per concept, in the order the lessons build them.

====================  =============================================================  ======
module                what it holds                                                  lesson
====================  =============================================================  ======
``squash``            the squashing non-linearity (Eq. 1)                            01
``primary``           ``PrimaryCaps``: a convolution read as capsules                02
``routing``           dynamic routing (Procedure 1) and ``DigitCaps``                03
``routing_fast``      the same routing without building û (what ``DigitCaps`` runs)  03
``losses``            the margin loss (Eq. 4) and the reconstruction loss            04, 05
``capsnet``           ``CapsNetConfig``, ``CapsNet``, masking, its loss              05, 06
``registry``          network kinds: what fit, checkpoints and the zoo use           06
``cnn``               ``BaselineCNN``: the CNN the CapsNet is compared with          08
``multi_digit``       two overlapping digits: the two-digit loss and accuracy        09
``numpy_caps``        the capsule layer in NumPy, forward and backward               10
``numpy_classifier``  a capsule classifier trained in NumPy only                     10
``em_routing``        EM routing between matrix capsules (2018)                      11
``matrix_capsnet``    matrix-capsule layers, the spread loss, the network            11
``self_attention``    Efficient-CapsNet's squash and self-attention routing (2021)   12
``efficient_capsnet`` ``EfficientCapsNet``: depthwise primary capsules, one pass     12
====================  =============================================================  ======
"""
