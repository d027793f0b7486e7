r"""Checks for lesson 02: primary capsules (Sabour et al. 2017, Section 4).

Shape legend:
    B      batch size
    T      capsule types (32 in the paper)
    D      capsule dimension (8 in the paper)
    H, W   height and width of the primary-capsule grid (6 x 6 in the paper)
    I      primary capsules = T * H * W, ordered type-major: i = t*H*W + y*W + x
    C      channels

The primary-capsule convolution gives (B, T*D, H, W); channel ``t*D + d`` is dimension ``d`` of
capsule type ``t``. :class:`capsedu.PrimaryCaps` turns that into (B, I, D) and squashes (Eq. 1).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from capsedu.course.checks._kit import (
    CheckResult,
    call_learner,
    mistake,
    other,
    reworded,
    shape_of,
    verdict,
)
from capsedu.nets.capsnet import CapsNetConfig
from capsedu.nets.primary import PrimaryCaps
from capsedu.nets.squash import squash

ToCapsulesFn = Callable[[torch.Tensor, int, int], torch.Tensor]
TurnFn = Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]
GridFn = Callable[[int, int, int, int], int]


def reference_to_capsules(features: torch.Tensor, num_types: int, caps_dim: int) -> torch.Tensor:
    r""":class:`capsedu.PrimaryCaps`'s reshape and squash as a function: (B, T*D, H, W) -> (B, T*H*W, D).

    Channel ``t*D + d`` is dimension ``d`` of type ``t``; capsules are type-major,
    ``i = t*H*W + y*W + x`` (the official code's ``transpose([0, 1, 3, 4, 2])``).
    """
    batch, channels, height, width = features.shape
    if channels != num_types * caps_dim:
        raise ValueError(f"features must have num_types * caps_dim = {num_types * caps_dim} channels, "
                         f"got shape {tuple(features.shape)}")
    u = features.view(batch, num_types, caps_dim, height, width)  # (B, T, D, H, W)
    u = u.permute(0, 1, 3, 4, 2)  # (B, T, H, W, D)
    return squash(u.reshape(batch, num_types * height * width, caps_dim), dim=-1)  # (B, I, D)


def _wrong_layouts(features: torch.Tensor, types: int, dim: int) -> list[tuple[torch.Tensor, str]]:
    r"""Capsules from typical wrong reshapes of ``features`` (B, T*D, H, W), each with its hint."""
    batch, _, height, width = features.shape
    split = features.view(batch, types, dim, height, width)  # (B, T, D, H, W)
    return [
        (squash(features.reshape(batch, -1, dim)),
         mistake("reshaped-without-split",
                 "you reshaped the conv output directly (.view(B, -1, D)): each 'capsule' is then "
                 "D neighbouring pixels of ONE channel. Split the channels into (T, D) first, then "
                 "move D last: view(B, T, D, H, W).permute(0, 1, 3, 4, 2)")),
        (squash(split.permute(0, 3, 4, 1, 2).reshape(batch, -1, dim)),
         mistake("position-major-order",
                 "right capsules, wrong order: yours are position-major (i = (y*W + x)*T + t); "
                 "capsedu is type-major (i = t*H*W + y*W + x): permute to (B, T, H, W, D)")),
        (squash(features.view(batch, dim, types, height, width).permute(0, 2, 3, 4, 1)
                .reshape(batch, -1, dim)),
         mistake("channels-split-as-d-t",
                 "you split the channels as (D, T): channel t*D + d is dimension d of type t, so "
                 "view them as (B, T, D, H, W)")),
        (split.permute(0, 1, 3, 4, 2).reshape(batch, -1, dim),
         mistake("not-squashed",
                 "the layout is right but the capsules are not squashed: apply squash along the "
                 "last dimension (Eq. 1)")),
    ]


def _to_capsules_hint(fn: ToCapsulesFn, features: torch.Tensor, expected: torch.Tensor) -> str:
    with torch.no_grad():
        u, hint = call_learner(fn, features.clone(), 4, 8)
    if "view size is not compatible" in hint:
        return mistake("view-not-contiguous", "after permute the tensor is not contiguous, so "
                       ".view fails: use .reshape (or .contiguous().view)")
    if hint:
        return hint
    if not isinstance(u, torch.Tensor) or u.shape != expected.shape:
        return other("shape",
                     f"expected shape {tuple(expected.shape)} = (B, T*H*W, D) for features "
                     f"{tuple(features.shape)} with T=4, D=8; got {shape_of(u)}")
    if torch.allclose(u, expected, atol=1e-6):
        return ""
    return next((hint for wrong, hint in _wrong_layouts(features, 4, 8) if torch.allclose(u, wrong, atol=1e-6)),
                other("values", "your capsules differ from capsedu.PrimaryCaps's: view (B, T, D, "
                      "H, W), permute(0, 1, 3, 4, 2), reshape (B, T*H*W, D), then squash"))


def check_to_capsules(fn: ToCapsulesFn, *, quiet: bool = False) -> CheckResult:
    r"""Check ``fn(features, num_types, caps_dim)`` against :class:`capsedu.PrimaryCaps`.

    A small PrimaryCaps (T=4, D=8, 5 x 5 grid) computes ``features`` with its own convolution;
    the learner's reshape of them must equal its output exactly.
    """
    with torch.random.fork_rng(devices=[]):  # seed the layer without touching the learner's RNG
        torch.manual_seed(0)
        primary = PrimaryCaps(in_channels=3, num_types=4, caps_dim=8, kernel_size=3, stride=2)
    x = torch.rand(2, 3, 11, 11, generator=torch.Generator().manual_seed(1))  # (B, C, H, W)
    with torch.no_grad():
        features = primary.conv(x)  # (B, T*D, 5, 5)
        expected = primary(x)  # (B, I, D)
    return verdict(_to_capsules_hint(fn, features, expected),
                   "your primary capsules equal capsedu.PrimaryCaps's (type-major, squashed)", quiet=quiet)


def _grid_hint(fn: GridFn) -> str:
    cases = [CapsNetConfig.paper(), CapsNetConfig(image_size=32),
             CapsNetConfig(image_size=40, conv1_kernel=5, primary_kernel=5, primary_stride=3),
             CapsNetConfig(image_size=29)]  # 29 -> 21 -> 7: separates n - k from n - k + 1 in conv1
    for cfg in cases:
        args = (cfg.image_size, cfg.conv1_kernel, cfg.primary_kernel, cfg.primary_stride)
        got, hint = call_learner(fn, *args, what=f"grid_size{args}")
        if hint:
            return hint
        if isinstance(got, torch.Tensor) and got.numel() == 1:
            got = got.item()
        if not isinstance(got, int | float) or isinstance(got, bool):
            return other("type", f"grid_size{args} must return one whole number, got {got!r}")
        if got == cfg.primary_grid:
            continue
        after_conv1 = cfg.image_size - cfg.conv1_kernel + 1
        if got == (cfg.image_size - cfg.conv1_kernel - cfg.primary_kernel) // cfg.primary_stride + 1:
            hint = mistake("conv1-off-by-one",
                           f"off by one in conv1: a kernel of {cfg.conv1_kernel} fits n - k + 1 = "
                           f"{after_conv1} times into {cfg.image_size} pixels, not n - k")
        elif got == (cfg.image_size - cfg.primary_kernel) // cfg.primary_stride + 1:
            hint = mistake("conv1-skipped", f"conv1 comes first: it shrinks {cfg.image_size} to "
                           f"{after_conv1} (size - kernel + 1)")
        elif got == (after_conv1 - cfg.primary_kernel) // cfg.primary_stride:
            hint = mistake("missing-plus-one",
                           "off by one: a convolution gives (n - k) // stride + 1 positions")
        elif got == after_conv1 - cfg.primary_kernel + 1:
            hint = mistake("stride-ignored",
                           f"the primary convolution has stride {cfg.primary_stride}: divide by it")
        else:
            hint = other("values", f"for {args} the grid is {cfg.primary_grid}, you gave {got}")
        return reworded(hint, f"grid_size{args} = {got}: {hint}")
    return ""


def check_grid_size(fn: GridFn, *, quiet: bool = False) -> CheckResult:
    r"""Check ``fn(image_size, conv1_kernel, primary_kernel, primary_stride)`` gives the grid side."""
    return verdict(_grid_hint(fn), "grid sizes are right: 28 -> 20 (conv1) -> 6 (primary conv, stride 2)",
                   quiet=quiet)


def reference_length_and_turn(u: torch.Tensor, u_ref: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Capsules u (B, I, D) against u_ref (B or 1, I, D): (||u|| - ||u_ref||, angle in degrees), (B, I) each."""
    change = u.norm(dim=-1) - u_ref.norm(dim=-1)  # (B, I)
    cosine = torch.nn.functional.cosine_similarity(u, u_ref.expand_as(u), dim=-1)  # (B, I)
    return change, torch.rad2deg(torch.acos(cosine.clamp(-1.0, 1.0)))  # (B, I), (B, I)


def _turn_inputs() -> tuple[torch.Tensor, torch.Tensor]:
    r"""Capsules u (2, I, 8) and one reference (1, I, 8), with same-direction and opposite pairs."""
    generator = torch.Generator().manual_seed(3)
    u = squash(torch.randn(2, 12, 8, generator=generator))  # (B, I, D)
    u_ref = squash(torch.randn(1, 12, 8, generator=generator))  # (1, I, D)
    u[0, 0] = 0.7 * u_ref[0, 0]  # same direction, shorter: angle 0, and the cosine rounds above 1
    u[1, 4] = u_ref[0, 4]  # the same capsule: angle 0, its cosine computed by hand rounds above 1
    u[1, 1] = -0.5 * u_ref[0, 1]  # opposite and shorter: angle 180
    return u, u_ref


def _length_and_turn_hint(fn: TurnFn) -> str:
    u, u_ref = _turn_inputs()
    got, hint = call_learner(fn, u.clone(), u_ref.clone())
    if hint:
        return hint
    change, angle = reference_length_and_turn(u.double(), u_ref.double())  # (B, I) each
    if not isinstance(got, tuple | list) or len(got) != 2:
        return other("type", "return two tensors, (length change, angle), got "
                     f"{type(got).__name__}")
    got_change, got_angle = got
    for name, value in (("length change", got_change), ("angle", got_angle)):
        if not isinstance(value, torch.Tensor) or value.shape != change.shape:
            return other("shape",
                         f"the {name} must have shape (B, I) = {tuple(change.shape)} for u "
                         f"{tuple(u.shape)} and u_ref {tuple(u_ref.shape)} (one value per capsule; "
                         f"the reference broadcasts over B); got {shape_of(value)}")
    got_change, got_angle = got_change.detach().double(), got_angle.detach().double()

    def near(a: torch.Tensor, b: torch.Tensor, atol: float) -> bool:
        return torch.allclose(a, b, atol=atol, equal_nan=False)

    if near(got_change, angle, 0.1) and near(got_angle, change, 1e-5):
        return mistake("outputs-swapped", "the two are swapped: return (length change, angle)")
    if not near(got_change, change, 1e-5):
        if near(got_change, -change, 1e-5):
            return mistake("length-change-sign", "the length change has the wrong sign: "
                           "||u|| - ||u_ref|| (positive when u is longer)")
        if near(got_change, change.abs(), 1e-5):
            return mistake("length-change-abs", "keep the sign of the length change: negative "
                           "when u is shorter than u_ref")
        if near(got_change, (u * u).sum(-1).double() - (u_ref * u_ref).sum(-1).double(), 1e-5):
            return mistake("squared-lengths", "those are squared lengths: compare u.norm(dim=-1) "
                           "with u_ref.norm(dim=-1)")
        return other("values", "the length change differs: ||u|| - ||u_ref||, the norm along the "
                     "last dimension (D)")
    if torch.isnan(got_angle).any():
        return mistake("nan-angles-no-clamp",
                       "NaN angles: rounding can put a cosine just above 1 (here for capsules that "
                       "point the same way); clamp it to [-1, 1] before arccos")
    if near(got_angle, angle, 0.1):
        return ""
    cosine = torch.cos(torch.deg2rad(angle))  # (B, I)
    dot = (u.double() * u_ref.double()).sum(-1)  # (B, I)
    if near(got_angle, torch.deg2rad(angle), 2e-3):
        return mistake("radians-not-degrees",
                       "those are radians: the task asks for degrees (torch.rad2deg)")
    if near(got_angle, cosine, 1e-4):
        return mistake("cosine-not-angle",
                       "that is the cosine of the angle: take arccos, then convert to degrees")
    if near(got_angle, torch.rad2deg(torch.acos(dot.clamp(-1, 1))), 0.1):
        return mistake("dot-not-cosine",
                       "the dot product alone is not the cosine: divide it by both lengths "
                       "(capsules are shorter than 1), or use F.cosine_similarity")
    return other("values", "the angles differ: arccos of u . u_ref / (||u|| ||u_ref||), in "
                 "degrees, per capsule")


def check_length_and_turn(fn: TurnFn, *, quiet: bool = False) -> CheckResult:
    r"""Check ``fn(u (B, I, D), u_ref (B or 1, I, D)) -> (length change, angle in degrees)``, (B, I) each."""
    return verdict(_length_and_turn_hint(fn),
                   "length change and angle are right, including identical and opposite capsules", quiet=quiet)
