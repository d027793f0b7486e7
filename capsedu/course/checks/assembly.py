r"""Check for lesson 06's assembly: the learner's ``MyCapsNet``, built from their own pieces,
against the shipped CapsNet with the same weights.

The check builds ``MyCapsNet(config, pieces)`` with the shipped CapsNet's configuration, copies
the shipped weights into it (:func:`load_capsnet_weights`: the mapping the lesson documents),
runs it on the digits it is given and compares, stage by stage, what each piece received and
returned with what the shipped network computes there: conv1 and its ReLU, the primary
convolution, ``pieces.to_capsules``, the votes û = W u that ``pieces.routing`` receives, its output, the lengths,
``pieces.mask``, the decoder and the reconstruction's shape, then ``loss`` (its value and its
count of right answers), the gradients that reach conv1, W and the decoder, and whether the
images were changed in place. It names the first stage that differs and how. The gradients are
compared with a CapsNet that routes with gradients through every iteration (``detach_inner=False``),
as the routing of lesson 03 does.

Shape legend:
    B      batch size (the digits checked)
    I      primary capsules
    J      classes
    D_in   primary capsule dimension
    D      class capsule dimension
    C, H, W  image channels, height, width
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import torch
from torch import nn

from capsedu.course.checks._assembly_stages import (
    PARAMETERS,
    PIECES_CALLED,
    TOLERANCE,
    Recorder,
    gradient_problem,
    layers_problem,
    loss_problem,
    output_problem,
    pieces_problem,
    reference_stages,
    swap_problem,
)
from capsedu.course.checks._kit import (
    CheckFailed,
    CheckResult,
    call_learner,
    mistake,
    other,
    reworded,
    shape_of,
    verdict,
)
from capsedu.course.pieces import Pieces
from capsedu.nets.capsnet import CapsNet, CapsNetConfig, CapsNetOutput
from capsedu.nets.contract import Loss
from capsedu.nets.losses import RECON_WEIGHT
from capsedu.nets.routing import prediction_vectors
from capsedu.zoo.shipped import pretrained


def _layer(net: nn.Module, name: str, kind: type) -> nn.Module:
    layer = getattr(net, name, None)
    if not isinstance(layer, kind):
        raise ValueError(f"MyCapsNet needs self.{name}, an nn.{kind.__name__}; got {type(layer).__name__}")
    return layer


def _copy(name: str, mine: torch.Tensor | None, theirs: torch.Tensor) -> None:
    if not isinstance(mine, torch.Tensor) or mine.shape != theirs.shape:
        raise ValueError(f"self.{name} must have shape {tuple(theirs.shape)} to take the shipped "
                         f"weights, got {shape_of(mine)}")
    mine.copy_(theirs)


def _weight_pairs(net: nn.Module, capsnet: CapsNet) -> list[tuple[str, torch.Tensor, torch.Tensor]]:
    r"""(name, net's tensor, capsnet's tensor) for every weight of the mapping."""
    layers = [(_layer(net, "conv1", nn.Conv2d), capsnet.conv1, "conv1"),
              (_layer(net, "primary", nn.Conv2d), capsnet.primary.conv, "primary")]
    mine_linear = [m for m in _layer(net, "decoder", nn.Module).modules() if isinstance(m, nn.Linear)]
    theirs_linear = [m for m in capsnet.decoder.modules() if isinstance(m, nn.Linear)]
    if len(mine_linear) != len(theirs_linear):
        raise ValueError(f"self.decoder must have {len(theirs_linear)} nn.Linear layers, got {len(mine_linear)}")
    layers += [(mine, theirs, f"decoder's Linear {k}") for k, (mine, theirs) in enumerate(zip(mine_linear, theirs_linear))]
    W = getattr(net, "W", None)
    if not isinstance(W, nn.Parameter):
        raise ValueError(f"MyCapsNet needs self.W, an nn.Parameter (I, J, D, D_in); got {type(W).__name__}")
    pairs = [(f"{name}.{part}", getattr(mine, part), getattr(theirs, part))
             for mine, theirs, name in layers for part in ("weight", "bias")]
    return pairs + [("W", W, capsnet.class_caps.W)]


def load_capsnet_weights(net: nn.Module, capsnet: CapsNet) -> None:
    r"""Copy ``capsnet``'s weights into ``net``, a network with the attributes of lesson 06:

    ========================================  =====================================
    ``capsnet``                               ``net``
    ========================================  =====================================
    ``conv1`` (weight, bias)                  ``conv1``, an ``nn.Conv2d``
    ``primary.conv`` (weight, bias)           ``primary``, an ``nn.Conv2d``
    ``class_caps.W`` (I, J, D, D_in)          ``W``, an ``nn.Parameter`` (I, J, D, D_in)
    the ``nn.Linear`` layers of ``decoder``   those of ``decoder``, in the same order
    ========================================  =====================================

    Raises ``ValueError`` naming the attribute whose kind or shape differs.
    """
    if not isinstance(capsnet, CapsNet):
        raise TypeError(f"capsnet must be a capsedu.CapsNet, got {type(capsnet).__name__}")
    with torch.no_grad():
        for name, mine, theirs in _weight_pairs(net, capsnet):
            _copy(name, mine, theirs)


def as_capsnet(net: nn.Module, config: CapsNetConfig) -> CapsNet:
    r"""A :class:`CapsNet` of ``config`` holding ``net``'s weights: :func:`load_capsnet_weights` backwards.

    Lesson 06 saves the learner's trained network this way, as a checkpoint that
    :func:`capsedu.load_checkpoint` opens in later lessons; the check showed that the two compute the same.
    """
    capsnet = CapsNet(config)
    with torch.no_grad():
        for name, mine, theirs in _weight_pairs(net, capsnet):
            if not isinstance(mine, torch.Tensor) or mine.shape != theirs.shape:
                raise ValueError(f"net's {name} must have shape {tuple(theirs.shape)} for config, got {shape_of(mine)}")
            theirs.copy_(mine)
    return capsnet.eval()


def _built(network_class: Callable, pieces: object, capsnet: CapsNet, recorder: Recorder) -> tuple[object, str]:
    r"""The learner's network with ``capsnet``'s weights, its pieces and layers recorded, or a hint."""
    recording = dataclasses.replace(pieces, **{name: recorder.piece(name, getattr(pieces, name))
                                               for name in PIECES_CALLED})
    net, problem = call_learner(network_class, capsnet.config, recording, what="MyCapsNet(config, pieces)")
    if problem:
        return None, problem
    if not isinstance(net, nn.Module):
        return None, other("type", f"MyCapsNet must be an nn.Module, got {type(net).__name__}")
    W = getattr(net, "W", None)
    if isinstance(W, torch.Tensor) and W.numel() > 1 and not 0.005 < float(W.detach().std()) < 0.02:
        return None, mistake("w-initial-scale", f"self.W starts with standard deviation {float(W.detach().std()):.3g}: "
                                                "draw it with standard deviation 0.01, as the paper's code does")
    try:
        load_capsnet_weights(net, capsnet)
    except ValueError as error:
        return None, mistake("weight-mapping", str(error))
    for name in ("conv1", "primary", "decoder"):
        getattr(net, name).register_forward_hook(recorder.hook(name))
    return net.eval(), ""


def _assembly_hint(network_class: Callable, pieces: object, images: torch.Tensor, labels: torch.Tensor,
                   capsnet: CapsNet) -> str:
    recorder = Recorder(PARAMETERS)
    net, problem = _built(network_class, pieces, capsnet, recorder)
    if problem:
        return problem
    before = images.clone()
    out, raised = call_learner(net, images, labels, what="your forward")
    ref = reference_stages(capsnet, before, labels)
    calls, cfg = recorder.calls, capsnet.config
    if raised:  # the first recorded stage that differs says more than the error it led to
        return (swap_problem(calls, cfg) or layers_problem(calls, ref, partial=True)
                or pieces_problem(calls, ref, cfg, partial=True) or raised)
    if not torch.equal(images, before):
        return mistake("changed-images", "your network changed the images in place: compute on new tensors")
    problem = (swap_problem(calls, cfg) or layers_problem(calls, ref) or pieces_problem(calls, ref, cfg)
               or output_problem(out, calls, ref, images))
    if problem:
        return problem
    loss, problem = call_learner(getattr(net, "loss", None), images, labels, what="your loss")
    problem = problem or loss_problem(loss, out, capsnet, images, labels)
    return problem or gradient_problem(net, loss[0], capsnet, images, labels)


def _other_sizes() -> CapsNet:
    r"""A CapsNet of other sizes than the paper's (4 primary types of 6 dimensions, 12-D class
    capsules), its weights drawn with standard deviation 0.1 so that its capsules are long."""
    config = CapsNetConfig(conv1_channels=8, primary_types=4, primary_dim=6, digit_dim=12, decoder_hidden=(64, 128))
    capsnet = CapsNet(config)
    generator = torch.Generator().manual_seed(12)
    with torch.no_grad():
        for parameter in capsnet.parameters():
            parameter.copy_(0.1 * torch.randn(parameter.shape, generator=generator))
    return capsnet.eval()


def _probe_digits() -> tuple[torch.Tensor, torch.Tensor]:
    r"""16 seeded images with grey levels (B, 1, 28, 28) and labels (B,), when the lesson gives none."""
    generator = torch.Generator().manual_seed(6)
    return torch.rand(16, 1, 28, 28, generator=generator), torch.arange(16) % 10


def check_assembly(network_class: Callable, *, pieces: Pieces | None = None, images: torch.Tensor | None = None,
                   labels: torch.Tensor | None = None, capsnet: CapsNet | None = None,
                   quiet: bool = False) -> CheckResult:
    r"""Check ``network_class(config, pieces)`` against ``capsnet`` (default: the shipped ``capsnet``) on
    ``images`` (B, 1, 28, 28) and ``labels`` (B,): every stage, the loss and its gradients.

    ``pieces`` default to ``capsedu``'s; ``images`` and ``labels`` to 16 seeded grey images. The
    learner's random state is left as it was."""
    pieces = Pieces.reference() if pieces is None else pieces
    if images is None or labels is None:
        images, labels = _probe_digits()
    with torch.random.fork_rng(devices=[]):
        capsnet = pretrained("capsnet") if capsnet is None else capsnet
        if not isinstance(capsnet, CapsNet):
            raise TypeError(f"capsnet must be a capsedu.CapsNet, got {type(capsnet).__name__}")
        hint = _assembly_hint(network_class, pieces, images.clone(), labels.clone(), capsnet.eval())
        if not hint:  # sizes other than the shipped network's, where T != D_in and few answers are right
            probe_images, probe_labels = _probe_digits()
            hint = _assembly_hint(network_class, pieces, probe_images, probe_labels, _other_sizes())
            hint = hint and reworded(hint, f"{hint} (on a CapsNet of other sizes: 4 primary capsule types of 6 "
                                           "dimensions, 12-D class capsules, random weights)")
    return verdict(hint, f"your MyCapsNet, given the shipped CapsNet's weights, computes its capsules and "
                         f"reconstructions on these {len(labels)} digits within {TOLERANCE:g}, and its loss and "
                         "gradients; so does it with other sizes", quiet=quiet)


