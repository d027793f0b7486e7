r"""The stages of lesson 06's assembly check: what each piece of the learner's CapsNet received and
returned, recorded as it runs, against what the shipped CapsNet computes there; then the loss and
the gradients. :mod:`capsedu.course.checks.assembly` builds the network and calls these in order;
each returns '' or a hint naming the first stage that differs and how.

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

from capsedu.course.checks._kit import mistake, other, reworded, shape_of
from capsedu.course.checks.primary import reference_to_capsules
from capsedu.nets.capsnet import CapsNet, CapsNetOutput, capsnet_loss, mask_capsules
from capsedu.nets.losses import RECON_WEIGHT, margin_loss, reconstruction_loss
from capsedu.nets.routing import dynamic_routing, prediction_vectors

TOLERANCE = 1e-4  # max |Δ| allowed between the learner's network and the shipped one
LOSS_TOLERANCE = 1e-5  # relative: 0.0005 x SSE is small, a wrong mask moves the loss by less than 1e-4
GRADIENT_TOLERANCE = 1e-3  # relative to the largest entry of the shipped network's gradient
PIECES_CALLED = ("to_capsules", "routing", "mask")


class Recorder:
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


def reference_stages(capsnet: CapsNet, images: torch.Tensor, labels: torch.Tensor) -> dict[str, torch.Tensor]:
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


def gap(got: object, expected: torch.Tensor) -> float:
    r"""max |got - expected|, or infinity when ``got`` is not a tensor of ``expected``'s shape."""
    if not isinstance(got, torch.Tensor) or got.shape != expected.shape:
        return float("inf")
    return float((got.detach().double() - expected.double()).abs().max())


def how(got: object, expected: torch.Tensor, tolerance: float = TOLERANCE) -> str:
    if not isinstance(got, torch.Tensor) or got.shape != expected.shape:
        return f"shape {shape_of(got)} instead of {tuple(expected.shape)}"
    return f"max |Δ| = {gap(got, expected):.3g} (the check allows {tolerance:.2g})"


PARAMETERS = {"to_capsules": ("features", "num_types", "caps_dim"), "routing": ("u_hat", "routing_iterations"),
              "mask": ("capsules", "labels")}  # the pieces' parameters, in the order of lessons 02-05


def first_arg(calls: dict, name: str, index: int = 0) -> object:
    args = calls[name][0]
    return args[index] if len(args) > index else None


def layers_problem(calls: dict, ref: dict[str, torch.Tensor], partial: bool = False) -> str:
    for layer in ("conv1", "primary"):
        if layer not in calls and partial:
            return ""
        if layer not in calls:
            return mistake("layer-unused", f"your forward never ran self.{layer}: images -> conv1 -> ReLU -> "
                                           "primary convolution (Figure 1)")
    features = first_arg(calls, "primary")
    if gap(features, ref["features"]) <= TOLERANCE:
        return ""
    if gap(features, ref["conv1"]) <= TOLERANCE:
        return mistake("no-relu", "the primary convolution received conv1's output itself: Figure 1 puts "
                                  "a ReLU after conv1")
    return other("values", f"the primary convolution's input is not ReLU(conv1(images)): {how(features, ref['features'])}")


def votes_problem(u_hat: object, ref: dict[str, torch.Tensor]) -> str:
    r"""The votes routed are not û_j|i = W_ij u_i: say how they differ."""
    return other("values", f"the votes û you route differ from û_j|i = W_ij u_i, self.W (I, J, D, D_in) "
                           f"times each u_i (B, I, D_in) over D_in: {how(u_hat, ref['u_hat'])}")


def swap_problem(calls: dict, cfg: object) -> str:
    types_dims = tuple(calls["to_capsules"][0][1:3]) if "to_capsules" in calls else ()
    if types_dims == (cfg.primary_dim, cfg.primary_types) and cfg.primary_dim != cfg.primary_types:
        return mistake("types-and-dims-swapped", f"pieces.to_capsules got num_types={types_dims[0]}, "
                                                 f"caps_dim={types_dims[1]}: the order is (features, num_types, caps_dim)")
    return ""


def pieces_problem(calls: dict, ref: dict[str, torch.Tensor], cfg: object, partial: bool = False) -> str:
    missing = [name for name in PIECES_CALLED if name not in calls]
    if missing and not partial:
        return mistake("piece-not-used", f"your forward never called self.pieces.{missing[0]}: build every "
                                         f"stage from your pieces ({', '.join(PIECES_CALLED)})")
    if "to_capsules" in calls and calls["to_capsules"][1] is not None and gap(calls["to_capsules"][1], ref["u"]) > TOLERANCE:
        return other("values", f"the primary capsules u (pieces.to_capsules' output) differ from the shipped "
                               f"network's: {how(calls['to_capsules'][1], ref['u'])}")
    if "routing" not in calls:
        return ""
    if gap(first_arg(calls, "routing"), ref["u_hat"]) > TOLERANCE:
        return votes_problem(first_arg(calls, "routing"), ref)
    iterations = first_arg(calls, "routing", 1)
    if iterations != cfg.routing_iterations:
        return mistake("routing-iterations", f"pieces.routing ran with routing_iterations={iterations!r}; the "
                                             f"configuration says {cfg.routing_iterations} (config.routing_iterations)")
    routed = calls["routing"][1]
    v = routed[0] if isinstance(routed, tuple) else routed
    if partial and routed is None:
        return ""
    if gap(v, ref["v"]) > TOLERANCE:
        return other("values", f"pieces.routing's capsules v differ: {how(v, ref['v'])}")
    return ""


