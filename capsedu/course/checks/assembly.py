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
from capsedu.course.checks.primary import reference_to_capsules
from capsedu.course.pieces import Pieces
from capsedu.nets.capsnet import CapsNet, CapsNetConfig, CapsNetOutput, capsnet_loss, mask_capsules
from capsedu.nets.contract import Loss
from capsedu.nets.losses import RECON_WEIGHT, margin_loss, reconstruction_loss
from capsedu.nets.routing import dynamic_routing, prediction_vectors
from capsedu.zoo.shipped import pretrained

TOLERANCE = 1e-4  # max |Δ| allowed between the learner's network and the shipped one
LOSS_TOLERANCE = 1e-5  # relative: 0.0005 x SSE is small, a wrong mask moves the loss by less than 1e-4
GRADIENT_TOLERANCE = 1e-3  # relative to the largest entry of the shipped network's gradient
PIECES_CALLED = ("to_capsules", "routing", "mask")


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


class _Recorder:
    r"""The first call of each piece and each hooked layer: its arguments, as they came in (kept
    even when the call raises), and its output (None until it returns)."""

    def __init__(self, names: dict[str, tuple[str, ...]]) -> None:
        self.names = names  # each piece's parameter names, to read keyword arguments
        self.calls: dict[str, list] = {}

    def piece(self, name: str, fn: Callable) -> Callable:
        def recorded(*args: object, **kwargs: object) -> object:
            first = name not in self.calls
            if first:
                named = dict(zip(self.names.get(name, ()), args)) | kwargs
                self.calls[name] = [tuple(named.get(key) for key in self.names[name]), None]
            out = fn(*args, **kwargs)
            if first:
                self.calls[name][1] = out
            return out
        return recorded

    def hook(self, name: str) -> Callable:
        return lambda _module, args, out: self.calls.setdefault(name, [args, out]) and None


def _reference_stages(capsnet: CapsNet, images: torch.Tensor, labels: torch.Tensor) -> dict[str, torch.Tensor]:
    r"""What the shipped network computes at each stage of its forward pass, masked by ``labels``."""
    cfg = capsnet.config
    with torch.no_grad():
        conv1 = capsnet.conv1(images)  # (B, C1, 20, 20)
        features = torch.relu(conv1)
        primary = capsnet.primary.conv(features)  # (B, T*D_in, 6, 6)
        u = reference_to_capsules(primary, cfg.primary_types, cfg.primary_dim)  # (B, I, D_in)
        u_hat = prediction_vectors(capsnet.class_caps.W, u)  # (B, I, J, D)
        v, _ = dynamic_routing(u_hat, cfg.routing_iterations)  # (B, J, D)
        masked = mask_capsules(v, labels)  # (B, J*D)
        decoded = capsnet.decoder(masked)  # (B, C*H*W)
    return {"conv1": conv1, "features": features, "u": u, "u_hat": u_hat, "v": v,
            "lengths": v.norm(dim=-1), "masked": masked, "decoded": decoded,
            "reconstruction": decoded.view_as(images)}


def _gap(got: object, expected: torch.Tensor) -> float:
    r"""max |got - expected|, or infinity when ``got`` is not a tensor of ``expected``'s shape."""
    if not isinstance(got, torch.Tensor) or got.shape != expected.shape:
        return float("inf")
    return float((got.detach().double() - expected.double()).abs().max())


def _how(got: object, expected: torch.Tensor, tolerance: float = TOLERANCE) -> str:
    if not isinstance(got, torch.Tensor) or got.shape != expected.shape:
        return f"shape {shape_of(got)} instead of {tuple(expected.shape)}"
    return f"max |Δ| = {_gap(got, expected):.3g} (the check allows {tolerance:.2g})"


PARAMETERS = {"to_capsules": ("features", "num_types", "caps_dim"), "routing": ("u_hat", "routing_iterations"),
              "mask": ("capsules", "labels")}  # the pieces' parameters, in the order of lessons 02-05


def _first_arg(calls: dict, name: str, index: int = 0) -> object:
    args = calls[name][0]
    return args[index] if len(args) > index else None


def _layers_problem(calls: dict, ref: dict[str, torch.Tensor], partial: bool = False) -> str:
    for layer in ("conv1", "primary"):
        if layer not in calls and partial:
            return ""
        if layer not in calls:
            return mistake("layer-unused", f"your forward never ran self.{layer}: images -> conv1 -> ReLU -> "
                                           "primary convolution (Figure 1)")
    features = _first_arg(calls, "primary")
    if _gap(features, ref["features"]) <= TOLERANCE:
        return ""
    if _gap(features, ref["conv1"]) <= TOLERANCE:
        return mistake("no-relu", "the primary convolution received conv1's output itself: Figure 1 puts "
                                  "a ReLU after conv1")
    return other("values", f"the primary convolution's input is not ReLU(conv1(images)): {_how(features, ref['features'])}")