class _ReferenceCapsNet(nn.Module):
    r"""The assembly the check compares with: lesson 06's CapsNet from ``pieces``."""

    def __init__(self, config: object, pieces: object) -> None:
        super().__init__()
        self.config, self.pieces = config, pieces
        self.conv1 = nn.Conv2d(config.in_channels, config.conv1_channels, config.conv1_kernel)
        self.primary = nn.Conv2d(config.conv1_channels, config.primary_types * config.primary_dim,
                                 config.primary_kernel, config.primary_stride)
        self.W = nn.Parameter(0.01 * torch.randn(config.num_primary_caps, config.num_classes,
                                                 config.digit_dim, config.primary_dim))  # (I, J, D, D_in)
        self.decoder = pieces.decoder(config.num_classes * config.digit_dim, config.decoder_hidden,
                                      config.in_channels * config.image_size ** 2)

    def forward(self, images: torch.Tensor, labels: torch.Tensor | None = None) -> CapsNetOutput:
        cfg, p = self.config, self.pieces
        features = self.primary(torch.relu(self.conv1(images)))  # (B, T*D_in, 6, 6)
        u = p.to_capsules(features, cfg.primary_types, cfg.primary_dim)  # (B, I, D_in)
        v, c = p.routing(prediction_vectors(self.W, u), cfg.routing_iterations)  # (B, J, D), (B, I, J)
        reconstruction = self.decoder(p.mask(v, labels)).view_as(images)  # (B, C, H, W)
        return CapsNetOutput(v, v.norm(dim=-1), reconstruction, c)

    def loss(self, images: torch.Tensor, labels: torch.Tensor) -> Loss:
        out = self(images, labels)
        targets = nn.functional.one_hot(labels, self.config.num_classes).to(out.lengths)  # (B, J)
        value = self.pieces.margin_loss(out.lengths, targets) + RECON_WEIGHT * self.pieces.sse_loss(
            out.reconstruction, images)
        return Loss(value, (out.lengths.argmax(dim=1) == labels).sum())


def assembled_or_reference(network_class: Callable, *, pieces: Pieces | None = None,
                           images: torch.Tensor | None = None, labels: torch.Tensor | None = None,
                           capsnet: CapsNet | None = None) -> Callable:
    r"""``network_class`` when it passes :func:`check_assembly` (run quietly, with the same arguments),
    else the check's own assembly of the pieces; prints which, in one line."""
    try:
        ok = bool(check_assembly(network_class, pieces=pieces, images=images, labels=labels, capsnet=capsnet,
                                 quiet=True))
    except CheckFailed:  # grading mode: a failed check raises even when quiet
        ok = False
    if ok:
        print("→ from here on this lesson uses your MyCapsNet")
        return network_class
    print("→ from here on this lesson uses the check's own assembly of your pieces in place of your MyCapsNet "
          "(yours does not pass its check yet)")
    return _ReferenceCapsNet
