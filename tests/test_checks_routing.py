"""Tests for capsedu.course.checks.routing: right answers pass, each typical bug gets its own hint."""

from __future__ import annotations

import pytest
import torch

from capsedu import dynamic_routing, squash
from capsedu.course.checks._kit import STUB_HINT
from capsedu.course.checks.routing import MISTAKES, check_routing, routing_with_mistake
from capsedu.course.checks.routing_exercises import (
    check_logit_changes,
    check_predictions,
    check_wrong_axis_output,
    logit_changes_reference,
)

pytestmark = pytest.mark.unit


def make_routing(softmax_dim=2, do_squash=True, update="add", extra=0, c_after_update=False,
                 batch="own", start="zeros"):
    """Procedure 1 (vectorised) with one optional bug, returning (v, c)."""
    def routing(u_hat, routing_iterations):
        b = torch.zeros(u_hat.shape[:3]) if start == "zeros" else torch.randn(u_hat.shape[:3])
        if batch == "mean":  # pyCapsNet: one b for the batch, moved by the batch mean
            b = b[:1]
        for _ in range(routing_iterations + extra):
            c = torch.softmax(b, dim=softmax_dim).expand(u_hat.shape[:3])
            s = (c.unsqueeze(-1) * u_hat).sum(dim=1)
            v = squash(s) if do_squash else s
            agreement = (u_hat * (s if update == "with s" else v).unsqueeze(1)).sum(-1)
            if batch == "mean":
                agreement = agreement.mean(dim=0, keepdim=True)
            b = {"add": b + agreement, "with s": b + agreement, "replace": agreement, "none": b,
                 "subtract": b - agreement}[update]
        if c_after_update:
            c = torch.softmax(b, dim=softmax_dim)
        return v, c
    return routing


def make_loop(reset_per_image=True):
    """Procedure 1 one image and one capsule at a time, optionally carrying b between images."""
    def routing(u_hat, routing_iterations):
        batch, num_in, num_out, dim = u_hat.shape
        v, c = torch.zeros(batch, num_out, dim), torch.zeros(batch, num_in, num_out)
        b = torch.zeros(num_in, num_out)
        for n in range(batch):
            if reset_per_image:
                b = torch.zeros(num_in, num_out)
            for iteration in range(routing_iterations):
                for i in range(num_in):
                    c[n, i] = torch.softmax(b[i], dim=0)
                for j in range(num_out):
                    v[n, j] = squash(sum(c[n, i, j] * u_hat[n, i, j] for i in range(num_in)))
                if iteration < routing_iterations - 1:
                    for i in range(num_in):
                        for j in range(num_out):
                            b[i, j] = b[i, j] + u_hat[n, i, j] @ v[n, j]
        return v, c
    return routing


def stub(*args):
    raise NotImplementedError("write your solution here, then run the check below")


def test_check_routing_passes_capsedu_a_plain_implementation_and_a_loop(capsys):
    assert check_routing(dynamic_routing)
    assert check_routing(make_routing())
    assert check_routing(make_loop())
    assert "✅" in capsys.readouterr().out


def test_check_routing_on_the_handout_stub_says_not_written_yet():
    result = check_routing(stub, quiet=True)
    assert not result and STUB_HINT in result.message


@pytest.mark.parametrize("bug, words", [
    ({"softmax_dim": 1}, "output capsules J (dim=2)"),  # labml
    ({"batch": "mean"}, "same couplings"),  # pyCapsNet
    ({"update": "replace"}, "replaced by the agreement"),  # the MultiMNIST blog post
    ({"do_squash": False}, "not squashed"),
    ({"update": "none"}, "never change"),
    ({"update": "with s"}, "unsquashed sum"),
    ({"update": "subtract"}, "you subtracted it"),
    ({"start": "random"}, "b must start at 0"),
    ({"extra": 1}, "ran 4 iterations when asked for 3"),
    ({"extra": -1}, "ran 2 iterations when asked for 3"),
    ({"c_after_update": True}, "v is right but c is not"),
])
def test_check_routing_names_each_bug(bug, words, capsys):
    result = check_routing(make_routing(**bug))
    assert not result
    assert words in result.message
    assert "❌" in capsys.readouterr().out


def test_check_routing_names_logits_carried_from_one_image_to_the_next():
    result = check_routing(make_loop(reset_per_image=False), quiet=True)
    assert not result and "carries over from one image to the next" in result.message


