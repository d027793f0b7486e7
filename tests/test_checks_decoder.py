"""Tests for capsedu.course.checks.decoder: right answers pass, typical mistakes get their own hint."""

import pytest
import torch
from conftest import assert_hint
from torch import nn

from capsedu import CapsNet, CapsNetConfig, mask_capsules, reconstruction_loss
from capsedu.course.checks._kit import STUB_HINT
from capsedu.course.checks.decoder import check_decoder, check_mask, check_reconstruction_loss
from capsedu.course.checks.decoder_exercises import check_closest_input, check_reconstruct_as
from capsedu.nets.capsnet import decoder_network

pytestmark = pytest.mark.unit


# ---------------------------------------------------------------- masking

def stub(*args):
    raise NotImplementedError("write your solution here, then run the check below")


def right_mask(capsules, labels=None):
    if labels is None:
        labels = capsules.norm(dim=-1).argmax(dim=1)
    keep = torch.zeros(capsules.shape[:2])
    keep[torch.arange(len(labels)), labels] = 1
    return (capsules * keep[..., None]).reshape(len(capsules), -1)


def by_index(pick):
    def mask(capsules, labels=None):
        chosen = pick(capsules) if labels is None else labels
        return mask_capsules(capsules, chosen)
    return mask


def test_check_mask_passes(capsys):
    result = check_mask(right_mask)
    assert result.passed and result.message.startswith("✅")
    assert result.message in capsys.readouterr().out
    assert check_mask(mask_capsules)


@pytest.mark.parametrize("wrong, fragment", [
    (lambda c, labels=None: mask_capsules(c, labels).view(c.shape), "flatten"),
    (lambda c, labels=None: c.flatten(1), "nothing was masked"),
    (lambda c, labels=None: mask_capsules(c), "TRUE class"),
    (by_index(lambda c: c.norm(dim=-1).argmin(dim=1)), "argmax, not argmin"),
    (by_index(lambda c: c.sum(dim=-1).argmax(dim=1)), "sum of its components"),
    (by_index(lambda c: c.amax(dim=-1).argmax(dim=1)), "largest component"),
    (lambda c, labels=None: 2 * mask_capsules(c, labels), "values changed"),
    (lambda c, labels: mask_capsules(c, labels), "without labels"),
    (lambda c, labels=None: mask_capsules(c, labels)[:, :16], "expected shape"),
    (lambda c, labels=None: mask_capsules(c, labels).numpy(), "return a torch.Tensor"),
])
def test_check_mask_hints(wrong, fragment):
    assert_hint(check_mask(wrong), fragment)


def mask_dimensions(capsules, labels=None):
    """The wrong axis: the (B, J) one-hot broadcast as (B, 1, J), over the capsule's numbers."""
    if labels is None:
        labels = capsules.norm(dim=-1).argmax(dim=1)
    keep = torch.nn.functional.one_hot(labels, capsules.shape[1]).to(capsules)
    return (capsules * keep.unsqueeze(1)).flatten(1)


def argmax_over(lengths_of, dim):
    def mask(capsules, labels=None):
        if labels is None:
            labels = lengths_of(capsules).argmax(dim=dim)
        keep = torch.nn.functional.one_hot(labels, capsules.shape[1]).to(capsules)
        return (capsules * keep.unsqueeze(-1)).flatten(1)
    return mask


@pytest.mark.parametrize("wrong, fragment", [
    (mask_dimensions, "DIMENSIONS, not capsules"),
    (argmax_over(lambda c: c.norm(dim=-1), 0), "not over the batch"),
    (argmax_over(lambda c: c.norm(dim=1), 1), "not over the classes"),
])
def test_check_mask_names_the_wrong_axis(wrong, fragment):
    assert_hint(check_mask(wrong), fragment)


def test_check_mask_stub():
    assert_hint(check_mask(stub), STUB_HINT)


def test_check_mask_missing_labels_argument_is_reported():
    assert_hint(check_mask(lambda c: mask_capsules(c)), "raised TypeError")


# ---------------------------------------------------------------- decoder

def decoder(*layers):
    return nn.Sequential(*layers)


def paper_layers():
    return [nn.Linear(160, 512), nn.ReLU(), nn.Linear(512, 1024), nn.ReLU(),
            nn.Linear(1024, 784), nn.Sigmoid()]


def test_check_decoder_passes():
    result = check_decoder(decoder(*paper_layers()))
    assert result.passed and "1,411,344" in result.message
    assert check_decoder(CapsNet(CapsNetConfig.paper()).decoder)


def test_check_decoder_hints():
    layers = paper_layers()
    assert_hint(check_decoder(decoder(nn.Linear(160, 512), nn.ReLU(), nn.Linear(512, 784),
                                      nn.Sigmoid())), "160 -> 512 -> 1024 -> 784")
    assert_hint(check_decoder(decoder(nn.Linear(16, 512), *layers[1:])), "reads 16 numbers")
    assert_hint(check_decoder(decoder(nn.Linear(32, 512), *layers[1:])), "[(32, 512)")
    assert_hint(check_decoder(decoder(layers[0], layers[2], layers[3], *layers[4:])), "ReLU")
    assert_hint(check_decoder(decoder(*layers[:5])), "Sigmoid")
    assert_hint(check_decoder(decoder(*layers[:5], nn.Tanh())), "Sigmoid")
    assert_hint(check_decoder("decoder"), "nn.Module")