def _votes_problem(u_hat: object, ref: dict[str, torch.Tensor]) -> str:
    r"""The votes routed are not û_j|i = W_ij u_i: say how they differ."""
    return other("values", f"the votes û you route differ from û_j|i = W_ij u_i, self.W (I, J, D, D_in) "
                           f"times each u_i (B, I, D_in) over D_in: {_how(u_hat, ref['u_hat'])}")


def _swap_problem(calls: dict, cfg: object) -> str:
    types_dims = tuple(calls["to_capsules"][0][1:3]) if "to_capsules" in calls else ()
    if types_dims == (cfg.primary_dim, cfg.primary_types) and cfg.primary_dim != cfg.primary_types:
        return mistake("types-and-dims-swapped", f"pieces.to_capsules got num_types={types_dims[0]}, "
                                                 f"caps_dim={types_dims[1]}: the order is (features, num_types, caps_dim)")
    return ""


def _pieces_problem(calls: dict, ref: dict[str, torch.Tensor], cfg: object, partial: bool = False) -> str:
    missing = [name for name in PIECES_CALLED if name not in calls]
    if missing and not partial:
        return mistake("piece-not-used", f"your forward never called self.pieces.{missing[0]}: build every "
                                         f"stage from your pieces ({', '.join(PIECES_CALLED)})")
    if "to_capsules" in calls and calls["to_capsules"][1] is not None and _gap(calls["to_capsules"][1], ref["u"]) > TOLERANCE:
        return other("values", f"the primary capsules u (pieces.to_capsules' output) differ from the shipped "
                               f"network's: {_how(calls['to_capsules'][1], ref['u'])}")
    if "routing" not in calls:
        return ""
    if _gap(_first_arg(calls, "routing"), ref["u_hat"]) > TOLERANCE:
        return _votes_problem(_first_arg(calls, "routing"), ref)
    iterations = _first_arg(calls, "routing", 1)
    if iterations != cfg.routing_iterations:
        return mistake("routing-iterations", f"pieces.routing ran with routing_iterations={iterations!r}; the "
                                             f"configuration says {cfg.routing_iterations} (config.routing_iterations)")
    routed = calls["routing"][1]
    v = routed[0] if isinstance(routed, tuple) else routed
    if partial and routed is None:
        return ""
    if _gap(v, ref["v"]) > TOLERANCE:
        return other("values", f"pieces.routing's capsules v differ: {_how(v, ref['v'])}")
    return ""


def _output_problem(out: object, calls: dict, ref: dict[str, torch.Tensor], images: torch.Tensor) -> str:
    if not all(hasattr(out, field) for field in ("capsules", "lengths", "reconstruction")):
        return other("type", f"forward must return a capsedu.CapsNetOutput(capsules, lengths, reconstruction, "
                             f"couplings), got {type(out).__name__}")
    checks = [(out.capsules, "v", other("values", "the capsules you return are not pieces.routing's v")),
              (out.lengths, "lengths", mistake("lengths", "the lengths you return are not ‖v_j‖, the norm "
                                                          "of each class capsule over its last axis"))]
    for got, key, hint in checks:
        if _gap(got, ref[key]) > TOLERANCE:
            return reworded(hint, f"{hint}: {_how(got, ref[key])}")
    if _first_arg(calls, "mask", 1) is None:
        return mistake("mask-by-prediction", "forward(images, labels) masked by the longest capsule: pass the "
                                             "labels on to pieces.mask, so the decoder redraws the true class")
    if _gap(calls["mask"][1], ref["masked"]) > TOLERANCE:
        return other("values", f"pieces.mask's output differs: {_how(calls['mask'][1], ref['masked'])}")
    if "decoder" not in calls or _gap(calls["decoder"][1], ref["decoded"]) > TOLERANCE:
        return mistake("decoder-input", "self.decoder did not run on pieces.mask's output")
    if not isinstance(out.reconstruction, torch.Tensor) or out.reconstruction.shape != images.shape:
        return mistake("reconstruction-shape", f"return the reconstruction shaped like the images, "
                                               f"{tuple(images.shape)}, got {shape_of(out.reconstruction)}")
    return ""