def test_check_routing_wrong_return_type_and_errors():
    assert "tuple (v, c)" in check_routing(lambda u_hat, r: u_hat, quiet=True).message
    assert "raised ZeroDivisionError" in check_routing(lambda u_hat, r: 1 / 0, quiet=True).message
    def summed(u_hat, r):
        return u_hat.sum(1).sum(1), dynamic_routing(u_hat, r)[1]
    wrong_shape = check_routing(summed, quiet=True)
    assert "v must have shape (B, J, D)" in wrong_shape.message


@pytest.mark.parametrize("mistake", MISTAKES)
def test_routing_with_mistake_matches_the_plain_buggy_versions(mistake):
    u_hat = torch.randn(3, 6, 4, 5)
    plain = {"softmax over inputs": {"softmax_dim": 1}, "batch mean": {"batch": "mean"},
             "replace": {"update": "replace"}, "agreement with s": {"update": "with s"},
             "subtract": {"update": "subtract"}, "no update": {"update": "none"}}[mistake]
    v, c = routing_with_mistake(u_hat, 3, mistake)
    v_plain, c_plain = make_routing(**plain)(u_hat, 3)
    torch.testing.assert_close(v, v_plain)
    torch.testing.assert_close(c, c_plain)
    with pytest.raises(ValueError, match="mistake must be one of"):
        routing_with_mistake(u_hat, 3, "typo")


def test_check_wrong_axis_output_passes_the_mean_vote_and_the_routing_itself():
    assert check_wrong_axis_output(lambda u_hat: squash(u_hat.mean(dim=1)), quiet=True)
    assert check_wrong_axis_output(lambda u_hat: routing_with_mistake(u_hat, 1, "softmax over inputs")[0],
                                   quiet=True)
    assert STUB_HINT in check_wrong_axis_output(stub, quiet=True).message


@pytest.mark.parametrize("fn, words", [
    (lambda u_hat: squash(u_hat.sum(dim=1) / u_hat.shape[2]), "right axis's first iteration"),
    (lambda u_hat: dynamic_routing(u_hat, 1)[0], "right axis's first iteration"),
    (lambda u_hat: squash(u_hat.sum(dim=1)), "every c_ij = 1 is no softmax"),
    (lambda u_hat: u_hat.mean(dim=1), "squash s_j (Eq. 1)"),
    (lambda u_hat: squash(u_hat.mean(dim=1), dim=1), "squash runs over the wrong axis"),
    (lambda u_hat: dynamic_routing(u_hat, 3)[0], "right routing after 3 iterations"),
    (lambda u_hat: squash(u_hat.mean(dim=1) / 12), "not the first iteration's v"),  # I built in
    (lambda u_hat: squash(u_hat.mean(dim=2)), "got (2, 12, 5)"),
])
def test_check_wrong_axis_output_names_each_bug(fn, words):
    result = check_wrong_axis_output(fn, quiet=True)
    assert not result and words in result.message, result.message


def _changes(u_hat, r, measure):
    b, values = torch.zeros(u_hat.shape[:3]), []
    for _ in range(r - 1):
        c = torch.softmax(b, dim=2)
        v = squash((c.unsqueeze(-1) * u_hat).sum(dim=1))
        delta = (u_hat * v.unsqueeze(1)).sum(-1)
        values.append(measure(b, delta))
        b = b + delta
    return torch.stack(values)


def test_check_logit_changes_passes_a_tensor_and_a_list():
    assert check_logit_changes(logit_changes_reference, quiet=True)
    assert check_logit_changes(lambda u_hat, r: [float(x) for x in logit_changes_reference(u_hat, r)],
                               quiet=True)
    assert STUB_HINT in check_logit_changes(stub, quiet=True).message


@pytest.mark.parametrize("measure, words", [
    (lambda b, delta: (b + delta).abs().mean(), "logits b themselves"),
    (lambda b, delta: delta.mean(), "take |Δb| before averaging"),
    (lambda b, delta: delta.abs().max(), "largest change is not the mean"),
    (lambda b, delta: (torch.softmax(b + delta, 2) - torch.softmax(b, 2)).abs().mean(), "change of the couplings c"),
    (lambda b, delta: 2 * delta.abs().mean(), "not the mean |Δb| of each update"),
])
def test_check_logit_changes_names_each_bug(measure, words):
    result = check_logit_changes(lambda u_hat, r: _changes(u_hat, r, measure), quiet=True)
    assert not result and words in result.message, result.message


def test_check_logit_changes_wants_one_value_per_update():
    def one_too_many(u_hat, r):
        return _changes(u_hat, r + 1, lambda b, delta: delta.abs().mean())
    result = check_logit_changes(one_too_many, quiet=True)
    assert not result and "return r - 1 values" in result.message


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
