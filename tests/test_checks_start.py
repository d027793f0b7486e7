"""Tests for capsedu.course.checks.start: right answers pass, typical mistakes get their own hint."""

import pytest
import torch

from capsedu.course.checks.start import check_capsule_length, check_pose_angle

pytestmark = pytest.mark.unit


def test_capsule_length_passes_with_the_euclidean_norm(capsys):
    result = check_capsule_length(lambda v: torch.sqrt((v ** 2).sum(dim=-1)))
    assert result.passed and result.message.startswith("✅")
    assert result.message in capsys.readouterr().out
    assert check_capsule_length(lambda v: v.norm(dim=-1))


def test_capsule_length_hints():
    cases = {
        "squared length": lambda v: (v ** 2).sum(dim=-1),
        "added the components": lambda v: v.sum(dim=-1),
        "L1 norm": lambda v: v.abs().sum(dim=-1),
        "largest component": lambda v: v.abs().max(dim=-1).values,
        "drop keepdim": lambda v: v.norm(dim=-1, keepdim=True),
        "use dim=-1": lambda v: v.norm(dim=0),
        "one number for all capsules": lambda v: v.norm(),
        "raised ZeroDivisionError": lambda v: 1 / 0,
        "return a torch.Tensor": lambda v: v.norm(dim=-1).tolist(),
        "use sqrt(sum(v²))": lambda v: v.norm(dim=-1) + 1,
    }
    for hint, fn in cases.items():
        result = check_capsule_length(fn)
        assert not result.passed and result.message.startswith("❌"), hint
        assert hint in result.message, (hint, result.message)


def test_pose_angle_passes_in_both_angle_conventions():
    assert check_pose_angle(lambda v: torch.rad2deg(torch.atan2(v[:, 1], v[:, 0])))
    assert check_pose_angle(lambda v: torch.rad2deg(torch.atan2(v[:, 1], v[:, 0])) % 360)


def test_pose_angle_hints():
    cases = {
        "radians": lambda v: torch.atan2(v[:, 1], v[:, 0]),
        "loses the quadrant": lambda v: torch.rad2deg(torch.atan(v[:, 1] / v[:, 0])),
        "swapped": lambda v: torch.rad2deg(torch.atan2(v[:, 0], v[:, 1])),
        "one angle per capsule": lambda v: torch.rad2deg(torch.atan2(v[:, 1:], v[:, :1])),
        "points at": lambda v: v.norm(dim=-1),
    }
    for hint, fn in cases.items():
        result = check_pose_angle(fn)
        assert not result.passed, hint
        assert hint in result.message, (hint, result.message)
