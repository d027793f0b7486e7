"""capsedu.course.checks.robustness, check_rotate: the right turn passes, each typical mistake
gets its own hint (the probe and orientation checks are tested in tests/test_robustness.py)."""

import math

import pytest
import torch
import torch.nn.functional as F

from capsedu.course.checks._kit import STUB_HINT
from capsedu.course.checks.robustness import check_rotate
from capsedu.data.transforms import transform_images

pytestmark = pytest.mark.unit


def rotate_with(angle_to_radians=math.radians, sign=1.0, corner=False, align_corners=False,
                mode="bilinear"):
    def fn(images, angle):
        a = sign * angle_to_radians(angle)
        cos, sin = math.cos(a), math.sin(a)
        # about the corner c = (-1, -1): t = c - R c
        shift = (-1 - (-cos + sin), -1 - (-sin - cos)) if corner else (0.0, 0.0)
        theta = torch.tensor([[cos, -sin, shift[0]], [sin, cos, shift[1]]]).expand(len(images), 2, 3)
        grid = F.affine_grid(theta, list(images.shape), align_corners=align_corners)
        return F.grid_sample(images, grid, mode=mode, padding_mode="zeros", align_corners=False)
    return fn


def stub(images, angle):
    raise NotImplementedError


def both_corners(images, angle):  # align_corners=True in both calls is the same turn
    a = math.radians(angle)
    theta = torch.tensor([[math.cos(a), -math.sin(a), 0.0], [math.sin(a), math.cos(a), 0.0]])
    grid = F.affine_grid(theta.expand(len(images), 2, 3), list(images.shape), align_corners=True)
    return F.grid_sample(images, grid, mode="bilinear", align_corners=True)


def test_the_right_turn_and_capsedus_pass(capsys):
    assert check_rotate(rotate_with()) and check_rotate(both_corners)
    assert check_rotate(lambda images, angle: transform_images(images, angle=angle))
    assert capsys.readouterr().out.count("✅") == 3


@pytest.mark.parametrize("fn, hint", [
    (stub, STUB_HINT),
    (rotate_with(angle_to_radians=float), "radians"),
    (rotate_with(sign=-1.0), "clockwise"),
    (rotate_with(corner=True), "top-left corner"),
    (rotate_with(align_corners=True), "the same align_corners"),
    (rotate_with(mode="nearest"), "bilinearly"),
    (lambda images, angle: rotate_with()(images, angle)[:, 0], "shape"),
    (lambda images, angle: rotate_with()(images, angle / 2), "the pictures differ"),
    (lambda images, angle: 1 / 0, "ZeroDivisionError"),
])
def test_rotate_mistakes_get_their_hint(fn, hint):
    result = check_rotate(fn, quiet=True)
    assert not result and hint in result.message, result.message