def _loss_problem(result: object, out: CapsNetOutput, capsnet: CapsNet, images: torch.Tensor,
                  labels: torch.Tensor) -> str:
    if not (isinstance(result, tuple) and len(result) == 2 and isinstance(result[0], torch.Tensor)):
        return other("type", f"loss must return capsedu.Loss(value, correct), got {type(result).__name__}")
    value, correct = result
    with torch.no_grad():
        expected, lengths = capsnet_loss(capsnet, images, labels)
        margin = margin_loss(lengths, labels)
        sse = reconstruction_loss(out.reconstruction, images)
        unmasked = margin + RECON_WEIGHT * reconstruction_loss(capsnet(images).reconstruction, images)
    near = [(margin, mistake("loss-without-reconstruction", "your loss is the margin loss alone: add 0.0005 × "
                                                            "the reconstruction loss (Section 4.1)")),
            (margin + sse, mistake("reconstruction-unweighted", "your loss adds the reconstruction loss at full "
                                                                "weight: the paper scales it by 0.0005")),
            (unmasked, mistake("loss-masked-by-prediction", "your loss's reconstruction comes from the longest "
                                                            "capsule: call self(images, labels) so the labels mask"))]
    value = float(value.detach())
    off = abs(value - float(expected))
    for wrong, hint in near:  # a known mistake: equal to it up to float rounding, and far closer to it
        gap = abs(value - float(wrong))
        if gap <= 2e-6 * max(1.0, abs(float(wrong))) and gap < 0.1 * off:
            return hint
    if off > LOSS_TOLERANCE * max(1.0, abs(float(expected))):
        return other("values", f"your loss is {value:.6g}; margin + 0.0005 × SSE of the shipped network "
                               f"is {float(expected):.6g}")
    right = int((lengths.argmax(dim=1) == labels).sum())
    if not isinstance(correct, torch.Tensor | int) or int(correct) != right:
        return mistake("correct-count", f"Loss.correct must count the digits whose longest capsule is the "
                                        f"label: {right} here, got {correct!r}")
    return ""


def _gradient_problem(net: nn.Module, value: torch.Tensor, capsnet: CapsNet, images: torch.Tensor,
                      labels: torch.Tensor) -> str:
    if not value.requires_grad:
        return mistake("no-gradient", "your loss carries no gradient: is part of your network computed under "
                                      "torch.no_grad() or on .detach()-ed tensors?")
    value.backward()
    full, last_only = (_gradients_of(capsnet, images, labels, detach_inner) for detach_inner in (False, True))
    linear = next(m for m in net.decoder.modules() if isinstance(m, nn.Linear))
    mine = {"conv1": net.conv1.weight.grad, "W": net.W.grad, "the decoder's first Linear": linear.weight.grad}
    for name, grad in mine.items():
        if grad is None or not bool(grad.abs().sum() > 0):
            return mistake("no-gradient", f"no gradient reached {name}: is part of your network computed under "
                                          "torch.no_grad() or on .detach()-ed tensors?")
    if all(_gap(grad, full[name]) <= _allowed(full[name]) for name, grad in mine.items()):
        return ""
    if all(_gap(grad, last_only[name]) <= _allowed(last_only[name]) for name, grad in mine.items()):
        return mistake("routing-detaches-inner", "the gradients are those of a routing that lets them through its "
                                                 "last iteration only (detach_inner=True): your routing of lesson 03 "
                                                 "should send them back through every iteration")
    name = next(name for name, grad in mine.items() if _gap(grad, full[name]) > _allowed(full[name]))
    return other("gradient", f"the gradient of the loss for {name} differs from the shipped network's (routed with "
                             f"gradients through every iteration): {_how(mine[name], full[name], _allowed(full[name]))}")


def _allowed(grad: torch.Tensor) -> float:
    return GRADIENT_TOLERANCE * float(grad.abs().max()) + 1e-8


def _gradients_of(capsnet: CapsNet, images: torch.Tensor, labels: torch.Tensor,
                  detach_inner: bool) -> dict[str, torch.Tensor]:
    r"""The gradients of ``capsnet``'s loss for conv1, W and the decoder's first layer, routed with
    ``detach_inner``."""
    twin = CapsNet(dataclasses.replace(capsnet.config, detach_inner=detach_inner, routing="readable"))
    twin.load_state_dict(capsnet.state_dict())
    capsnet_loss(twin, images, labels)[0].backward()
    return {"conv1": twin.conv1.weight.grad, "W": twin.class_caps.W.grad,
            "the decoder's first Linear": twin.decoder[0].weight.grad}


def _built(network_class: Callable, pieces: object, capsnet: CapsNet, recorder: _Recorder) -> tuple[object, str]:
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
    recorder = _Recorder(PARAMETERS)
    net, problem = _built(network_class, pieces, capsnet, recorder)
    if problem:
        return problem
    before = images.clone()
    out, raised = call_learner(net, images, labels, what="your forward")
    ref = _reference_stages(capsnet, before, labels)
    calls, cfg = recorder.calls, capsnet.config
    if raised:  # the first recorded stage that differs says more than the error it led to
        return (_swap_problem(calls, cfg) or _layers_problem(calls, ref, partial=True)
                or _pieces_problem(calls, ref, cfg, partial=True) or raised)
    if not torch.equal(images, before):
        return mistake("changed-images", "your network changed the images in place: compute on new tensors")
    problem = (_swap_problem(calls, cfg) or _layers_problem(calls, ref) or _pieces_problem(calls, ref, cfg)
               or _output_problem(out, calls, ref, images))
    if problem:
        return problem
    loss, problem = call_learner(getattr(net, "loss", None), images, labels, what="your loss")
    problem = problem or _loss_problem(loss, out, capsnet, images, labels)
    return problem or _gradient_problem(net, loss[0], capsnet, images, labels)


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
