"""Tests for capsedu.course.checks.routing: right answers pass, each typical bug gets its own hint."""

from __future__ import annotations

import pytest
import torch

from capsedu import dynamic_routing, squash
from capsedu.course.checks.routing import check_predictions, check_routing, check_routing_history

pytestmark = pytest.mark.unit


def make_routing(softmax_dim=2, do_squash=True, update="add", extra=0, c_after_update=False):
    """Procedure 1 with one optional bug, returning (v, c)."""
    def routing(u_hat, routing_iterations):
        b = torch.zeros(u_hat.shape[:3])
        for _ in range(routing_iterations + extra):
            c = torch.softmax(b, dim=softmax_dim)
            s = (c.unsqueeze(-1) * u_hat).sum(dim=1)
            v = squash(s) if do_squash else s
            agreement = (u_hat * v.unsqueeze(1)).sum(-1)
            b = {"add": b + agreement, "replace": agreement, "none": b}[update]
        if c_after_update:
            c = torch.softmax(b, dim=softmax_dim)
        return v, c
    return routing


def make_history(softmax_dim=2, update="add", shift=False, alias=False):
    def history(u_hat, routing_iterations):
        b = torch.zeros(u_hat.shape[:3])
        c = torch.softmax(b, dim=softmax_dim)
        out = []
        for _ in range(routing_iterations):
            c_new = torch.softmax(b, dim=softmax_dim)
            if alias:
                c.copy_(c_new)
            else:
                c = c_new
            if not shift:
                out.append(c)
            v = squash((c.unsqueeze(-1) * u_hat).sum(dim=1))
            agreement = (u_hat * v.unsqueeze(1)).sum(-1)
            b = b + agreement if update == "add" else (agreement if update == "replace" else b)
            if shift:
                out.append(torch.softmax(b, dim=softmax_dim))
        return out
    return history


def test_check_routing_passes_capsedu_and_a_plain_implementation(capsys):
    assert check_routing(dynamic_routing)
    assert check_routing(make_routing())
    assert "✅" in capsys.readouterr().out


@pytest.mark.parametrize("bug, words", [
    ({"softmax_dim": 1}, "output capsules J (dim=2)"),
    ({"do_squash": False}, "not squashed"),
    ({"update": "none"}, "never change"),
    ({"update": "replace"}, "replaced by the agreement"),
    ({"extra": 1}, "ran 4 iterations when asked for 3"),
    ({"extra": -1}, "ran 2 iterations when asked for 3"),
    ({"c_after_update": True}, "v is right but c is not"),
])
def test_check_routing_names_each_bug(bug, words, capsys):
    result = check_routing(make_routing(**bug))
    assert not result
    assert words in result.message
    assert "❌" in capsys.readouterr().out


def test_check_routing_wrong_return_type_and_errors():
    assert "tuple (v, c)" in check_routing(lambda u_hat, r: u_hat, quiet=True).message
    assert "raised ZeroDivisionError" in check_routing(lambda u_hat, r: 1 / 0, quiet=True).message
    def summed(u_hat, r):
        return u_hat.sum(1).sum(1), dynamic_routing(u_hat, r)[1]
    wrong_shape = check_routing(summed, quiet=True)
    assert "v must have shape (B, J, D)" in wrong_shape.message


def test_check_routing_history_passes_reference():
    def reference(u_hat, r):
        return [dynamic_routing(u_hat, k)[1] for k in range(1, r + 1)]
    assert check_routing_history(reference, quiet=True)
    assert check_routing_history(make_history(), quiet=True)


@pytest.mark.parametrize("bug, words", [
    ({"softmax_dim": 1}, "output capsules J"),
    ({"update": "none"}, "never change"),
    ({"update": "replace"}, "replaced by the agreement"),
    ({"shift": True}, "shifted by one iteration"),
    ({"alias": True}, "updated in place"),
])
def test_check_routing_history_names_each_bug(bug, words):
    result = check_routing_history(make_history(**bug), quiet=True)
    assert not result and words in result.message


def test_check_routing_history_wrong_length_and_type():
    short = check_routing_history(lambda u_hat, r: make_history()(u_hat, r)[:-1], quiet=True)
    assert "one c per iteration (4 tensors), got 3" in short.message
    assert "list of r tensors" in check_routing_history(lambda u_hat, r: 0, quiet=True).message


def test_check_predictions_passes_matmul_and_einsum():
    assert check_predictions(lambda W, u: torch.einsum("ijdk,bik->bijd", W, u), quiet=True)
    assert check_predictions(lambda W, u: (W @ u[:, :, None, :, None]).squeeze(-1), quiet=True)


@pytest.mark.parametrize("fn, words", [
    (lambda W, u: W @ u[:, :, None, :, None], "squeeze(-1)"),
    (lambda W, u: torch.einsum("ijdk,bik->bjid", W, u), "(B, J, I, D_out)"),
    (lambda W, u: torch.einsum("ijkd,bik->bijd", W, u), "raised"),  # D_out != D_in: fails loudly
    (lambda W, u: torch.einsum("ijdk,bik->bijd", W, u) * 2, "which axis of W"),
])
def test_check_predictions_names_each_bug(fn, words):
    result = check_predictions(fn, quiet=True)
    assert not result and words in result.message


def test_check_predictions_detects_transposed_W_when_square():
    def transposed_if_square(W, u):
        if W.shape[-1] == W.shape[-2]:
            return torch.einsum("ijkd,bik->bijd", W, u)
        return torch.einsum("ijdk,bik->bijd", W, u)
    result = check_predictions(transposed_if_square, quiet=True)
    assert not result and "W_ij transposed" in result.message
