r"""Checks for lesson 02: primary capsules (Sabour et al. 2017, Section 4).

Shape legend:
    B      batch size
    T      capsule types (32 in the paper)
    D      capsule dimension (8 in the paper)
    H, W   height and width of the primary-capsule grid (6 x 6 in the paper)
    I      primary capsules = T * H * W, ordered type-major: i = t*H*W + y*W + x

The primary-capsule convolution gives (B, T*D, H, W); channel ``t*D + d`` is dimension ``d`` of
capsule type ``t``. :class:`capsedu.PrimaryCaps` turns that into (B, I, D) and squashes (Eq. 1).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from capsedu.course.checks._kit import CheckResult, call_learner, shape_of, verdict
from capsedu.nets.capsnet import CapsNetConfig
from capsedu.nets.primary import PrimaryCaps
from capsedu.nets.squash import squash

ToCapsulesFn = Callable[[torch.Tensor, int, int], torch.Tensor]
LengthMapFn = Callable[[torch.Tensor, int, int], torch.Tensor]
GridFn = Callable[[int, int, int, int], int]


def _wrong_layouts(features: torch.Tensor, types: int, dim: int) -> list[tuple[torch.Tensor, str]]:
    r"""Capsules from typical wrong reshapes of ``features`` (B, T*D, H, W), each with its hint."""
    batch, _, height, width = features.shape
    split = features.view(batch, types, dim, height, width)  # (B, T, D, H, W)
    return [
        (squash(features.reshape(batch, -1, dim)),
         ("you reshaped the conv output directly (.view(B, -1, D)): each 'capsule' is then D "
         "neighbouring pixels of ONE channel. Split the channels into (T, D) first, then move D "
         "last: view(B, T, D, H, W).permute(0, 1, 3, 4, 2)")),
        (squash(split.permute(0, 3, 4, 1, 2).reshape(batch, -1, dim)),
         ("right capsules, wrong order: yours are position-major (i = (y*W + x)*T + t); capsedu "
         "is type-major (i = t*H*W + y*W + x): permute to (B, T, H, W, D)")),
        (squash(features.view(batch, dim, types, height, width).permute(0, 2, 3, 4, 1)
                .reshape(batch, -1, dim)),
         ("you split the channels as (D, T): channel t*D + d is dimension d of type t, so view "
         "them as (B, T, D, H, W)")),
        (split.permute(0, 1, 3, 4, 2).reshape(batch, -1, dim),
         ("the layout is right but the capsules are not squashed: apply squash along the last "
         "dimension (Eq. 1)")),
    ]


def _to_capsules_hint(fn: ToCapsulesFn, features: torch.Tensor, expected: torch.Tensor) -> str:
    with torch.no_grad():
        u, hint = call_learner(fn, features.clone(), 4, 8)
    if "view size is not compatible" in hint:
        return "after permute the tensor is not contiguous, so .view fails: use .reshape (or .contiguous().view)"
    if hint:
        return hint
    if not isinstance(u, torch.Tensor) or u.shape != expected.shape:
        return (f"expected shape {tuple(expected.shape)} = (B, T*H*W, D) for features "
                f"{tuple(features.shape)} with T=4, D=8; got {shape_of(u)}")
    if torch.allclose(u, expected, atol=1e-6):
        return ""
    return next((hint for wrong, hint in _wrong_layouts(features, 4, 8) if torch.allclose(u, wrong, atol=1e-6)),
                "your capsules differ from capsedu.PrimaryCaps's: view (B, T, D, H, W), "
                "permute(0, 1, 3, 4, 2), reshape (B, T*H*W, D), then squash")


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
             CapsNetConfig(image_size=40, conv1_kernel=5, primary_kernel=5, primary_stride=3)]
    for cfg in cases:
        args = (cfg.image_size, cfg.conv1_kernel, cfg.primary_kernel, cfg.primary_stride)
        got, hint = call_learner(fn, *args, what=f"grid_size{args}")
        if hint:
            return hint
        if got == cfg.primary_grid:
            continue
        after_conv1 = cfg.image_size - cfg.conv1_kernel + 1
        if got == (cfg.image_size - cfg.primary_kernel) // cfg.primary_stride + 1:
            hint = f"conv1 comes first: it shrinks {cfg.image_size} to {after_conv1} (size - kernel + 1)"
        elif got == (after_conv1 - cfg.primary_kernel) // cfg.primary_stride:
            hint = "off by one: a convolution gives (n - k) // stride + 1 positions"
        elif got == after_conv1 - cfg.primary_kernel + 1:
            hint = f"the primary convolution has stride {cfg.primary_stride}: divide by it"
        else:
            hint = f"for {args} the grid is {cfg.primary_grid}, you gave {got}"
        return f"grid_size{args} = {got}: {hint}"
    return ""


def check_grid_size(fn: GridFn, *, quiet: bool = False) -> CheckResult:
    r"""Check ``fn(image_size, conv1_kernel, primary_kernel, primary_stride)`` gives the grid side."""
    return verdict(_grid_hint(fn), "grid sizes are right: 28 -> 20 (conv1) -> 6 (primary conv, stride 2)",
                   quiet=quiet)


def _length_map_hint(fn: LengthMapFn) -> str:
    types, grid = 3, 4
    generator = torch.Generator().manual_seed(2)
    u = squash(torch.randn(2, types * grid * grid, 8, generator=generator))  # (B, I, D)
    lengths = u.norm(dim=-1)  # (B, I)
    expected = lengths.view(2, types, grid, grid)  # (B, T, H, W)
    got, hint = call_learner(fn, u.clone(), types, grid)
    if hint:
        return hint
    if not isinstance(got, torch.Tensor) or got.shape != expected.shape:
        return f"expected shape (B, T, H, W) = {tuple(expected.shape)}, got {shape_of(got)}"
    got = got.detach()
    if torch.allclose(got, expected, atol=1e-6):
        return ""
    position_major = lengths.view(2, grid, grid, types).permute(0, 3, 1, 2)  # (B, T, H, W)
    if torch.allclose(got, position_major, atol=1e-6):
        return ("you read the capsules as position-major (B, H, W, T); capsedu stores them "
                "type-major: view the lengths as (B, T, H, W)")
    if torch.allclose(got, (u * u).sum(-1).view(2, types, grid, grid), atol=1e-6):
        return "those are squared lengths: take the square root (u.norm(dim=-1))"
    return "the maps differ: compute u.norm(dim=-1) (B, I), then view it as (B, T, H, W)"


def check_length_map(fn: LengthMapFn, *, quiet: bool = False) -> CheckResult:
    r"""Check ``fn(u, num_types, grid)`` turns capsules (B, I, D) into lengths (B, T, H, W)."""
    return verdict(_length_map_hint(fn),
                   "length maps are right: capsule i = t*H*W + y*W + x sits at [t, y, x]", quiet=quiet)