def output_problem(out: object, calls: dict, ref: dict[str, torch.Tensor], images: torch.Tensor) -> str:
    if not all(hasattr(out, field) for field in ("capsules", "lengths", "reconstruction")):
        return other("type", f"forward must return a capsedu.CapsNetOutput(capsules, lengths, reconstruction, "
                             f"couplings), got {type(out).__name__}")
    checks = [(out.capsules, "v", other("values", "the capsules you return are not pieces.routing's v")),
              (out.lengths, "lengths", mistake("lengths", "the lengths you return are not ‖v_j‖, the norm "
                                                          "of each class capsule over its last axis"))]
    for got, key, hint in checks:
        if gap(got, ref[key]) > TOLERANCE:
            return reworded(hint, f"{hint}: {how(got, ref[key])}")
    if first_arg(calls, "mask", 1) is None:
        return mistake("mask-by-prediction", "forward(images, labels) masked by the longest capsule: pass the "
                                             "labels on to pieces.mask, so the decoder redraws the true class")
    if gap(calls["mask"][1], ref["masked"]) > TOLERANCE:
        return other("values", f"pieces.mask's output differs: {how(calls['mask'][1], ref['masked'])}")
    if "decoder" not in calls or gap(calls["decoder"][1], ref["decoded"]) > TOLERANCE:
        return mistake("decoder-input", "self.decoder did not run on pieces.mask's output")
    if not isinstance(out.reconstruction, torch.Tensor) or out.reconstruction.shape != images.shape:
        return mistake("reconstruction-shape", f"return the reconstruction shaped like the images, "
                                               f"{tuple(images.shape)}, got {shape_of(out.reconstruction)}")
    return ""


def loss_problem(result: object, out: CapsNetOutput, capsnet: CapsNet, images: torch.Tensor,
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


def gradient_problem(net: nn.Module, value: torch.Tensor, capsnet: CapsNet, images: torch.Tensor,
                      labels: torch.Tensor) -> str:
    if not value.requires_grad:
        return mistake("no-gradient", "your loss carries no gradient: is part of your network computed under "
                                      "torch.no_grad() or on .detach()-ed tensors?")
    value.backward()
    full, last_only = (gradients_of(capsnet, images, labels, detach_inner) for detach_inner in (False, True))
    linear = next(m for m in net.decoder.modules() if isinstance(m, nn.Linear))
    mine = {"conv1": net.conv1.weight.grad, "W": net.W.grad, "the decoder's first Linear": linear.weight.grad}
    for name, grad in mine.items():
        if grad is None or not bool(grad.abs().sum() > 0):
            return mistake("no-gradient", f"no gradient reached {name}: is part of your network computed under "
                                          "torch.no_grad() or on .detach()-ed tensors?")
    if all(gap(grad, full[name]) <= allowed(full[name]) for name, grad in mine.items()):
        return ""
    if all(gap(grad, last_only[name]) <= allowed(last_only[name]) for name, grad in mine.items()):
        return mistake("routing-detaches-inner", "the gradients are those of a routing that lets them through its "
                                                 "last iteration only (detach_inner=True): your routing of lesson 03 "
                                                 "should send them back through every iteration")
    name = next(name for name, grad in mine.items() if gap(grad, full[name]) > allowed(full[name]))
    return other("gradient", f"the gradient of the loss for {name} differs from the shipped network's (routed with "
                             f"gradients through every iteration): {how(mine[name], full[name], allowed(full[name]))}")


def allowed(grad: torch.Tensor) -> float:
    return GRADIENT_TOLERANCE * float(grad.abs().max()) + 1e-8


def gradients_of(capsnet: CapsNet, images: torch.Tensor, labels: torch.Tensor,
                  detach_inner: bool) -> dict[str, torch.Tensor]:
    r"""The gradients of ``capsnet``'s loss for conv1, W and the decoder's first layer, routed with
    ``detach_inner``."""
    twin = CapsNet(dataclasses.replace(capsnet.config, detach_inner=detach_inner, routing="readable"))
    twin.load_state_dict(capsnet.state_dict())
    capsnet_loss(twin, images, labels)[0].backward()
    return {"conv1": twin.conv1.weight.grad, "W": twin.class_caps.W.grad,
            "the decoder's first Linear": twin.decoder[0].weight.grad}
