r"""The networks and their pieces, one module per concept, in the order the lessons build them.

====================  =============================================================  ======
module                what it holds                                                  lesson
====================  =============================================================  ======
``contract``          what every network is: ``NetworkConfig``, ``Network``          06
``squash``            the squashing non-linearity (Eq. 1)                            01
``primary``           ``PrimaryCaps``: a convolution read as capsules                02
``routing``           dynamic routing (Procedure 1), readable, and ``DigitCaps``     03
``routing_fast``      the same routing without building û: ``DigitCaps``' default    03
``losses``            the margin loss (Eq. 4), the reconstruction and spread losses  04, 05, 11
``capsnet``           ``CapsNetConfig``, ``CapsNet``, masking, its loss              05, 06
``registry``          network kinds: what checkpoints and the zoo use                06
``cnn``               ``BaselineCNN``: the CNN the CapsNet is compared with          08
``multi_digit``       several digits in one image: when a prediction is right        09
``numpy_caps``        the capsule layer in NumPy, forward and backward               10
``numpy_classifier``  a capsule classifier trained in NumPy only                     10
``em_routing``        EM routing between matrix capsules (2018)                      11
``matrix_capsnet``    matrix-capsule layers and the network                          11
``self_attention``    Efficient-CapsNet's squash and self-attention routing (2021)   12
``efficient_capsnet`` ``EfficientCapsNet``: depthwise primary capsules, one pass     12
``deep_capsnet``      ``DeepCapsNet``: hidden routed capsule layers, no decoder      13
====================  =============================================================  ======

Procedure 1 in ``DigitCaps`` has two implementations, chosen by
``CapsNetConfig.routing``: ``"factored"`` (the default, :mod:`.routing_fast`) or ``"readable"``
(:func:`.routing.dynamic_routing` on the prediction vectors); they are tested equal in values and
gradients. In every network the class-capsule layer is ``class_caps``.

Shape legend: none (no tensor shapes of its own).
"""
