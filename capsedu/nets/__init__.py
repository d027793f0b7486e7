r"""The networks and their pieces, one module per concept, in the order the lessons build them.

=================  =====================================================  ======
module             what it holds                                          lesson
=================  =====================================================  ======
``squash``         the squashing non-linearity (Eq. 1)                    01
``primary``        ``PrimaryCaps``: a convolution read as capsules        02
``routing``        dynamic routing (Procedure 1) and ``DigitCaps``        03
``losses``         the margin loss (Eq. 4) and the reconstruction loss    04, 05
``capsnet``        ``CapsNetConfig``, ``CapsNet``, masking, its loss      05, 06
``registry``       network kinds: what fit, checkpoints and the zoo use   06
=================  =====================================================  ======
"""