def test_check_decoder_takes_a_builder_and_names_its_mistakes():
    assert check_decoder(lambda: decoder(*paper_layers()))
    assert check_decoder(lambda in_features=160, hidden=(512, 1024), pixels=784:
                         decoder_network(in_features, hidden, pixels))
    assert_hint(check_decoder(stub), STUB_HINT)
    layers = paper_layers()
    # the blog's decoder reads the kept capsule's 16 numbers alone
    assert_hint(check_decoder(lambda: decoder(nn.Linear(16, 512), *layers[1:])), "reads 16 numbers")
    assert_hint(check_decoder(lambda: decoder(*layers[:5], nn.ReLU())), "ends in a ReLU")
    assert_hint(check_decoder(lambda: decoder(*layers[:5])), "end with a Sigmoid")
    assert_hint(check_decoder(lambda: decoder(nn.Linear(160, 256), *layers[1:])), "160 -> 512 -> 1024 -> 784")
    assert_hint(check_decoder(lambda: decoder(layers[0], layers[2], *layers[3:])), "ReLU after each")
    assert_hint(check_decoder(lambda: 1 / 0), "raised ZeroDivisionError")


def test_check_decoder_leaves_the_learners_random_state_alone():
    torch.manual_seed(5)
    expected = torch.rand(2)
    torch.manual_seed(5)
    check_decoder(lambda: decoder(*paper_layers()), quiet=True)
    assert torch.equal(torch.rand(2), expected)


# ---------------------------------------------------------------- reconstruction loss

def sse(recon, images):
    diff = recon.reshape(len(images), -1) - images.reshape(len(images), -1)
    return (diff ** 2).sum(dim=1).mean()


def test_check_reconstruction_loss_stub():
    assert_hint(check_reconstruction_loss(stub), STUB_HINT)


def test_check_reconstruction_loss_passes():
    assert check_reconstruction_loss(sse)
    assert check_reconstruction_loss(reconstruction_loss)


@pytest.mark.parametrize("wrong, fragment", [
    (lambda r, i: ((r.reshape(len(i), -1) - i.reshape(len(i), -1)) ** 2).mean(), "mean squared"),
    (lambda r, i: ((r.reshape(len(i), -1) - i.reshape(len(i), -1)) ** 2).sum(), "AVERAGE over the batch"),
    (lambda r, i: 0.0005 * sse(r, i), "belongs to the total loss"),
    # the blog's and the advanced notebook's term: F.mse_loss x 0.0005
    (lambda r, i: 0.0005 * nn.functional.mse_loss(r, i.reshape(len(i), -1)), "784 x 2000 too small"),
    (lambda r, i: nn.functional.mse_loss(r, i.reshape(len(i), -1)), "F.mse_loss"),
    (lambda r, i: (r.reshape(len(i), -1) - i.reshape(len(i), -1)).abs().sum(dim=1).mean(), "square"),
    (lambda r, i: (r.reshape(len(i), -1) - i.reshape(len(i), -1)).norm(dim=1).mean(), "square root"),
    (lambda r, i: ((r - i) ** 2).sum(dim=1).mean(), "Reshape both"),
    (lambda r, i: sse(r, i) + 1.0, "expected"),
    (lambda r, i: sse(r, i).item(), "0-D tensor"),
])
def test_check_reconstruction_loss_hints(wrong, fragment):
    assert_hint(check_reconstruction_loss(wrong), fragment)


# ---------------------------------------------------------------- reconstruct_as

def reconstruct_as(model, images, digit):
    capsules = model(images).capsules
    return model.decode(capsules, torch.full((len(images),), digit))


def test_check_reconstruct_as_passes():
    result = check_reconstruct_as(reconstruct_as)
    assert result.passed and "capsule" in result.message


def test_check_reconstruct_as_hints():
    assert_hint(check_reconstruct_as(lambda m, x, d: m(x).reconstruction), "longest capsule")
    assert_hint(check_reconstruct_as(lambda m, x, d: reconstruct_as(m, x, d).flatten(1)), "shape")
    assert_hint(check_reconstruct_as(lambda m, x, d: reconstruct_as(m, x, (d + 1) % 10)),
                "model.decode")
    assert_hint(check_reconstruct_as(lambda m, x: m(x).reconstruction), "raised TypeError")


# ---------------------------------------------------------------- closest input (Exercise 2)

def closest(recon, images):
    n = len(images)
    errors = ((recon.reshape(n, 1, -1) - images.reshape(1, n, -1)) ** 2).sum(dim=-1)
    return errors.argmin(dim=1)


def errors_of(recon, images):
    n = len(images)
    return ((recon.reshape(n, 1, -1) - images.reshape(1, n, -1)) ** 2).sum(dim=-1)


def test_check_closest_input_passes():
    result = check_closest_input(closest)
    assert result.passed and "nearest" in result.message
    assert check_closest_input(lambda r, i: torch.cdist(r.flatten(1), i.flatten(1)).argmin(dim=1))


@pytest.mark.parametrize("wrong, fragment", [
    (lambda r, i: errors_of(r, i).argmin(dim=0), "wrong axis"),
    (lambda r, i: errors_of(r, i).argmax(dim=1), "FARTHEST"),
    (lambda r, i: (errors_of(r, i) + torch.diag(torch.full((len(i),), float("inf")))).argmin(dim=1), "own input out"),
    (errors_of, "table of distances"),
    (lambda r, i: closest(r, i).float(), "integer tensor"),
    (lambda r, i: (closest(r, i) + 1) % len(i), "smallest, per reconstruction"),
    (stub, STUB_HINT),
])
def test_check_closest_input_hints(wrong, fragment):
    assert_hint(check_closest_input(wrong), fragment)
